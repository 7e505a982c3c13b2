// Checking configs against what their zones offer: the accelerator type (acceleratorTypes.list) and the runtime
// version (runtimeVersions.list), asked of the cloud at most once a day per zone (the answers are kept in the store),
// or, when the cloud cannot be reached, left to the built-in catalog the config loader already applied.
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/util/error.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::core {

// How long a zone's answers are trusted before the cloud is asked again.
inline constexpr std::int64_t kZoneCatalogTtlMs = 24LL * 3600 * 1000;

// Where the verdict came from.
enum class OfferSource {
  cloud,    // The cloud answered just now.
  cache,    // The cloud's answers of the last day, from the store.
  built_in, // The cloud could not be asked: only jobman's built-in catalog (the loader's warnings) applies.
};

// "cloud", "cache", "built-in".
std::string_view to_string(OfferSource source);

// The verdict on a set of configs.
struct OfferCheck {
  OfferSource source = OfferSource::built_in; // The least fresh source used for any of the zones.
  std::string note;                           // For people: what was checked against what.
  std::vector<Diagnostic> problems;  // An accelerator the zone does not offer, a runtime version it does not have, a
                                     // zone that does not exist, a tier or reservation it lacks; each names the file,
                                     // line and key.
  std::vector<std::string> warnings; // For people: what could not be checked though the cloud was asked (a
                                     // reservations.list that failed).
  std::vector<Diagnostic> locality;  // Buckets outside their slice's region (filled by the CLI's check_offers).
};

// How many chips one tier of one generation has in a zone (a mock's pool), and how many of them one project may hold.
struct TierCapacity {
  int chips = 0; // The zone's; 0: none now (a request waits in the queue), so no bound is known.
  int quota = 0; // The project's; 0: not known.
};

// The cloud a check asks.
struct OfferCloud {
  std::string id;      // Keeps each cloud's answers apart in the store: Google's endpoint, a mock's address, or
                       // "bundled-mock".
  std::string project; // The project asked.
  std::shared_ptr<cloud::TpuClient> client; // Null when the cloud cannot be asked without starting something.
  std::string unreachable;                  // Why `client` is null.
  // The tiers ("spot", "on_demand", "flex_start", "reserved", "best_effort") each zone offers of each generation,
  // where the cloud says (a mock's world, see mock_cloud_capacity); empty for Google. A zone named here that lacks the
  // tier of the config's provisioning model for its generation is a problem at tpu.pricing (best-effort needs the
  // spot pool too, whose chips it runs on).
  std::map<std::string, std::map<std::string, std::set<std::string>>> tiers;
  // What each of those tiers holds, by zone, generation and tier name (mock_cloud_capacity); empty for Google. A
  // multislice config (tpu.slices > 1) whose slices together need more chips than the zone has of its tier, or than
  // the project's quota there, is a problem at tpu.slices.
  std::map<std::string, std::map<std::string, std::map<std::string, TierCapacity>>> capacity;
};

// Checks every config, each distinct zone asked once: answers of the last day come from the store; older ones are
// asked again and stored. An answer other than NOT_FOUND for the zone (no network, no credentials, a server error)
// falls back to the built-in catalog for that zone; this never throws for the cloud's sake. A config that asks for a
// reservation (pricing reserved, tpu.reserved, tpu.reservation) is checked against the project's reservations in the
// zone (reservations.list, asked every time): a reservation named that the zone does not have, or reserved capacity
// where the project has no reservation of the accelerator's generation, is a problem at the key that asked. Several
// slices (tpu.slices) need that many times the accelerator's chips, checked against `cloud.capacity`.
OfferCheck check_zone_offers(store::JobStore& store, const OfferCloud& cloud,
                             const std::vector<config::JobConfig>& configs, std::int64_t now_ms);

} // namespace jobman::core
