#include "mock_cloud/config.hpp"

#include "jobman/config/accelerator.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/bucket_root.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <regex>
#include <yaml-cpp/yaml.h>

namespace jobman::mock {

std::string_view tier_name(Tier tier) {
  switch (tier) {
  case Tier::spot: return "spot";
  case Tier::on_demand: return "on_demand";
  case Tier::flex_start: return "flex_start";
  case Tier::reserved: return "reserved";
  case Tier::best_effort: return "best_effort";
  }
  return "spot";
}

std::string_view bucket_location_type_name(BucketLocationType type) {
  switch (type) {
  case BucketLocationType::region: return "region";
  case BucketLocationType::dual_region: return "dual-region";
  case BucketLocationType::multi_region: return "multi-region";
  }
  return "region";
}

std::optional<Tier> tier_named(std::string_view name) {
  for (const Tier tier : kTiers) {
    if (tier_name(tier) == name) {
      return tier;
    }
  }
  return std::nullopt;
}

DelayDistribution MockConfig::provisioning_for(const std::string& generation) const {
  if (auto it = provisioning.find(generation); it != provisioning.end()) {
    return it->second;
  }
  if (auto it = provisioning.find("default"); it != provisioning.end()) {
    return it->second;
  }
  return {DelayDistribution::Kind::fixed, 60, 0};
}

const ZoneConfig* MockConfig::find_zone(std::string_view name) const {
  for (const auto& zone : zones) {
    if (zone.name == name) {
      return &zone;
    }
  }
  return nullptr;
}

namespace {

// A resource id as the API accepts it (an RFC 1035 label).
bool resource_id(const std::string& id) {
  static const std::regex pattern("[a-z]([-a-z0-9]{0,61}[a-z0-9])?");
  return std::regex_match(id, pattern);
}

// Collects problems while walking the document.
class Checker {
public:
  explicit Checker(std::string file) : file_(std::move(file)) {}

  void fail(const YAML::Node& node, const std::string& key, const std::string& message, std::string hint = {}) {
    Diagnostic d;
    d.where.file = file_;
    if (node.IsDefined()) {
      d.where.line = node.Mark().line + 1;
      d.where.column = node.Mark().column + 1;
    }
    d.where.key_path = key;
    d.message = message;
    d.hint = std::move(hint);
    problems_.push_back(std::move(d));
  }

  // Reports keys of `map` that are not in `known`, with a suggestion.
  void only_keys(const YAML::Node& map, const std::string& path, const std::vector<std::string>& known) {
    for (const auto& item : map) {
      auto key = item.first.as<std::string>();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string hint;
        if (auto close = util::closest_match(key, known)) {
          hint = "did you mean '" + *close + "'?";
        } else if (known.size() <= 8) {
          hint = "known here: " + util::join(known, ", ");
        }
        fail(item.first, join(path, key), "unknown key", hint);
      }
    }
  }

  bool is_map(const YAML::Node& node, const std::string& path) {
    if (!node.IsMap()) {
      fail(node, path, "expected a mapping");
      return false;
    }
    return true;
  }

  // A duration: a number of seconds or a string such as "90s", "5m", "24h".
  std::optional<double> seconds(const YAML::Node& node, const std::string& path) {
    if (!node.IsScalar()) {
      fail(node, path, "expected a duration such as 90s, 5m or 24h");
      return std::nullopt;
    }
    auto text = node.as<std::string>();
    if (auto whole = util::parse_duration_seconds(text)) {
      if (*whole < 0) {
        fail(node, path, "a duration cannot be negative");
        return std::nullopt;
      }
      return static_cast<double>(*whole);
    }
    try {
      double value = node.as<double>();
      if (!std::isfinite(value) || value < 0) {
        fail(node, path, "a duration must be a non-negative number of seconds");
        return std::nullopt;
      }
      return value;
    } catch (const YAML::Exception&) {
      fail(node, path, "'" + text + "' is not a duration (e.g. 90s, 5m, 24h, or seconds as a number)");
      return std::nullopt;
    }
  }

  std::optional<double> number(const YAML::Node& node, const std::string& path) {
    try {
      double value = node.as<double>();
      if (std::isfinite(value) && value >= 0) {
        return value;
      }
    } catch (const YAML::Exception&) {
    }
    fail(node, path, "expected a non-negative number");
    return std::nullopt;
  }

