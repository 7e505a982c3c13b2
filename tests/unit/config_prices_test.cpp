// The price table: the one jobman ships reads and prices every generation and provisioning model it lists, spot and
// preemptible stand in for each other, best-effort is priced as spot, and a user's table goes over it, its mistakes
// named by file, line and key.
#include "jobman/config/prices.hpp"
#include "jobman/core/goodput.hpp"
#include "jobman/reporting/accounting.hpp"
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

// Flex-start, reserved and best-effort slices are billed at rates of their own (best-effort at spot's), and every
// generation of the built-in table has them; best-effort equals spot (or preemptible) there.
TEST(Prices, TheBuiltInTablePricesEveryProvisioningModelOfEveryGeneration) {
  const auto table = builtin_prices();
  for (const char* generation : {"v2", "v3", "v4", "v5litepod", "v5p", "v6e"}) {
    ASSERT_TRUE(table.per_chip_hour.contains(generation)) << generation;
    const auto& tiers = table.per_chip_hour.at(generation);
    for (const char* tier : {"ondemand", "flex-start", "reserved", "best-effort"}) {
      ASSERT_TRUE(tiers.contains(tier)) << generation << " " << tier;
    }
    const auto spot = tiers.contains("spot") ? tiers.at("spot") : tiers.at("preemptible");
    EXPECT_EQ(tiers.at("best-effort"), spot) << generation << ": Google bills best-effort at spot rates";
    EXPECT_LT(tiers.at("reserved"), tiers.at("ondemand")) << generation << ": a commitment's rate is below on demand";
    EXPECT_GT(tiers.at("reserved"), spot) << generation;
    EXPECT_LE(tiers.at("flex-start"), tiers.at("ondemand")) << generation;
  }
  EXPECT_EQ(table.chip_hour("v6e-8", domain::Pricing::reserved), 1.89) << "v6e's published 1-year rate";
}

TEST(Prices, EachProvisioningModelIsPricedAtItsOwnRate) {
  PriceTable table;
  table.per_chip_hour["v6e"] = {
      {"ondemand", 2.7}, {"spot", 0.5}, {"flex-start", 1.5}, {"reserved", 1.9}, {"best-effort", 0.45}};
  table.per_chip_hour["v4"] = {{"ondemand", 3.0}, {"spot", 1.0}};
  table.per_chip_hour["v2"] = {{"ondemand", 1.5}, {"preemptible", 0.5}};
  EXPECT_EQ(table.chip_hour("v6e-8", domain::Pricing::flex_start), 1.5);
  EXPECT_EQ(table.chip_hour("v6e-8", domain::Pricing::reserved), 1.9);
  EXPECT_EQ(table.chip_hour("v6e-8", domain::Pricing::best_effort), 0.45) << "its own figure first";
  EXPECT_EQ(table.chip_hour("v4-8", domain::Pricing::best_effort), 1.0) << "else spot's, as Google bills it";
  EXPECT_EQ(table.chip_hour("v2-8", domain::Pricing::best_effort), 0.5) << "or preemptible's, the same model";
  // On-demand, flex-start and reserved have rates of their own: none is guessed from another tier.
  EXPECT_FALSE(table.chip_hour("v4-8", domain::Pricing::flex_start));
  EXPECT_FALSE(table.chip_hour("v4-8", domain::Pricing::reserved));
  table.per_chip_hour["v5p"] = {{"flex-start", 2.0}, {"reserved", 2.5}, {"best-effort", 0.8}};
  EXPECT_FALSE(table.chip_hour("v5p-8", domain::Pricing::ondemand));
  EXPECT_FALSE(table.chip_hour("v5p-8", domain::Pricing::spot)) << "best-effort does not stand in for spot";
}

