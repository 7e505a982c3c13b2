#include "jobman/core/zone_offers.hpp"

#include "jobman/config/accelerator.hpp"
#include "jobman/store/zone_catalogs.hpp"
#include "jobman/util/strings.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
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
  // The project's reservations in the zone (reservations.list, asked only for a config that needs one); nullopt when
  // not asked or when the cloud did not answer (`reservations_why` says why).
  std::optional<std::vector<cloud::Reservation>> reservations;
  std::string reservations_why;
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

// Whether the config asks for a reservation's capacity: pricing reserved, tpu.reserved, or a reservation by name (a
// request naming one draws on it whatever its tier).
bool needs_reservation(const config::TpuSection& tpu) {
  return tpu.pricing == domain::Pricing::reserved || tpu.reserved || !tpu.reservation.empty();
}

// The tier of a mock's pools the config draws on ("spot", "on_demand", "flex_start", "reserved", "best_effort"), as
// the mock's world names them: a reservation's when it asks for one, else its pricing's (preemptible is spot).
std::string tier_of(const config::TpuSection& tpu) {
  if (needs_reservation(tpu)) {
    return "reserved";
  }
  switch (tpu.pricing) {
  case domain::Pricing::spot:
  case domain::Pricing::preemptible: return "spot";
  case domain::Pricing::ondemand: return "on_demand";
  case domain::Pricing::flex_start: return "flex_start";
  case domain::Pricing::reserved: return "reserved";
  case domain::Pricing::best_effort: return "best_effort";
  }
  return "spot";
}

// A tier's name for people: "on-demand", "flex-start", "best-effort", "spot", "reserved".
std::string tier_text(std::string tier) {
  std::replace(tier.begin(), tier.end(), '_', '-');
  return tier;
}

// The generation a reservation's standard.resourceType names ("V4", "TPU_V4", "V5LITE_POD", "V5E"); empty when none
// of the catalog's.
std::string reservation_generation(const std::string& type) {
  std::string name = util::to_lower(type);
  if (name.starts_with("tpu_")) {
    name.erase(0, 4);
  }
  std::erase(name, '_');
  for (const auto& generation : config::tpu_generations()) {
    if (generation.name == name ||
        std::find(generation.aliases.begin(), generation.aliases.end(), name) != generation.aliases.end()) {
      return generation.name;
    }
  }
  return {};
}

// "v4-reservation (v4, 64 chips)" for each reservation, for a hint.
std::string reservation_list(const std::vector<cloud::Reservation>& reservations) {
  std::vector<std::string> names;
  for (const auto& r : reservations) {
    const auto generation = reservation_generation(r.type);
    names.push_back(resource_name_id(r.name) + " (" + (generation.empty() ? r.type : generation) + ", " +
                    std::to_string(r.chips) + " chips)");
  }
  return some_of(names);
}

// A reservation as a config names it: `projects/P/locations/Z/reservations/ID`, or the ID alone (the project's own in
// the job's zone); "-" for any of the project's.
struct NamedReservation {
  std::string project; // Empty for an ID alone.
  std::string zone;    // Empty for an ID alone.
  std::string id;
};

std::optional<NamedReservation> parse_reservation_name(const std::string& name) {
  if (name.find('/') == std::string::npos) {
    return NamedReservation{"", "", name};
  }
  const auto parts = util::split(name, '/');
  if (parts.size() != 6 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "reservations" ||
      std::any_of(parts.begin(), parts.end(), [](const std::string& part) { return part.empty(); })) {
    return std::nullopt; // The loader refuses it; nothing to check here.
  }
  return NamedReservation{parts[1], parts[3], parts[5]};
}