  std::optional<double> fraction(const YAML::Node& node, const std::string& path) {
    try {
      double value = node.as<double>();
      if (value >= 0 && value <= 1) {
        return value;
      }
    } catch (const YAML::Exception&) {
    }
    fail(node, path, "expected a fraction between 0 and 1");
    return std::nullopt;
  }

  std::optional<int> count(const YAML::Node& node, const std::string& path) {
    try {
      long long value = node.as<long long>();
      if (value >= 0 && value <= 1'000'000) {
        return static_cast<int>(value);
      }
    } catch (const YAML::Exception&) {
    }
    fail(node, path, "expected a whole number of chips between 0 and 1000000");
    return std::nullopt;
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  void throw_if_failed() {
    if (!problems_.empty()) {
      throw ConfigError(problems_);
    }
  }

  const std::string& file() const { return file_; }

private:
  std::string file_;
  std::vector<Diagnostic> problems_;
};

std::vector<std::string> generation_names() {
  std::vector<std::string> names;
  for (const auto& generation : config::tpu_generations()) {
    names.push_back(generation.name);
  }
  return names;
}

// A value with a unit, such as "2ms" or "25Gbps": the number times the unit's factor, when `text` is a non-negative
// decimal number followed by one of `units` (name -> factor).
std::optional<double> with_unit(const std::string& text, const std::vector<std::pair<std::string, double>>& units) {
  for (const auto& [unit, factor] : units) {
    if (text.size() > unit.size() && text.ends_with(unit)) {
      const std::string number(util::trim(std::string_view(text).substr(0, text.size() - unit.size())));
      // Plain decimals only: digits and at most one point.
      const bool plain = !number.empty() && number.front() != '.' &&
                         number.find_first_not_of("0123456789.") == std::string::npos &&
                         std::count(number.begin(), number.end(), '.') <= 1;
      if (!plain) {
        return std::nullopt;
      }
      return std::strtod(number.c_str(), nullptr) * factor;
    }
  }
  return std::nullopt;
}

void parse_dcn(Checker& check, const YAML::Node& node, DcnConfig& out) {
  if (!check.is_map(node, "dcn")) {
    return;
  }
  check.only_keys(node, "dcn", {"latency", "bandwidth"});
  if (const auto latency = node["latency"]; latency.IsDefined()) {
    // Longest units first: "ms" and "us" end in "s" too.
    const auto seconds =
        latency.IsScalar() ? with_unit(latency.Scalar(), {{"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}}) : std::nullopt;
    if (!seconds || *seconds > 60) {
      check.fail(latency, "dcn.latency", "expected a latency of at most a minute such as 2ms, 500us or 0.01s");
    } else {
      out.latency_us = static_cast<std::uint64_t>(std::llround(*seconds * 1e6));
    }
  }
  if (const auto bandwidth = node["bandwidth"]; bandwidth.IsDefined()) {
    const auto bits =
        bandwidth.IsScalar()
            ? with_unit(bandwidth.Scalar(), {{"Tbps", 1e12}, {"Gbps", 1e9}, {"Mbps", 1e6}, {"Kbps", 1e3}, {"bps", 1.0}})
            : std::nullopt;
    if (!bits || *bits < 1 || *bits > 1e15) {
      check.fail(bandwidth, "dcn.bandwidth", "expected a bandwidth such as 25Gbps, 800Mbps or 1Tbps",
                 "units: bps, Kbps, Mbps, Gbps, Tbps (bits per second)");
    } else {
      out.bandwidth_bps = static_cast<std::uint64_t>(std::llround(*bits));
    }
  }
}

// Cloud Storage's multi-regions and predefined dual-regions, by the location a bucket names.
const std::map<std::string, BucketLocationType>& named_bucket_locations() {
  static const std::map<std::string, BucketLocationType> table = {
      {"us", BucketLocationType::multi_region},   {"eu", BucketLocationType::multi_region},
      {"asia", BucketLocationType::multi_region}, {"nam4", BucketLocationType::dual_region},
      {"eur4", BucketLocationType::dual_region},  {"eur5", BucketLocationType::dual_region},
      {"eur7", BucketLocationType::dual_region},  {"eur8", BucketLocationType::dual_region},
      {"asia1", BucketLocationType::dual_region}};
  return table;
}

// One bucket's placement, buckets.<name>: {location, type, storage_class}.
void parse_bucket(Checker& check, const YAML::Node& node, const std::string& path, BucketConfig& out) {
  static const std::regex region("[a-z]+-[a-z]+[0-9]+");
  static const std::regex zone("[a-z]+-[a-z]+[0-9]+-[a-z]");
  static const std::regex location_code("[a-z]+[0-9]*");
  check.only_keys(node, path, {"location", "type", "storage_class"});
  const auto location = node["location"];
  if (!location.IsDefined() || !location.IsScalar()) {
    check.fail(location.IsDefined() ? location : node, Checker::join(path, "location"),
               location.IsDefined() ? "expected a location such as europe-west4 or us" : "missing",
               "a region (europe-west4), a multi-region (us, eu, asia) or a dual-region (nam4, eur4, asia1, ...)");
    return;
  }
  out.location = util::to_lower(location.Scalar());
  const auto where = Checker::join(path, "location");
  if (std::regex_match(out.location, zone)) {
    check.fail(location, where, "'" + location.Scalar() + "' is a zone; a bucket lives in a region",
               "location: " + out.location.substr(0, out.location.rfind('-')));
    return;
  }
  const auto known = named_bucket_locations().find(out.location);
  if (const auto type = node["type"]; type.IsDefined()) {
    const std::string name = type.IsScalar() ? type.Scalar() : "";
    const auto fits = [&](BucketLocationType wanted, const std::regex& form) {
      out.type = wanted;
      if (!std::regex_match(out.location, form) ||
          (known != named_bucket_locations().end() && known->second != wanted)) {
        check.fail(location, where, "'" + location.Scalar() + "' is not a " + name + " location");
      }
    };
    if (name == "region") {
      fits(BucketLocationType::region, region);
    } else if (name == "dual-region") {
      fits(BucketLocationType::dual_region, location_code);
    } else if (name == "multi-region") {
      fits(BucketLocationType::multi_region, location_code);
    } else {
      check.fail(type, Checker::join(path, "type"), "'" + name + "' is not a location type",
                 "one of region, dual-region, multi-region");
    }
  } else if (known != named_bucket_locations().end()) {
    out.type = known->second;
  } else if (std::regex_match(out.location, region)) {
    out.type = BucketLocationType::region;
  } else {
    check.fail(location, where, "'" + location.Scalar() + "' is not a location Cloud Storage has",
               "a region (europe-west4), a multi-region (us, eu, asia), a dual-region (nam4, eur4, asia1, ...), "
               "or give its type");
  }
  if (const auto storage_class = node["storage_class"]; storage_class.IsDefined()) {
    std::string name = storage_class.IsScalar() ? storage_class.Scalar() : std::string();
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    if (name != "STANDARD" && name != "NEARLINE" && name != "COLDLINE" && name != "ARCHIVE") {
      check.fail(storage_class, Checker::join(path, "storage_class"), "not a storage class",
                 "one of STANDARD, NEARLINE, COLDLINE, ARCHIVE");
    } else {
      out.storage_class = name;
    }
  }
}

void parse_buckets(Checker& check, const YAML::Node& node, std::map<std::string, BucketConfig>& out) {
  if (!check.is_map(node, "buckets")) {
    return;
  }
  for (const auto& item : node) {
    const auto name = item.first.as<std::string>();
    const auto path = "buckets." + name;
    if (!valid_bucket_name(name)) {
      check.fail(item.first, path, "'" + name + "' is not a bucket name",
                 "3 to 63 lowercase letters, digits, '-', '_' or '.', beginning and ending with a letter or a digit");
    } else if (check.is_map(item.second, path)) {
      parse_bucket(check, item.second, path, out[name]);
    }
  }
}

void parse_delay(Checker& check, const YAML::Node& node, const std::string& path, DelayDistribution& out) {
  if (!check.is_map(node, path)) {
    return;
  }
  check.only_keys(node, path, {"distribution", "seconds", "min", "max", "median", "sigma"});
  auto kind = node["distribution"];
  std::string name = kind.IsDefined() ? kind.as<std::string>() : "";
  auto need = [&](const char* key) -> std::optional<double> {
    if (!node[key].IsDefined()) {
      check.fail(node, Checker::join(path, key), std::string("missing; a ") + name + " distribution needs it");
      return std::nullopt;
    }
    return std::string(key) == "sigma" ? check.number(node[key], Checker::join(path, key))
                                       : check.seconds(node[key], Checker::join(path, key));
  };
  if (name == "fixed") {
    out.kind = DelayDistribution::Kind::fixed;
    out.a = need("seconds").value_or(0);
  } else if (name == "uniform") {
    out.kind = DelayDistribution::Kind::uniform;
    auto lo = need("min");
    auto hi = need("max");
    if (lo && hi && *lo > *hi) {
      check.fail(node["min"], Checker::join(path, "min"), "min is greater than max");
    }
    out.a = lo.value_or(0);
    out.b = hi.value_or(0);
  } else if (name == "lognormal") {
    out.kind = DelayDistribution::Kind::lognormal;
    out.a = need("median").value_or(0);
    out.b = need("sigma").value_or(0);
  } else {
    check.fail(kind.IsDefined() ? kind : node, Checker::join(path, "distribution"),
               kind.IsDefined() ? "'" + name + "' is not a distribution" : "missing",
               "one of fixed, uniform, lognormal");
  }
}

// The config from its YAML tree; yaml-cpp throws where a key or value is not the plain value read from it.
MockConfig read_mock_config(Checker& check, const YAML::Node& root) {
  MockConfig config;
  if (!root.IsMap()) {
    check.fail(root, "", "the mock cloud config must be a mapping with a 'zones' key");
    check.throw_if_failed();
  }
  check.only_keys(root, "", {"lifecycle", "events", "provisioning", "zones", "hardware", "dcn", "buckets"});

  if (auto lifecycle = root["lifecycle"]; lifecycle.IsDefined() && check.is_map(lifecycle, "lifecycle")) {
    check.only_keys(lifecycle, "lifecycle", {"creating", "suspending", "deleting"});
    auto read = [&](const char* key, double& out) {
      if (lifecycle[key].IsDefined()) {
        out = check.seconds(lifecycle[key], Checker::join("lifecycle", key)).value_or(out);
      }
    };
    read("creating", config.creating_seconds);
    read("suspending", config.suspending_seconds);
    read("deleting", config.deleting_seconds);
  }

  if (auto events = root["events"]; events.IsDefined() && check.is_map(events, "events")) {
    check.only_keys(events, "events",
                    {"spot_preemption_mean_interval", "maintenance_mean_interval", "maintenance_notice"});
    if (events["spot_preemption_mean_interval"].IsDefined()) {
      config.spot_mean_seconds_between_preemptions =
          check.seconds(events["spot_preemption_mean_interval"], "events.spot_preemption_mean_interval").value_or(0);
    }
    if (events["maintenance_mean_interval"].IsDefined()) {
      config.maintenance_mean_seconds_between_events =
          check.seconds(events["maintenance_mean_interval"], "events.maintenance_mean_interval").value_or(0);
    }
    if (events["maintenance_notice"].IsDefined()) {
      config.maintenance_notice_seconds =
          check.seconds(events["maintenance_notice"], "events.maintenance_notice").value_or(0);
    }
  }

  if (auto hardware = root["hardware"]; hardware.IsDefined() && check.is_map(hardware, "hardware")) {
    check.only_keys(hardware, "hardware", {"faulty_fraction"});
    if (hardware["faulty_fraction"].IsDefined()) {
      config.faulty_fraction = check.fraction(hardware["faulty_fraction"], "hardware.faulty_fraction").value_or(0);
    }
  }

  if (auto dcn = root["dcn"]; dcn.IsDefined()) {
    parse_dcn(check, dcn, config.dcn.emplace());
  }
  if (auto buckets = root["buckets"]; buckets.IsDefined()) {
    parse_buckets(check, buckets, config.buckets);
  }

  auto generations = generation_names();
  auto known_with_default = generations;
  known_with_default.emplace_back("default");
  if (auto provisioning = root["provisioning"];
      provisioning.IsDefined() && check.is_map(provisioning, "provisioning")) {
    check.only_keys(provisioning, "provisioning", known_with_default);
    for (const auto& item : provisioning) {
      auto name = item.first.as<std::string>();
      DelayDistribution delay;
      parse_delay(check, item.second, "provisioning." + name, delay);
      config.provisioning[name] = delay;
    }
  }

  auto zones = root["zones"];
  if (!zones.IsDefined()) {
    check.fail(root, "zones", "missing: the config must list at least one zone");
  } else if (check.is_map(zones, "zones")) {
    for (const auto& zone_item : zones) {
      ZoneConfig zone;
      zone.name = zone_item.first.as<std::string>();
      std::string zone_path = "zones." + zone.name;
      if (!check.is_map(zone_item.second, zone_path)) {
        continue;
      }
      check.only_keys(zone_item.second, zone_path, generations);
      for (const auto& gen_item : zone_item.second) {
        auto generation = gen_item.first.as<std::string>();
        std::string gen_path = zone_path;
        gen_path.append(".").append(generation);
        if (!check.is_map(gen_item.second, gen_path)) {
          continue;
        }
        std::vector<std::string> tier_keys;
        tier_keys.reserve(kTiers.size());
        for (const Tier tier : kTiers) {
          tier_keys.emplace_back(tier_name(tier));
        }
        check.only_keys(gen_item.second, gen_path, tier_keys);
        for (const auto& tier_item : gen_item.second) {
          auto tier_key = tier_item.first.as<std::string>();
          std::string tier_path = gen_path;
          tier_path.append(".").append(tier_key);
          const auto tier = tier_named(tier_key);
          if (!tier || !check.is_map(tier_item.second, tier_path)) {
            continue;
          }
          PoolConfig pool;
          if (*tier == Tier::best_effort) {
            // Its chips are the spot pool's: only a quota of its own.
            check.only_keys(tier_item.second, tier_path, {"quota"});
            if (!gen_item.second["spot"].IsDefined()) {
              check.fail(tier_item.second, tier_path, "best_effort runs on the spot pool's chips: add a spot pool");
            }
            if (!tier_item.second["quota"].IsDefined()) {
              check.fail(tier_item.second, Checker::join(tier_path, "quota"), "missing");
            } else {
              pool.quota = check.count(tier_item.second["quota"], Checker::join(tier_path, "quota")).value_or(0);
            }
            zone.pools[generation][*tier] = pool;
            continue;
          }
          check.only_keys(tier_item.second, tier_path,
                          *tier == Tier::reserved ? std::vector<std::string>{"chips", "quota", "reservation"}
                                                  : std::vector<std::string>{"chips", "quota"});
          if (!tier_item.second["chips"].IsDefined()) {
            check.fail(tier_item.second, Checker::join(tier_path, "chips"), "missing");
          } else {
            pool.chips = check.count(tier_item.second["chips"], Checker::join(tier_path, "chips")).value_or(0);
          }
          pool.quota = pool.chips;
          if (tier_item.second["quota"].IsDefined()) {
            pool.quota = check.count(tier_item.second["quota"], Checker::join(tier_path, "quota")).value_or(0);
          }
          if (*tier == Tier::reserved) {
            pool.reservation = generation + "-reservation";
            if (const auto name = tier_item.second["reservation"]; name.IsDefined()) {
              const auto path = Checker::join(tier_path, "reservation");
              if (!name.IsScalar() || !resource_id(name.Scalar())) {
                check.fail(name, path, "must be a reservation id: lowercase letters, digits and hyphens");
              } else {
                pool.reservation = name.Scalar();
              }
            }
          }
          zone.pools[generation][*tier] = pool;
        }
      }
      config.zones.push_back(std::move(zone));
    }
    if (config.zones.empty()) {
      check.fail(zones, "zones", "at least one zone is needed");
    }
  }
  check.throw_if_failed();
  return config;
}

} // namespace

MockConfig parse_mock_config(const std::string& text, const std::string& file) {
  Checker check(file);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    Diagnostic d;
    d.where = {file, e.mark.line + 1, e.mark.column + 1, ""};
    d.message = e.msg;
    throw ConfigError({d});
  }
  try {
    return read_mock_config(check, root);
  } catch (const YAML::Exception& e) {
    // A list or mapping where a name or a word is expected (a key such as [a, b], distribution: {x: 1}).
    Diagnostic d;
    d.where = {file, e.mark.is_null() ? 0 : e.mark.line + 1, e.mark.is_null() ? 0 : e.mark.column + 1, ""};
    d.message = "expected a plain value here (" + e.msg + ")";
    throw ConfigError({d});
  }
}

MockConfig load_mock_config(const std::filesystem::path& path) {
  return parse_mock_config(util::read_file(path), path.string());
}

} // namespace jobman::mock
