// Orphans: queued resources and nodes that carry jobman's labels but that no attempt in the store holds, left behind by
// a supervisor that died at the wrong moment, a store that was removed, or a slice released by hand. `jobman sync`
// lists (and deletes) them; the supervisor sweeps them when it starts and then every sweep interval. Both list the
// cloud first and read the store after, so that a resource created meanwhile (its name is recorded before its request
// leaves) is never taken for an orphan.
#pragma once

#include "jobman/cloud/tpu_client.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::core {

// What a resource is in the TPU API.
enum class ResourceKind { queued_resource, node };

// "queued-resource" or "node", as `sync` prints it.
std::string_view to_string(ResourceKind kind);

// What one zone holds: one queuedResources.list and one nodes.list.
struct ZoneListing {
  std::string zone;                                    // The zone listed.
  std::vector<cloud::QueuedResource> queued_resources; // Every queued resource there.
  std::vector<cloud::Node> nodes;                      // Every node there, those of queued resources included.
};

// Lists the queued resources and the nodes of `zone` (one list call each, every page); throws cloud::ApiError.
ZoneListing list_zone(const CloudAccess& access, const std::string& zone);

// A resource with jobman's labels that no attempt holds.
struct Orphan {
  ResourceKind kind = ResourceKind::queued_resource; // A queued resource (with its nodes) or a standalone node.
  std::string name;                                  // Its id, the last part of its resource name.
  std::string zone;                                  // Where it is.
  std::string state;                                 // The API's state ("ACTIVE", "READY", ...).
  std::optional<std::int64_t> created_ms;            // createTime, when the API gave a valid one.
  std::optional<std::int64_t> job_id;                // The job its jobman-job-id label names, when it is a job id.
  std::string owner;                                 // Its jobman-owner label.
  std::string attempt;                               // Its jobman-attempt label; empty when absent.
  std::vector<std::string> nodes;                    // A queued resource's nodes (tpu.nodeSpec[].nodeId).

  // How old it is at `now_ms`; nullopt when its creation time is unknown.
  [[nodiscard]] std::optional<std::int64_t> age_ms(std::int64_t now_ms) const;
  // Whether the API is already deleting it.
  [[nodiscard]] bool deleting() const { return state == "DELETING"; }
};

// Which orphans to report.
struct OrphanFilter {
  std::set<std::string> owners; // Only resources whose jobman-owner label is one of these; empty: any owner.
  std::string store; // Only resources whose jobman-store label is this, or that have none (made before resources
                     // named their store); empty: any store.
  std::optional<std::int64_t> older_than_ms; // Only resources created longer ago than this (an unknown age never is).
  std::int64_t now_ms = 0;                   // The time ages are measured at.
};

// The orphans among `listings`, zone by zone in listing order, queued resources first: every queued resource and
// standalone node with a jobman-owner label (matching `filter`) whose name no slice of `held` gives as its queued
// resource or node. A node that a listed queued resource names is part of it and never reported alone.
std::vector<Orphan> find_orphans(const std::vector<ZoneListing>& listings, const std::vector<store::HeldSlice>& held,
                                 const OrphanFilter& filter);

// The zones jobman may have resources in: every zone of a job or an attempt in the store, and `settings_zone`; sorted,
// without duplicates or empty names.
std::vector<std::string> zones_in_use(const store::JobStore& store, const std::string& settings_zone);

// Sends the delete of `orphan`: queuedResources.delete with force (which takes its node), or nodes.delete. Its
// operation, or nullopt when the resource was already gone. Throws cloud::ApiError.
std::optional<cloud::Operation> delete_orphan(const CloudAccess& access, const Orphan& orphan);

// "queued resource NAME in ZONE" or "node NAME in ZONE", for messages.
std::string describe(const Orphan& orphan);

} // namespace jobman::core
