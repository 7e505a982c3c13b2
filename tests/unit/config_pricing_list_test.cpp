// tpu.pricing as a list: the provisioning models a job may fail over between, each a tier of candidates of its own,
// in the order written; a single value reads as it always did.
#include "jobman/config/loader.hpp"
#include "jobman/util/error.hpp"

#include <gtest/gtest.h>
#include <string>

namespace jobman::config {
namespace config_pricing_list_test {

std::string with_pricing(const std::string& pricing, const std::string& more = "") {
  return "job:\n  name: p\ntpu:\n  accelerator: v4-8\n  zone: [us-central2-b, us-east1-d]\n  pricing: " + pricing +
         "\n" + more + "command:\n  cmd: echo hi\n";
}

std::string error_of(const std::string& text) {
  try {
    parse_job_configs(text, "pricing.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ConfigPricingList, EachPricingIsATierOfCandidatesInTheOrderWritten) {
  const auto configs = parse_job_configs(with_pricing("[flex-start, spot]", "  max_run_duration: 3h\n"), "p.yaml");
  ASSERT_EQ(configs.size(), 1U);
  const auto& c = configs[0];
  EXPECT_EQ(c.tpu.pricing, Pricing::flex_start);
  EXPECT_EQ(c.tpu.pricings, (std::vector<Pricing>{Pricing::flex_start, Pricing::spot}));
  std::vector<std::string> labels;
  for (const auto& candidate : candidates(c)) {
    labels.push_back(candidate.label());
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"v4-8 flex-start in us-central2-b", "v4-8 flex-start in us-east1-d",
                                              "v4-8 spot in us-central2-b", "v4-8 spot in us-east1-d"}));
  // The snapshot keeps the list, and reads back the same.
  const auto again = parse_job_configs(c.resolved_yaml, "snapshot.yaml");
  EXPECT_EQ(again[0].tpu.pricings, c.tpu.pricings);
  EXPECT_EQ(again[0].tpu.max_run_duration_seconds, 3 * 3600);
  // A single value is one tier, as before.
  EXPECT_EQ(parse_job_configs(with_pricing("spot"), "p.yaml")[0].tpu.pricings, std::vector<Pricing>{Pricing::spot});
}

TEST(ConfigPricingList, AnUnknownOrRepeatedPricingInAListIsAnErrorAtItsItem) {
  EXPECT_NE(error_of(with_pricing("[spot, flex]")).find("pricing.yaml:6:19: tpu.pricing[1]: 'flex' is not a pricing; "),
            std::string::npos)
      << error_of(with_pricing("[spot, flex]"));
  EXPECT_NE(error_of(with_pricing("[spot, spot]")).find("tpu.pricing[1]: spot is listed twice"), std::string::npos);
  EXPECT_NE(error_of(with_pricing("[]")).find("tpu.pricing: an empty list"), std::string::npos);
  // A flex-start tier anywhere in the list needs its run duration.
  EXPECT_NE(error_of(with_pricing("[spot, flex-start]")).find("flex-start needs tpu.max_run_duration"),
            std::string::npos);
}

} // namespace config_pricing_list_test
} // namespace jobman::config
