#include "jobman/config/prices.hpp"

#include "jobman/config/accelerator.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "yaml_tree.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace jobman::config {

namespace detail {
extern const char* const kBuiltinPrices;
} // namespace detail

namespace {

using detail::Node;

std::optional<double> number_of(const std::string& text) {
  if (text.empty()) {
    return std::nullopt;
  }
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

// The generation `written` names (by its API prefix or an alias, any case); empty when none.
std::string canonical_generation(const std::string& written) {
  const std::string lower = util::to_lower(written);
  for (const auto& generation : tpu_generations()) {
    if (generation.name == lower ||
        std::find(generation.aliases.begin(), generation.aliases.end(), lower) != generation.aliases.end()) {
      return generation.name;
    }
  }
  return {};
}

// The tiers an unknown tier's message lists, as price tables write them (domain::to_string).
std::string tier_names() {
  std::vector<std::string> names;
  for (const auto pricing : domain::all_pricings()) {
    names.push_back(domain::to_string(pricing));
  }
  return util::join(names, ", ");
}

// data_transfer: its source and its two tables of rates by continent.
void read_transfer(const Node& section, TransferRates& rates, std::vector<Diagnostic>& errors) {
  if (!section.is_mapping()) {
    errors.push_back(detail::make_diagnostic(section.origin, "data_transfer",
                                             "expected a mapping (source, same_continent, between_continents), got " +
                                                 detail::describe_kind(section)));
    return;
  }
  for (const auto& entry : section.entries) {
    const std::string path = "data_transfer." + entry.key;
    if (entry.key == "source") {
      if (!entry.value.is_scalar()) {
        errors.push_back(detail::make_diagnostic(entry.value.origin, path,
                                                 "expected text, got " + detail::describe_kind(entry.value)));
      } else {
        rates.source = entry.value.text;
      }
      continue;
    }
    auto* table = entry.key == "same_continent"       ? &rates.same_continent
                  : entry.key == "between_continents" ? &rates.between_continents
                                                      : nullptr;
    if (table == nullptr) {
      errors.push_back(detail::make_diagnostic(entry.key_origin, path, "unknown key",
                                               "one of source, same_continent, between_continents"));
      continue;
    }
    if (!entry.value.is_mapping()) {
      errors.push_back(detail::make_diagnostic(entry.value.origin, path,
                                               "expected a mapping of continents to prices per GiB (default: 0.02), "
                                               "got " +
                                                   detail::describe_kind(entry.value)));
      continue;
    }
    for (const auto& rate : entry.value.entries) {
      const std::string rate_path = path + "." + rate.key;
      const auto& known = transfer_continents();
      if (rate.key != "default" && std::find(known.begin(), known.end(), rate.key) == known.end()) {
        errors.push_back(detail::make_diagnostic(rate.key_origin, rate_path, "unknown continent",
                                                 "one of default, " + util::join(known, ", ")));
        continue;
      }
      const auto price = rate.value.is_scalar() ? number_of(rate.value.text) : std::nullopt;
      if (!price || *price < 0) {
        errors.push_back(detail::make_diagnostic(rate.value.origin, rate_path,
                                                 "expected a price per GiB (a number, 0 or more), got '" +
                                                     detail::flow_text(rate.value) + "'"));
        continue;
      }
      (*table)[rate.key] = *price;
    }
  }
}

// Reads `text` (named `file` in messages) over `table`; the problems go to `errors`.
void read_table(const std::string& text, const std::string& file, PriceTable& table, std::vector<Diagnostic>& errors) {
  const Node root = detail::parse_yaml(text, file, errors);
  if (!errors.empty() || root.is_null()) {
    return;
  }
  if (!root.is_mapping()) {
    errors.push_back(detail::make_diagnostic(
        root.origin, "", "expected a mapping with a generations: key, got " + detail::describe_kind(root)));
    return;
  }
  for (const auto& entry : root.entries) {
    std::string* text_field = entry.key == "currency" ? &table.currency
                              : entry.key == "source" ? &table.source
                              : entry.key == "as_of"  ? &table.as_of
                              : entry.key == "region" ? &table.region
                                                      : nullptr;
    if (text_field != nullptr) {
      if (!entry.value.is_scalar()) {
        errors.push_back(detail::make_diagnostic(entry.value.origin, entry.key,
                                                 "expected text, got " + detail::describe_kind(entry.value)));
      } else {
        *text_field = entry.value.text;
      }
      continue;
    }
    if (entry.key == "data_transfer") {
      read_transfer(entry.value, table.transfer, errors);
      continue;
    }
    if (entry.key != "generations") {
      errors.push_back(detail::make_diagnostic(entry.key_origin, entry.key, "unknown key",
                                               "one of currency, source, as_of, region, generations, data_transfer"));
      continue;
    }
    if (!entry.value.is_mapping()) {
      errors.push_back(detail::make_diagnostic(entry.value.origin, "generations",
                                               "expected a mapping of generations (v4: {ondemand: 3.22, spot: 0.92}), "
                                               "got " +
                                                   detail::describe_kind(entry.value)));
      continue;
    }
    std::vector<std::string> known;
    for (const auto& generation : tpu_generations()) {
      known.push_back(generation.name);
    }
    for (const auto& generation : entry.value.entries) {
      const std::string path = "generations." + generation.key;
      const std::string name = canonical_generation(generation.key);
      if (name.empty()) {
        std::string hint = "one of " + util::join(known, ", ");
        if (auto near = util::closest_match(generation.key, known)) {
          hint = "did you mean '" + *near + "'?";
        }
        errors.push_back(detail::make_diagnostic(generation.key_origin, path, "unknown TPU generation", hint));
        continue;
      }
      if (!generation.value.is_mapping()) {
        errors.push_back(detail::make_diagnostic(generation.value.origin, path,
                                                 "expected a mapping of tiers to prices, got " +
                                                     detail::describe_kind(generation.value)));
        continue;
      }
      for (const auto& tier : generation.value.entries) {
        const std::string tier_path = path + "." + tier.key;
        const auto pricing = domain::parse_pricing(tier.key);
        if (!pricing) {
          errors.push_back(
              detail::make_diagnostic(tier.key_origin, tier_path, "unknown tier", "one of " + tier_names()));
          continue;
        }
        const auto price = tier.value.is_scalar() ? number_of(tier.value.text) : std::nullopt;
        if (!price || *price < 0) {
          errors.push_back(detail::make_diagnostic(tier.value.origin, tier_path,
                                                   "expected a price per chip-hour (a number, 0 or more), got '" +
                                                       detail::flow_text(tier.value) + "'"));
          continue;
        }
        table.per_chip_hour[name][to_string(*pricing)] = *price;
      }
    }
  }
}

// The tiers whose price a slice of `tier` is billed at, its own first: spot is what preemptible became, so one stands
// in for the other, and Google bills best-effort at spot rates. On-demand, flex-start and reserved capacity have rates
// of their own, which nothing stands in for.
std::vector<domain::Pricing> priced_as(domain::Pricing tier) {
  switch (tier) {
  case domain::Pricing::spot: return {domain::Pricing::spot, domain::Pricing::preemptible};
  case domain::Pricing::preemptible: return {domain::Pricing::preemptible, domain::Pricing::spot};
  case domain::Pricing::best_effort:
    return {domain::Pricing::best_effort, domain::Pricing::spot, domain::Pricing::preemptible};
  case domain::Pricing::ondemand:
  case domain::Pricing::flex_start:
  case domain::Pricing::reserved: break;
  }
  return {tier};
}

} // namespace

std::optional<double> PriceTable::chip_hour(const std::string& accelerator, domain::Pricing tier) const {
  const auto type = find_accelerator(accelerator);
  if (!type || type->generation == nullptr) {
    return std::nullopt;
  }
  const auto generation = per_chip_hour.find(type->generation->name);
  if (generation == per_chip_hour.end()) {
    return std::nullopt;
  }
  const auto& prices = generation->second;
  for (const auto pricing : priced_as(tier)) {
    if (const auto it = prices.find(domain::to_string(pricing)); it != prices.end()) {
      return it->second;
    }
  }
  return std::nullopt;
}

std::string PriceTable::money(double amount, int decimals) const {
  // std::to_chars rounds as printf's %.*f does, at a fraction of its cost: a report formats a dozen amounts a job.
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, amount, std::chars_format::fixed, decimals);
  const std::string digits = ec == std::errc() ? std::string(buf, end) : std::to_string(amount);
  return currency == "USD" || currency.empty() ? "$" + digits : digits + " " + currency;
}