// What `show` and `report` charge: each slice's chip-hours at its own attempt's provisioning model.
TEST(Prices, TheCostOfAJobPricesEachSliceByItsOwnProvisioningModel) {
  PriceTable table;
  table.per_chip_hour["v6e"] = {{"ondemand", 2.7}, {"spot", 0.5}, {"flex-start", 1.5}, {"reserved", 1.9}};
  core::JobAccount account;
  const auto usage = [](domain::Pricing tier, double chip_hours) {
    core::ChipUsage u;
    u.zone = "us-east5-a";
    u.accelerator = "v6e-8";
    u.tier = tier;
    u.chips = 8;
    u.chip_hours = chip_hours;
    return u;
  };
  account.usage = {usage(domain::Pricing::flex_start, 10), usage(domain::Pricing::reserved, 4),
                   usage(domain::Pricing::best_effort, 2)};
  const auto cost = reporting::cost_of(account, table);
  EXPECT_TRUE(cost.complete);
  EXPECT_DOUBLE_EQ(cost.amount, 10 * 1.5 + 4 * 1.9 + 2 * 0.5);
  // A model the table has no rate for leaves the cost incomplete rather than priced as another.
  table.per_chip_hour["v6e"].erase("flex-start");
  const auto partial = reporting::cost_of(account, table);
  EXPECT_FALSE(partial.complete);
  EXPECT_DOUBLE_EQ(partial.amount, 4 * 1.9 + 2 * 0.5);
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
  write(path, "generations:\n  v4:\n    on-demand: 9.5\n    flex_start: 7.5\n    best_effort: 0.75\n  v5e:\n"
              "    standard: 8.5\n");
  const auto table = load_prices(path);
  EXPECT_EQ(table.chip_hour("v4-8", domain::Pricing::ondemand), 9.5);
  EXPECT_EQ(table.chip_hour("v5litepod-16", domain::Pricing::ondemand), 8.5);
  EXPECT_EQ(table.chip_hour("v4-8", domain::Pricing::flex_start), 7.5);
  EXPECT_EQ(table.chip_hour("v4-8", domain::Pricing::best_effort), 0.75);
  EXPECT_FALSE(table.per_chip_hour.at("v4").contains("on-demand"));
  EXPECT_FALSE(table.per_chip_hour.at("v4").contains("flex_start"));
}

// data_transfer: reading a bucket across regions, by continent, with its source; a user's rates go over the
// built-in ones, and a mistake names its line and key.
TEST(Prices, DataTransferRatesByContinentWithTheirSource) {
  const auto builtin = builtin_prices();
  EXPECT_TRUE(builtin.transfer.source.starts_with("https://cloud.google.com/storage/pricing"))
      << builtin.transfer.source;
  EXPECT_EQ(builtin.transfer.per_gib("europe", "europe"), builtin.transfer.same_continent.at("default"));
  EXPECT_EQ(builtin.transfer.per_gib("asia", "asia"), builtin.transfer.same_continent.at("asia"));
  EXPECT_EQ(builtin.transfer.per_gib("europe", "oceania"), builtin.transfer.between_continents.at("oceania"))
      << "the higher end";

  test::TempDir dir;
  const auto path = dir.path() / "prices.yaml";
  write(path, "data_transfer:\n  same_continent:\n    europe: 0.01\n");
  const auto table = load_prices(path);
  EXPECT_EQ(table.transfer.per_gib("europe", "europe"), 0.01);
  EXPECT_EQ(table.transfer.per_gib("north-america", "north-america"), builtin.transfer.same_continent.at("default"));
  EXPECT_EQ(table.transfer.source, builtin.transfer.source);

  write(path, "data_transfer:\n  same_continent:\n    atlantis: 0.01\n  between:\n    default: 1\n"
              "  between_continents:\n    default: lots\n");
  try {
    (void)load_prices(path);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.diagnostics().size(), 3U) << e.what();
    EXPECT_EQ(e.diagnostics()[0].where.line, 3);
    EXPECT_EQ(e.diagnostics()[0].where.key_path, "data_transfer.same_continent.atlantis");
    EXPECT_EQ(e.diagnostics()[1].where.key_path, "data_transfer.between");
    EXPECT_EQ(e.diagnostics()[2].where.line, 7);
    EXPECT_EQ(e.diagnostics()[2].where.key_path, "data_transfer.between_continents.default");
  }
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
