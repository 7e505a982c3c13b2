#include "jobman/core/zone_offers.hpp"

#include "jobman/store/zone_catalogs.hpp"
#include "jobman/util/strings.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace jobman::core {

namespace {

// What is known of one zone, and from where.
struct ZoneAnswer {
  OfferSource source = OfferSource::built_in;
  std::optional<store::ZoneCatalog> catalog; // Empty for built_in and for a zone that does not exist.
  bool missing = false;                      // The cloud answered NOT_FOUND: no such zone, or no TPU in it.
  std::string why;                           // For built_in: why the cloud was not asked or did not answer.
  std::int64_t age_ms = 0;                   // For cache: how old the answers are.
};

ZoneAnswer answer_for(store::JobStore& store, const OfferCloud& cloud, const std::string& zone, std::int64_t now_ms) {
  ZoneAnswer answer;
  auto cached = store.zone_catalogs().get(cloud.id, cloud.project, zone);
  if (cached && now_ms - cached->fetched_ms < kZoneCatalogTtlMs && now_ms >= cached->fetched_ms) {
    answer.source = OfferSource::cache;
    answer.age_ms = now_ms - cached->fetched_ms;
    answer.catalog = std::move(cached);
    return answer;
  }
  if (!cloud.client) {
    answer.why = cloud.unreachable;
    return answer;
  }
  const cloud::Location where{cloud.project, zone};
  try {
    store::ZoneCatalog fresh{cloud.id,
                             cloud.project,
                             zone,
                             cloud.client->list_accelerator_types(where),
                             cloud.client->list_runtime_versions(where),
                             now_ms};
    store.zone_catalogs().put(fresh);
    answer.source = OfferSource::cloud;
    answer.catalog = std::move(fresh);
  } catch (const cloud::ApiError& e) {
    if (e.http_status() == 404) {
      answer.source = OfferSource::cloud;
      answer.missing = true;
    } else {
      answer.why = e.what();
    }
  } catch (const std::exception& e) {
    answer.why = e.what();
  }
  return answer;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// "v4-8, v4-16, v4-32 and 9 more": a list that stays one line.
std::string some_of(const std::vector<std::string>& names) {
  constexpr std::size_t shown = 8;
  if (names.size() <= shown) {
    return util::join(names, ", ");
  }
  return util::join(std::vector<std::string>(names.begin(), names.begin() + shown), ", ") + " and " +
         std::to_string(names.size() - shown) + " more";
}

void check_config(const config::JobConfig& config, const ZoneAnswer& answer, const OfferCloud& cloud,
                  std::vector<Diagnostic>& problems) {
  const auto& tpu = config.tpu;
  const auto at = [&](const std::string& key) {
    const auto it = tpu.origins.find(key);
    return it == tpu.origins.end() ? SourceLocation{config.source_path, 0, 0, "tpu." + key} : it->second;
  };
  if (answer.missing) {
    problems.push_back({at("zone"), "the cloud knows no zone " + tpu.zone + " with TPUs (NOT_FOUND)",
                        "check the zone's name, or pick one where the accelerator is offered"});
    return;
  }
  if (!answer.catalog) {
    return;
  }
  const auto& offered = answer.catalog->accelerator_types;
  if (!contains(offered, tpu.accelerator.name)) {
    std::vector<std::string> same_generation;
    for (const auto& name : offered) {
      if (name.starts_with(tpu.accelerator.generation->name + "-")) {
        same_generation.push_back(name);
      }
    }
    problems.push_back({at("accelerator"), tpu.accelerator.name + " is not offered in " + tpu.zone,
                        same_generation.empty() ? (offered.empty() ? tpu.zone + " offers no accelerator types"
                                                                   : tpu.zone + " offers " + some_of(offered))
                                                : tpu.zone + " offers " + some_of(same_generation)});
  }
  // The tier: where the cloud says which it has (a mock's world), spot or preemptible draws on spot capacity.
  if (const auto zone = cloud.tiers.find(tpu.zone); zone != cloud.tiers.end() && tpu.accelerator.generation) {
    const auto& generation = tpu.accelerator.generation->name;
    const auto capacity = tpu.pricing == domain::Pricing::ondemand ? domain::Pricing::ondemand : domain::Pricing::spot;
    const std::string tier = capacity == domain::Pricing::ondemand ? "on_demand" : "spot";
    const auto offered_tiers = zone->second.find(generation);
    if (offered_tiers != zone->second.end() && !offered_tiers->second.contains(tier)) {
      std::vector<std::string> names;
      for (const auto& t : offered_tiers->second) {
        names.push_back(t == "on_demand" ? "on-demand" : t);
      }
      problems.push_back({at("pricing"),
                          generation + " " + domain::display_name(capacity) + " is not offered in " + tpu.zone,
                          tpu.zone + " has " + generation + " " + util::join(names, " and ") + " only"});
    }
  }
  const auto& versions = answer.catalog->runtime_versions;
  if (!versions.empty() && !contains(versions, tpu.version)) {
    const auto near = util::closest_match(tpu.version, versions);
    problems.push_back({at("version"), "runtime version '" + tpu.version + "' does not exist in " + tpu.zone,
                        near ? "did you mean '" + *near + "'?" : tpu.zone + " has " + some_of(versions)});
  }
}

} // namespace

std::string_view to_string(OfferSource source) {
  switch (source) {
  case OfferSource::cloud: return "cloud";
  case OfferSource::cache: return "cache";
  case OfferSource::built_in: return "built-in";
  }
  return "built-in";
}

OfferCheck check_zone_offers(store::JobStore& store, const OfferCloud& cloud,
                             const std::vector<config::JobConfig>& configs, std::int64_t now_ms) {
  std::map<std::string, ZoneAnswer> answers;
  for (const auto& config : configs) {
    for (const auto& candidate : config::candidates(config, config.tpu.pricing)) {
      if (!answers.contains(candidate.zone)) {
        answers.emplace(candidate.zone, answer_for(store, cloud, candidate.zone, now_ms));
      }
    }
  }
  OfferCheck check;
  check.source = OfferSource::cloud;
  std::vector<std::string> fresh;
  std::vector<std::string> cached;
  std::set<std::string> why_not;
  std::int64_t oldest_ms = 0;
  for (const auto& [zone, answer] : answers) {
    switch (answer.source) {
    case OfferSource::cloud: fresh.push_back(zone); break;
    case OfferSource::cache:
      cached.push_back(zone);
      oldest_ms = std::max(oldest_ms, answer.age_ms);
      if (check.source == OfferSource::cloud) {
        check.source = OfferSource::cache;
      }
      break;
    case OfferSource::built_in:
      why_not.insert(answer.why);
      check.source = OfferSource::built_in;
      break;
    }
  }
  for (const auto& config : configs) {
    const auto list = config::candidates(config, config.tpu.pricing);
    if (list.size() <= 1) {
      check_config(config, answers.at(config.tpu.zone), cloud, check.problems);
      continue;
    }
    // Several candidates: one the cloud does not offer is refused when asked and the next is tried, so the config
    // is wrong only when none of them is offered.
    std::vector<Diagnostic> refused;
    bool any_offered = false;
    for (const auto& candidate : list) {
      std::vector<Diagnostic> mine;
      check_config(config::candidate_config(config, candidate), answers.at(candidate.zone), cloud, mine);
      any_offered = any_offered || mine.empty();
      refused.insert(refused.end(), mine.begin(), mine.end());
    }
    if (!any_offered) {
      check.problems.insert(check.problems.end(), refused.begin(), refused.end());
    }
  }
  // One problem per place: sweep members share their accelerator and version.
  std::vector<Diagnostic> distinct;
  for (auto& problem : check.problems) {
    const bool seen = std::any_of(distinct.begin(), distinct.end(),
                                  [&](const Diagnostic& d) { return d.format() == problem.format(); });
    if (!seen) {
      distinct.push_back(std::move(problem));
    }
  }
  check.problems = std::move(distinct);
  std::vector<std::string> parts;
  if (!fresh.empty()) {
    parts.push_back(util::join(fresh, ", ") + " (asked just now)");
  }
  if (!cached.empty()) {
    parts.push_back(util::join(cached, ", ") + " (its answer of " + util::format_duration(oldest_ms / 1000) + " ago)");
  }
  if (check.source == OfferSource::built_in) {
    check.note = "the cloud could not be asked what " +
                 (answers.size() == 1 ? answers.begin()->first : std::string("these zones")) + " offers (" +
                 util::join(std::vector<std::string>(why_not.begin(), why_not.end()), "; ") +
                 "): accelerator and runtime version checked against jobman's built-in catalog only";
    if (!parts.empty()) {
      check.note += ", and against what the cloud offers in " + util::join(parts, ", ");
    }
  } else {
    check.note = "accelerator and runtime version checked against what the cloud offers in " + util::join(parts, ", ");
  }
  return check;
}

} // namespace jobman::core