// Checks a config that needs a reservation against the zone's (reservations.list): a reservation named must be one
// of them, in the job's zone and holding the accelerator's generation; reserved capacity without a name needs one
// that does. Returns whether it judged (false when the project's reservations are not known: another project's
// reservation, or the cloud not asked).
bool check_reservation(const config::TpuSection& tpu, const ZoneAnswer& answer, const OfferCloud& cloud,
                       const std::function<SourceLocation(const std::string&)>& at, std::vector<Diagnostic>& problems) {
  if (!answer.reservations) {
    return false;
  }
  const auto& listed = *answer.reservations;
  const std::string generation = tpu.accelerator.generation ? tpu.accelerator.generation->name : "";
  const auto holds_generation = [&](const cloud::Reservation& r) {
    const auto held = reservation_generation(r.type);
    return held.empty() || generation.empty() || held == generation; // A type jobman cannot read is not judged.
  };
  const std::string listing = "(reservations.list)";
  std::optional<NamedReservation> named;
  if (!tpu.reservation.empty()) {
    named = parse_reservation_name(tpu.reservation);
    if (!named) {
      return false;
    }
    if (!named->zone.empty() && named->zone != tpu.zone) {
      problems.push_back({at("reservation"),
                          "reservation '" + tpu.reservation + "' is in " + named->zone + ", not in " + tpu.zone,
                          "a slice in " + tpu.zone + " can use only a reservation of " + tpu.zone});
      return true;
    }
    if (!named->project.empty() && named->project != cloud.project) {
      return false; // Another project's, shared with this one: the project's own listing does not show it.
    }
  }
  if (named && named->id != "-") {
    const auto found = std::find_if(listed.begin(), listed.end(),
                                    [&](const cloud::Reservation& r) { return resource_name_id(r.name) == named->id; });
    if (found == listed.end()) {
      problems.push_back({at("reservation"), tpu.zone + " has no reservation '" + named->id + "' " + listing,
                          listed.empty() ? "the project has no reservation in " + tpu.zone
                                         : tpu.zone + " has " + reservation_list(listed)});
    } else if (!holds_generation(*found)) {
      problems.push_back(
          {at("reservation"), "reservation '" + named->id + "' in " + tpu.zone + " holds no " + generation + " chips",
           named->id + " holds " + found->type + " chips; `jobman reservations` lists the project's reservations"});
    }
    return true;
  }
  // Reserved capacity from any of the project's reservations in the zone.
  const std::string key = named ? "reservation" : tpu.pricing == domain::Pricing::reserved ? "pricing" : "reserved";
  if (listed.empty()) {
    problems.push_back({at(key), tpu.zone + " has no reservation of the project " + listing,
                        "reserved capacity comes only from a reservation: pick a zone that has one (`jobman "
                        "reservations` lists them), or another pricing"});
  } else if (std::none_of(listed.begin(), listed.end(), holds_generation)) {
    problems.push_back({at(key), "no reservation in " + tpu.zone + " holds " + generation + " chips " + listing,
                        tpu.zone + " has " + reservation_list(listed)});
  }
  return true;
}

// Checks the tier the config draws on against the tiers its zone has of its generation, where the cloud says (a
// mock's world): each provisioning model has a pool of its own, and best-effort runs on the spot pool's chips.
void check_tier(const config::TpuSection& tpu, const OfferCloud& cloud,
                const std::function<SourceLocation(const std::string&)>& at, std::vector<Diagnostic>& problems) {
  const auto zone = cloud.tiers.find(tpu.zone);
  if (zone == cloud.tiers.end() || !tpu.accelerator.generation) {
    return;
  }
  const auto& generation = tpu.accelerator.generation->name;
  const auto offered_tiers = zone->second.find(generation);
  if (offered_tiers == zone->second.end()) {
    return;
  }
  const std::string tier = tier_of(tpu);
  std::vector<std::string> needed{tier};
  if (tier == "best_effort") {
    needed.emplace_back("spot");
  }
  for (const auto& want : needed) {
    if (offered_tiers->second.contains(want)) {
      continue;
    }
    std::vector<std::string> names;
    for (const auto& t : offered_tiers->second) {
      names.push_back(tier_text(t));
    }
    std::string hint;
    if (want != tier) {
      hint.append(tier_text(tier)).append(" runs on the ").append(tier_text(want)).append(" pool's chips, and ");
    }
    hint.append(tpu.zone).append(" has ").append(generation).append(" ").append(util::join(names, " and "));
    hint.append(" only");
    std::vector<std::string> elsewhere;
    for (const auto& [other, generations] : cloud.tiers) {
      const auto it = generations.find(generation);
      if (other != tpu.zone && it != generations.end() && it->second.contains(tier) &&
          (want == tier || it->second.contains(want))) {
        elsewhere.push_back(other);
      }
    }
    if (!elsewhere.empty()) {
      hint += "; " + generation + " " + tier_text(tier) + " is offered in " + some_of(elsewhere);
    }
    const std::string key = tier == "reserved" && !tpu.reservation.empty()                   ? "reservation"
                            : tier == "reserved" && tpu.pricing != domain::Pricing::reserved ? "reserved"
                                                                                             : "pricing";
    problems.push_back({at(key), generation + " " + tier_text(tier) + " is not offered in " + tpu.zone, hint});
    return;
  }
}

