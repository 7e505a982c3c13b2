#include "jobman/domain/pricing.hpp"

#include <gtest/gtest.h>
#include <map>
#include <set>

namespace jobman::domain {
namespace domain_pricing_test {

TEST(Pricing, EverySpellingAnyReaderTookIsAccepted) {
  // The union of what the loader, task scripts, worker and task flags, price tables and fair-share tiers took.
  const std::map<std::string, Pricing> spellings{
      {"spot", Pricing::spot},
      {"preemptible", Pricing::preemptible},
      {"ondemand", Pricing::ondemand},
      {"on-demand", Pricing::ondemand},
      {"on_demand", Pricing::ondemand},
      {"standard", Pricing::ondemand},
      // The provisioning models only v2alpha1 has, with the snake case of the mock's tiers.
      {"flex-start", Pricing::flex_start},
      {"flex_start", Pricing::flex_start},
      {"reserved", Pricing::reserved},
      {"best-effort", Pricing::best_effort},
      {"best_effort", Pricing::best_effort},
  };
  for (const auto& [written, read] : spellings) {
    EXPECT_EQ(parse_pricing(written), read) << written;
  }
  EXPECT_EQ(std::set<std::string>(pricing_spellings().begin(), pricing_spellings().end()).size(),
            pricing_spellings().size())
      << "no spelling twice";
  EXPECT_EQ(pricing_spellings().size(), spellings.size());
  for (const auto& spelling : pricing_spellings()) {
    EXPECT_TRUE(spellings.contains(spelling)) << spelling;
  }
}

TEST(Pricing, OtherTextIsRefused) {
  // Case counts: the loader reads "Spot" as the Python jobman does (on-demand, with a warning); task scripts lower
  // the case before they ask.
  for (const std::string text :
       {"", "Spot", "SPOT", "OnDemand", "on demand", "spot ", " spot", "Reserved", "FLEX_START", "flexstart",
        "best effort", "preempt", "spots", "demand", "on-demand-"}) {
    EXPECT_EQ(parse_pricing(text), std::nullopt) << "'" << text << "'";
  }
}

TEST(Pricing, NamesRoundTrip) {
  ASSERT_EQ(all_pricings().size(), 6U);
  EXPECT_EQ(all_pricings().front(), Pricing::spot);
  for (const auto pricing : all_pricings()) {
    EXPECT_EQ(parse_pricing(to_string(pricing)), pricing) << to_string(pricing);
    EXPECT_EQ(parse_pricing(display_name(pricing)), pricing) << display_name(pricing);
  }
  // The names the store, snapshots and JSON hold.
  EXPECT_EQ(to_string(Pricing::spot), "spot");
  EXPECT_EQ(to_string(Pricing::ondemand), "ondemand");
  EXPECT_EQ(to_string(Pricing::preemptible), "preemptible");
  EXPECT_EQ(display_name(Pricing::ondemand), "on-demand");
  EXPECT_EQ(display_name(Pricing::spot), "spot");
  EXPECT_EQ(display_name(Pricing::preemptible), "preemptible");
  EXPECT_EQ(to_string(Pricing::flex_start), "flex-start");
  EXPECT_EQ(to_string(Pricing::reserved), "reserved");
  EXPECT_EQ(to_string(Pricing::best_effort), "best-effort");
  // Only the last three need the API's v2alpha1.
  for (const auto pricing : all_pricings()) {
    EXPECT_EQ(needs_v2alpha1(pricing),
              pricing == Pricing::flex_start || pricing == Pricing::reserved || pricing == Pricing::best_effort);
  }
  // The names to_string gives come first, in the order declared.
  ASSERT_GE(pricing_spellings().size(), 3U);
  for (std::size_t i = 0; i < all_pricings().size(); ++i) {
    EXPECT_EQ(pricing_spellings()[i], to_string(all_pricings()[i]));
  }
}

} // namespace domain_pricing_test
} // namespace jobman::domain
