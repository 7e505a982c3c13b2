// The mock cloud's world description: zones, capacity and quota, delays and event rates.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::mock {

// How a slice is provisioned, billed and taken back: each is a pool of its own per zone and generation.
//   spot         a queued resource with `spot` (or provisioningModel SPOT), a node with schedulingConfig.spot or
//                preemptible: preempted at random;
//   on_demand    neither (STANDARD, or `guaranteed`): stopped for maintenance now and then;
//   flex_start   provisioningModel FLEX_START (v2alpha1): runs for at most its runDuration.maxRunDuration, then its
//                nodes are deleted and the queued resource is SUSPENDED by the service;
//   reserved     a reservation's chips: guaranteed.reserved (v2alpha1), reservationName, or RESERVATION_BOUND;
//   best_effort  bestEffort (v2alpha1): runs on the spot pool's free chips, with a quota of its own, and is preempted
//                first when a spot request needs those chips.
enum class Tier { spot, on_demand, flex_start, reserved, best_effort };

// Every tier, in the order above.
inline constexpr std::array<Tier, 5> kTiers = {Tier::spot, Tier::on_demand, Tier::flex_start, Tier::reserved,
                                               Tier::best_effort};

// "spot", "on_demand", "flex_start", "reserved" or "best_effort": the config's key and the admin API's name.
std::string_view tier_name(Tier tier);

// The tier tier_name() calls `name`, or nullopt.
std::optional<Tier> tier_named(std::string_view name);

// Chips of one TPU generation and tier in one zone.
struct PoolConfig {
  int chips = 0; // Physical chips the zone can hand out; requests beyond it wait (best_effort: the spot pool's).
  int quota = 0; // Chips one project may hold at once; requests beyond it fail with 429.
  // reserved: the reservation's name (reservations.list, reservationName); "<generation>-reservation" by default.
  std::string reservation;
};

// One zone and what it offers.
struct ZoneConfig {
  std::string name;                                        // e.g. "us-central2-b".
  std::map<std::string, std::map<Tier, PoolConfig>> pools; // generation -> tier -> pool.
};

// A random delay in seconds.
struct DelayDistribution {
  // The shape of the distribution.
  enum class Kind { fixed, uniform, lognormal };
  Kind kind = Kind::fixed; // Which shape.
  double a = 0;            // fixed: the value; uniform: the minimum; lognormal: the median.
  double b = 0;            // uniform: the maximum; lognormal: sigma of the underlying normal.
};

// The data-center network between the slices of a multislice job (the key `dcn`), which the workload on every worker
// host emulates for its messages to other slices.
struct DcnConfig {
  std::uint64_t latency_us = 0;    // dcn.latency: added to every message between slices, in microseconds.
  std::uint64_t bandwidth_bps = 0; // dcn.bandwidth: each message also takes its size over it, in bits/s; 0 unlimited.
};

// How Cloud Storage spreads a bucket's data: over one region, two, or a multi-region (the JSON API's locationType).
enum class BucketLocationType { region, dual_region, multi_region };

// "region", "dual-region" or "multi-region": the config's word and the JSON API's.
std::string_view bucket_location_type_name(BucketLocationType type);

// A bucket the world places (the key `buckets`); a bucket it does not name lives where it was first mounted.
struct BucketConfig {
  std::string location;                                 // Lower case: a region ("europe-west4") or "us", "eur4", ...
  BucketLocationType type = BucketLocationType::region; // Given, or known from the location.
  std::string storage_class = "STANDARD";               // STANDARD, NEARLINE, COLDLINE or ARCHIVE.
};

// Everything configs/mock-cloud.yaml says.
struct MockConfig {
  std::vector<ZoneConfig> zones;                         // In file order; the index names the internal subnet.
  std::map<std::string, DelayDistribution> provisioning; // Generation (or "default") -> provisioning time.
  double creating_seconds = 2;                           // CREATING before the request joins the queue.
  double suspending_seconds = 5;                         // SUSPENDING before SUSPENDED.
  double deleting_seconds = 5;                           // DELETING before the resource is gone.
  double spot_mean_seconds_between_preemptions = 0;      // Per ACTIVE spot slice; 0 means never.
  double maintenance_mean_seconds_between_events = 0;    // Per ACTIVE on-demand slice; 0 means never.
  // How long before such a maintenance its node announces it (Node.upcomingMaintenance); 0 means unannounced.
  double maintenance_notice_seconds = 0;
  double faulty_fraction = 0; // hardware.faulty_fraction: the chance that a newly minted machine is faulty.
  // dcn: what worker hosts are told about the network between slices (MOCK_DCN_LATENCY_US, MOCK_DCN_BANDWIDTH_BPS);
  // nothing when the key is absent.
  std::optional<DcnConfig> dcn;
  std::map<std::string, BucketConfig> buckets; // buckets: the buckets the world places, by name.

  // The provisioning distribution for `generation`, falling back to "default", then to 60 s fixed.
  [[nodiscard]] DelayDistribution provisioning_for(const std::string& generation) const;
  // The zone called `name`, or nullptr.
  [[nodiscard]] const ZoneConfig* find_zone(std::string_view name) const;
};

// Parses YAML text; `file` names it in errors. Throws jobman::ConfigError naming file, line and key.
MockConfig parse_mock_config(const std::string& text, const std::string& file);

// Reads and parses a config file; throws jobman::Error when unreadable, jobman::ConfigError when invalid.
MockConfig load_mock_config(const std::filesystem::path& path);

} // namespace jobman::mock
