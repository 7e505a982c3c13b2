// Orphans: listing a zone, telling jobman's resources that no attempt holds from the rest, deleting them (see
// orphans.hpp).
#include "jobman/core/orphans.hpp"

#include "jobman/core/plan.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <set>

namespace jobman::core {

namespace {

std::string label(const std::map<std::string, std::string>& labels, const char* key) {
  const auto found = labels.find(key);
  return found == labels.end() ? std::string() : found->second;
}

// A jobman resource (one with an owner label) that `filter` lets through, as an orphan; nullopt for any other.
std::optional<Orphan> candidate(ResourceKind kind, const std::string& name, const std::string& zone,
                                const std::string& state, const std::string& create_time,
                                const std::map<std::string, std::string>& labels, const OrphanFilter& filter) {
  const auto owner = labels.find(kOwnerLabel);
  if (owner == labels.end() || (!filter.owners.empty() && !filter.owners.contains(owner->second))) {
    return std::nullopt;
  }
  if (const auto store = labels.find(kStoreLabel);
      !filter.store.empty() && store != labels.end() && store->second != filter.store) {
    return std::nullopt; // Another store's: its own supervisor holds it or sweeps it.
  }
  Orphan orphan;
  orphan.kind = kind;
  orphan.name = name;
  orphan.zone = zone;
  orphan.state = state;
  orphan.created_ms = util::parse_utc(create_time);
  orphan.owner = owner->second;
  orphan.attempt = label(labels, kAttemptLabel);
  if (auto id = domain::parse_job_id(label(labels, kJobIdLabel))) {
    orphan.job_id = *id;
  }
  if (filter.older_than_ms) {
    const auto age = orphan.age_ms(filter.now_ms);
    if (!age || *age <= *filter.older_than_ms) {
      return std::nullopt;
    }
  }
  return orphan;
}

} // namespace

std::string_view to_string(ResourceKind kind) {
  return kind == ResourceKind::queued_resource ? "queued-resource" : "node";
}

std::optional<std::int64_t> Orphan::age_ms(std::int64_t now_ms) const {
  if (!created_ms) {
    return std::nullopt;
  }
  return std::max<std::int64_t>(0, now_ms - *created_ms);
}

ZoneListing list_zone(const CloudAccess& access, const std::string& zone) {
  ZoneListing listing;
  listing.zone = zone;
  listing.queued_resources = access.client->list_queued_resources(access.location(zone), kListPageSize);
  listing.nodes = access.client->list_nodes(access.location(zone), kListPageSize);
  return listing;
}

std::vector<Orphan> find_orphans(const std::vector<ZoneListing>& listings, const std::vector<store::HeldSlice>& held,
                                 const OrphanFilter& filter) {
  // By name alone, whatever zone the attempt records: a name an attempt holds is never deleted, even if it turns up
  // in another zone than the attempt says.
  std::set<std::string> held_names;
  for (const auto& slice : held) {
    for (const auto* name : {&slice.queued_resource, &slice.node}) {
      if (!name->empty()) {
        held_names.insert(*name);
      }
    }
  }
  std::vector<Orphan> orphans;
  for (const auto& listing : listings) {
    std::set<std::string> nodes_of_queued_resources;
    for (const auto& qr : listing.queued_resources) {
      nodes_of_queued_resources.insert(qr.node_ids.begin(), qr.node_ids.end());
      const auto name = resource_name_id(qr.name);
      const bool held_by_name =
          held_names.contains(name) || std::any_of(qr.node_ids.begin(), qr.node_ids.end(),
                                                   [&](const std::string& node) { return held_names.contains(node); });
      if (held_by_name) {
        continue;
      }
      if (auto orphan = candidate(ResourceKind::queued_resource, name, listing.zone, cloud::to_string(qr.state),
                                  qr.create_time, qr.node_labels, filter)) {
        orphan->nodes = qr.node_ids;
        orphans.push_back(std::move(*orphan));
      }
    }
    for (const auto& node : listing.nodes) {
      const auto name = resource_name_id(node.name);
      if (nodes_of_queued_resources.contains(name) || held_names.contains(name)) {
        continue;
      }
      if (auto orphan = candidate(ResourceKind::node, name, listing.zone, cloud::to_string(node.state),
                                  node.create_time, node.labels, filter)) {
        orphans.push_back(std::move(*orphan));
      }
    }
  }
  return orphans;
}

std::vector<std::string> zones_in_use(const store::JobStore& store, const std::string& settings_zone) {
  auto zones = store.jobs().zones_in_use();
  if (!settings_zone.empty() && !std::binary_search(zones.begin(), zones.end(), settings_zone)) {
    zones.insert(std::lower_bound(zones.begin(), zones.end(), settings_zone), settings_zone);
  }
  return zones;
}

std::optional<cloud::Operation> delete_orphan(const CloudAccess& access, const Orphan& orphan) {
  if (orphan.kind == ResourceKind::queued_resource) {
    return access.client->delete_queued_resource(access.location(orphan.zone), orphan.name, cloud::DeleteMode::force);
  }
  return access.client->delete_node(access.location(orphan.zone), orphan.name);
}

std::string describe(const Orphan& orphan) {
  std::string text = orphan.kind == ResourceKind::queued_resource ? "queued resource " : "node ";
  text += orphan.name;
  text += " in ";
  text += orphan.zone;
  return text;
}

} // namespace jobman::core
