#include "jobman/domain/pricing.hpp"

#include <utility>

namespace jobman::domain {

namespace {

// Each accepted spelling and its pricing; the names to_string gives come first.
const std::vector<std::pair<std::string, Pricing>>& spellings() {
  static const std::vector<std::pair<std::string, Pricing>> table{
      {"spot", Pricing::spot},
      {"ondemand", Pricing::ondemand},
      {"preemptible", Pricing::preemptible},
      {"flex-start", Pricing::flex_start},
      {"reserved", Pricing::reserved},
      {"best-effort", Pricing::best_effort},
      {"on-demand", Pricing::ondemand},
      {"on_demand", Pricing::ondemand},
      {"standard", Pricing::ondemand},
      {"flex_start", Pricing::flex_start},
      {"best_effort", Pricing::best_effort},
  };
  return table;
}

} // namespace

const std::vector<Pricing>& all_pricings() {
  static const std::vector<Pricing> values{Pricing::spot,       Pricing::ondemand, Pricing::preemptible,
                                           Pricing::flex_start, Pricing::reserved, Pricing::best_effort};
  return values;
}

std::string to_string(Pricing value) {
  switch (value) {
  case Pricing::spot: return "spot";
  case Pricing::ondemand: return "ondemand";
  case Pricing::preemptible: return "preemptible";
  case Pricing::flex_start: return "flex-start";
  case Pricing::reserved: return "reserved";
  case Pricing::best_effort: return "best-effort";
  }
  return "spot";
}

bool needs_v2alpha1(Pricing value) {
  return value == Pricing::flex_start || value == Pricing::reserved || value == Pricing::best_effort;
}

std::string display_name(Pricing value) {
  return value == Pricing::ondemand ? "on-demand" : to_string(value);
}

std::optional<Pricing> parse_pricing(std::string_view text) {
  for (const auto& [spelling, value] : spellings()) {
    if (spelling == text) {
      return value;
    }
  }
  return std::nullopt;
}

const std::vector<std::string>& pricing_spellings() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : spellings()) {
      out.push_back(entry.first);
    }
    return out;
  }();
  return names;
}

} // namespace jobman::domain
