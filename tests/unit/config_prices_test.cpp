// The price table: the one jobman ships reads and prices every generation it lists, spot and preemptible stand in
// for each other, and a user's table goes over it, its mistakes named by file, line and key.
#include "jobman/config/prices.hpp"
#include "jobman/util/error.hpp"
#include "support/temp_dir.hpp"

#include <fstream>
#include <gtest/gtest.h>

namespace jobman::config {
namespace config_prices_test {

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(Prices, TheBuiltInTableSaysWhereItsFiguresComeFromAndPricesTheGenerationsItLists) {
  const auto table = builtin_prices();
  EXPECT_EQ(table.currency, "USD");
  EXPECT_FALSE(table.source.empty());
  EXPECT_FALSE(table.as_of.empty());
  EXPECT_FALSE(table.region.empty());
  EXPECT_EQ(table.files, std::vector<std::string>{"built-in"});
  for (const char* generation : {"v4", "v5litepod", "v5p", "v6e"}) {
    ASSERT_TRUE(table.per_chip_hour.contains(generation)) << generation;
    const auto& tiers = table.per_chip_hour.at(generation);
    ASSERT_TRUE(tiers.contains("ondemand")) << generation;
    ASSERT_TRUE(tiers.contains("spot")) << generation;
    EXPECT_LT(tiers.at("spot"), tiers.at("ondemand")) << generation;
  }
}

TEST(Prices, AChipHourIsPricedByTheAcceleratorsGenerationAndTier) {
  PriceTable table;
  table.per_chip_hour["v4"] = {{"ondemand", 3.0}, {"spot", 1.0}};
  table.per_chip_hour["v2"] = {{"ondemand", 1.5}, {"preemptible", 0.5}};
  EXPECT_EQ(table.chip_hour("v4-32", domain::Pricing::spot), 1.0);
  EXPECT_EQ(table.chip_hour("v4-8", domain::Pricing::ondemand), 3.0);
  EXPECT_EQ(table.chip_hour("v4-8", domain::Pricing::preemptible), 1.0) << "spot stands in for preemptible";
  EXPECT_EQ(table.chip_hour("v2-8", domain::Pricing::spot), 0.5) << "and preemptible for spot";
  EXPECT_FALSE(table.chip_hour("v6e-8", domain::Pricing::spot));
  EXPECT_FALSE(table.chip_hour("nonsense", domain::Pricing::spot));
}

// Generations are named as accelerators are, aliases included ("v5e" is v5litepod).
TEST(Prices, AUsersTableGoesOverTheBuiltInOne) {
  test::TempDir dir;
  const auto path = dir.path() / "prices.yaml";
  write(path, "region: europe-west4\ngenerations:\n  v5e:\n    spot: 0.5\n");
  const auto table = load_prices(path);
  EXPECT_EQ(table.region, "europe-west4");
  EXPECT_EQ(table.chip_hour("v5litepod-16", domain::Pricing::spot), 0.5);
  EXPECT_EQ(table.chip_hour("v5litepod-16", domain::Pricing::ondemand),
            builtin_prices().chip_hour("v5litepod-16", domain::Pricing::ondemand));
  EXPECT_EQ(table.files, (std::vector<std::string>{"built-in", path.string()}));
}

// A tier may be written as any spelling of a pricing; the table keeps the name jobman gives it.
TEST(Prices, ATiersOtherSpellingsAreReadAsItsName) {
  test::TempDir dir;
  const auto path = dir.path() / "prices.yaml";
  write(path, "generations:\n  v4:\n    on-demand: 9.5\n  v5e:\n    standard: 8.5\n");
  const auto table = load_prices(path);
  EXPECT_EQ(table.chip_hour("v4-8", domain::Pricing::ondemand), 9.5);
  EXPECT_EQ(table.chip_hour("v5litepod-16", domain::Pricing::ondemand), 8.5);
  EXPECT_FALSE(table.per_chip_hour.at("v4").contains("on-demand"));
}

TEST(Prices, MistakesInAUsersTableNameTheFileLineAndKey) {
  test::TempDir dir;
  const auto path = dir.path() / "prices.yaml";
  write(path, "generations:\n  v5q:\n    spot: 0.5\n  v4:\n    spott: 1\n    ondemand: cheap\n");
  try {
    (void)load_prices(path);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.diagnostics().size(), 3U) << e.what();
    EXPECT_EQ(e.diagnostics()[0].where.line, 2);
    EXPECT_EQ(e.diagnostics()[0].where.key_path, "generations.v5q");
    EXPECT_NE(e.diagnostics()[0].hint.find("v5p"), std::string::npos) << e.diagnostics()[0].hint;
    EXPECT_EQ(e.diagnostics()[1].where.line, 5);
    EXPECT_EQ(e.diagnostics()[1].where.key_path, "generations.v4.spott");
    EXPECT_EQ(e.diagnostics()[2].where.line, 6);
    EXPECT_EQ(e.diagnostics()[2].where.key_path, "generations.v4.ondemand");
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)load_prices(dir.path() / "absent.yaml"), Error);
}

} // namespace config_prices_test
} // namespace jobman::config
