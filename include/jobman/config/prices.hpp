// What a chip-hour costs: list prices per generation and tier, from the table jobman ships (configs/prices.yaml,
// compiled in) with the user's own table, when there is one, over it. Every cost derived from it is an estimate: list
// prices before discounts, for one region.
#pragma once

#include "jobman/domain/pricing.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace jobman::config {

// What reading a bucket from a slice in another region costs per GiB: Cloud Storage's network usage within Google
// Cloud (data_transfer: in prices.yaml). Reading within the bucket's own region is free.
struct TransferRates {
  std::string source; // Where the figures come from (a URL).
  // Between two regions of one continent, by continent ("north-america", "south-america", "europe", "asia",
  // "oceania", "middle-east", "africa"), or "default".
  std::map<std::string, double> same_continent;
  // Between continents, by either end's continent (the higher of the two applies), or "default".
  std::map<std::string, double> between_continents;
  // The rate from a region of continent `from` to one of `to`; nullopt when the table has none.
  [[nodiscard]] std::optional<double> per_gib(const std::string& from, const std::string& to) const;
};

// The continents TransferRates knows, as prices.yaml names them.
const std::vector<std::string>& transfer_continents();

struct PriceTable {
  std::string currency; // "USD".
  std::string source;   // Where the figures come from (a URL).
  std::string as_of;    // When they were taken from it.
  std::string region;   // Which region they are for.
  // Generation ("v4", "v5litepod", as accelerator names begin) -> tier (by the name domain::to_string gives it:
  // "ondemand", "spot", "preemptible", "flex-start", "reserved", "best-effort") -> price per chip-hour.
  std::map<std::string, std::map<std::string, double>> per_chip_hour;
  TransferRates transfer;         // data_transfer: reading a bucket across regions.
  std::vector<std::string> files; // The tables it was read from, the built-in one first ("built-in").

  // The price of a chip-hour of `accelerator` ("v4-32") in `tier`, each provisioning model at its own rate: spot and
  // preemptible stand in for each other where a generation has one of them only, and best-effort (billed at spot
  // rates) is priced as spot where it has no figure of its own; on-demand, flex-start and reserved have no stand-in.
  // nullopt when the table has no price.
  [[nodiscard]] std::optional<double> chip_hour(const std::string& accelerator, domain::Pricing tier) const;
  // `amount` in the table's currency with `decimals` places: "$12.50" in USD, "12.50 EUR" otherwise.
  [[nodiscard]] std::string money(double amount, int decimals = 2) const;
};

// The table jobman ships.
PriceTable builtin_prices();

// Where a user's own table is read from when present: `$XDG_CONFIG_HOME/jobman/prices.yaml` (~/.config/...).
std::filesystem::path user_prices_path();

// `base` with the entries of the table in `path` over it (its generations and tiers replace the same ones; its
// currency, source, as_of and region replace the base's when given). Throws ConfigError naming the file, line and key
// of every problem.
PriceTable overlay_prices(PriceTable base, const std::filesystem::path& path);

// The built-in table with `path` over it when given, else with the user's table over it when that file exists.
PriceTable load_prices(const std::optional<std::filesystem::path>& path = std::nullopt);

} // namespace jobman::config