const std::vector<std::string>& transfer_continents() {
  static const std::vector<std::string> names{"north-america", "south-america", "europe", "asia",
                                              "oceania",       "middle-east",   "africa"};
  return names;
}

std::optional<double> TransferRates::per_gib(const std::string& from, const std::string& to) const {
  const auto lookup = [](const std::map<std::string, double>& rates, const std::string& continent) {
    if (const auto it = rates.find(continent); it != rates.end()) {
      return std::optional<double>(it->second);
    }
    if (const auto it = rates.find("default"); it != rates.end()) {
      return std::optional<double>(it->second);
    }
    return std::optional<double>();
  };
  if (from == to) {
    return lookup(same_continent, from);
  }
  const auto a = lookup(between_continents, from);
  const auto b = lookup(between_continents, to);
  if (!a || !b) {
    return a ? a : b;
  }
  return std::max(*a, *b);
}

PriceTable builtin_prices() {
  PriceTable table;
  std::vector<Diagnostic> errors;
  read_table(detail::kBuiltinPrices, "configs/prices.yaml", table, errors);
  if (!errors.empty()) {
    throw ConfigError(std::move(errors)); // The build's own table: the tests catch this first.
  }
  table.files.emplace_back("built-in");
  return table;
}

std::filesystem::path user_prices_path() {
  return config::jobman_config_dir() / "prices.yaml";
}

PriceTable overlay_prices(PriceTable base, const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(path.string() + ": cannot read the price table: " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::vector<Diagnostic> errors;
  read_table(text.str(), path.string(), base, errors);
  if (!errors.empty()) {
    throw ConfigError(std::move(errors));
  }
  base.files.push_back(path.string());
  return base;
}

PriceTable load_prices(const std::optional<std::filesystem::path>& path) {
  auto table = builtin_prices();
  if (path) {
    return overlay_prices(std::move(table), *path);
  }
  const auto user = user_prices_path();
  std::error_code ec;
  if (std::filesystem::exists(user, ec)) {
    return overlay_prices(std::move(table), user);
  }
  return table;
}

} // namespace jobman::config
