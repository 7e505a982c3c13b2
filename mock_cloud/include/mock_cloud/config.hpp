// The mock cloud's world description: zones, capacity and quota, delays and event rates.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::mock {

// How a slice is billed and how it may be taken back.
enum class Tier { spot, on_demand };

// "spot" or "on_demand".
std::string_view tier_name(Tier tier);

// Chips of one TPU generation and tier in one zone.
struct PoolConfig {
  int chips = 0; // Physical chips the zone can hand out; requests beyond it wait.
  int quota = 0; // Chips one project may hold at once; requests beyond it fail with 429.
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