// Checks that the config's slices together fit in the zone's tier of their generation, where the cloud says how much
// it holds (a mock's world): tpu.slices times the accelerator's chips, against the pool's chips (best-effort: the spot
// pool's, which it runs on) and the project's quota there. One slice is left to the cloud, as before.
void check_slices(const config::TpuSection& tpu, const OfferCloud& cloud,
                  const std::function<SourceLocation(const std::string&)>& at, std::vector<Diagnostic>& problems) {
  if (tpu.slices <= 1 || !tpu.accelerator.generation) {
    return;
  }
  const auto zone = cloud.capacity.find(tpu.zone);
  if (zone == cloud.capacity.end()) {
    return;
  }
  const auto& generation = tpu.accelerator.generation->name;
  const auto pools = zone->second.find(generation);
  if (pools == zone->second.end()) {
    return;
  }
  const std::string tier = tier_of(tpu);
  const auto pool = pools->second.find(tier);
  if (pool == pools->second.end()) {
    return; // check_tier says the tier is missing.
  }
  int chips = pool->second.chips;
  if (tier == "best_effort") {
    const auto spot = pools->second.find("spot");
    chips = spot == pools->second.end() ? 0 : spot->second.chips;
  }
  const int quota = pool->second.quota;
  const long long needed = static_cast<long long>(tpu.slices) * tpu.accelerator.chips;
  const std::string what =
      std::to_string(tpu.slices) + " slices of " + tpu.accelerator.name + " are " + std::to_string(needed) + " chips, ";
  const std::string pool_text = generation + " " + tier_text(tier);
  const auto fits = [&](int limit) {
    const int most = limit / tpu.accelerator.chips;
    return most >= 1 ? "at most " + std::to_string(most) + (most == 1 ? " slice" : " slices") + " of " +
                           tpu.accelerator.name + " fit"
                     : "not one slice of " + tpu.accelerator.name + " fits";
  };
  if (chips > 0 && needed > chips) {
    problems.push_back({at("slices"),
                        what + "more than " + tpu.zone + " has of " + pool_text + " (" + std::to_string(chips) +
                            " chips" + (tier == "best_effort" ? ", the spot pool's" : "") + ")",
                        fits(chips) + ": ask for fewer slices, or pick a zone with more " + generation + " chips"});
  } else if (quota > 0 && needed > quota) {
    problems.push_back({at("slices"),
                        what + "more than the project's quota of " + pool_text + " in " + tpu.zone + " (" +
                            std::to_string(quota) + " chips)",
                        fits(quota) + ": ask for fewer slices, or for more quota"});
  }
}

void check_config(const config::JobConfig& config, const ZoneAnswer& answer, const OfferCloud& cloud,
                  std::vector<Diagnostic>& problems) {
  const auto& tpu = config.tpu;
  const std::function<SourceLocation(const std::string&)> at = [&](const std::string& key) {
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
  // The capacity: a reservation the zone has (reservations.list), else the tier, where the cloud says which it has.
  const bool reservation_judged = needs_reservation(tpu) && check_reservation(tpu, answer, cloud, at, problems);
  if (!reservation_judged) {
    check_tier(tpu, cloud, at, problems);
  }
  check_slices(tpu, cloud, at, problems);
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
    for (const auto& candidate : config::candidates(config)) {
      if (!answers.contains(candidate.zone)) {
        answers.emplace(candidate.zone, answer_for(store, cloud, candidate.zone, now_ms));
      }
    }
  }
  // The project's reservations, in the zones of configs that need one (not kept: what is free changes by the minute).
  std::set<std::string> reservation_zones;
  for (const auto& config : configs) {
    if (!needs_reservation(config.tpu) || !cloud.client) {
      continue;
    }
    for (const auto& candidate : config::candidates(config)) {
      auto& answer = answers.at(candidate.zone);
      if (!answer.catalog || answer.reservations || !answer.reservations_why.empty()) {
        continue;
      }
      reservation_zones.insert(candidate.zone);
      try {
        answer.reservations = cloud.client->list_reservations(cloud::Location{cloud.project, candidate.zone});
      } catch (const std::exception& e) {
        answer.reservations_why = e.what();
      }
    }
  }
  OfferCheck check;
  check.source = OfferSource::cloud;
  for (const auto& zone : reservation_zones) {
    if (const auto& why = answers.at(zone).reservations_why; !why.empty()) {
      std::string warning = "the reservation asked for in " + zone;
      warning.append(" could not be checked: ").append(why);
      check.warnings.push_back(std::move(warning));
    }
  }
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
    const auto list = config::candidates(config);
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
  std::vector<std::string> reservations_asked;
  for (const auto& zone : reservation_zones) {
    if (answers.at(zone).reservations) {
      reservations_asked.push_back(zone);
    }
  }
  if (!reservations_asked.empty()) {
    check.note += "; the project's reservations asked in " + util::join(reservations_asked, ", ");
  }
  return check;
}

} // namespace jobman::core
