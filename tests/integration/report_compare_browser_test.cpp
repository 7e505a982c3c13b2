// The comparison table of the HTML report (`jobman report --compare --html`) in headless Chromium at a laptop's
// 1400 px: with long experiment names and figures of every size it fits the window, its steps per dollar on screen,
// and the best place of each experiment stands out.
#include "jobman/config/prices.hpp"
#include "jobman/reporting/report.hpp"
#include "jobman/util/system.hpp"
#include "support/browser.hpp"
#include "support/temp_dir.hpp"

#include <fstream>
#include <gtest/gtest.h>

namespace jobman::test {
namespace report_compare_browser_test {

using domain::Pricing;

reporting::CompareGroup group(const std::string& experiment, const std::string& accelerator, const std::string& zone,
                              Pricing tier, std::int64_t steps, double hours, int chips, double price) {
  reporting::CompareGroup g;
  g.experiment = experiment;
  g.accelerator = accelerator;
  g.zone = zone;
  g.tier = tier;
  g.runs = 12;
  g.succeeded = 11;
  g.steps = steps;
  g.held_hours = hours;
  g.chip_hours = hours * chips;
  g.cost = g.chip_hours * price;
  g.ms[static_cast<std::size_t>(core::Bucket::productive)] = static_cast<std::int64_t>(hours * 3.3e6);
  g.ms[static_cast<std::size_t>(core::Bucket::queued)] = static_cast<std::int64_t>(hours * 0.9e6);
  g.preemptions = 7;
  return g;
}

TEST(ReportCompareBrowserTest, TheComparisonFitsA1400PixelWindowWithTheBestStepsPerDollarOfEachExperimentInBold) {
  ASSERT_TRUE(HeadlessBrowser::available()) << "chromium is missing: scripts/test installs the Debian package";
  TempDir dir;
  reporting::Report report;
  report.now_ms = util::now_ms();
  report.since_ms = report.now_ms - 30 * 86'400'000LL;
  report.compared = true;
  const std::string long_name = "llama3-70b-pretrain-cosine-decay-warmup2000-seqlen8192";
  report.comparison = {
      group(long_name, "v4-256", "us-central2-b", Pricing::ondemand, 1'234'567, 410.5, 128, 3.22),
      group(long_name, "v4-256", "us-central2-b", Pricing::spot, 1'100'000, 520.25, 128, 0.97),
      group(long_name, "v5litepod-256", "us-east5-b", Pricing::spot, 987'654, 300.75, 256, 0.6),
      group("resnet50", "v5litepod-8", "us-west4-a", Pricing::flex_start, 250'000, 3.5, 8, 1.2),
  };
  report.runs_compared = 48;
  report.runs_without_steps = 2;
  // One job row, so that the report is written whole.
  reporting::ReportRow row;
  row.job.id = 1;
  row.job.name = long_name;
  row.job.phase = domain::Phase::succeeded;
  report.rows.push_back(row);
  report.jobs = 1;
  const auto path = dir / "report.html";
  {
    std::ofstream out(path);
    reporting::write_report_html(out, report, config::builtin_prices());
  }

  HeadlessBrowser browser(1400, 900);
  browser.open("file://" + path.string());
  const auto seen = nlohmann::json::parse(browser
                                              .evaluate(R"(JSON.stringify((() => {
    const table = document.querySelector('table.compare');
    return {window: document.documentElement.clientWidth, page: document.documentElement.scrollWidth,
            table: Math.round(table.getBoundingClientRect().right),
            headers: [...table.querySelectorAll('th')].map(th => th.textContent.trim()),
            name: [table.querySelector('td.name').title,
                   table.querySelector('td.name').scrollWidth > table.querySelector('td.name').clientWidth],
            best: [...table.querySelectorAll('td.best')].map(td =>
                    [td.parentElement.cells[1].textContent, td.parentElement.cells[3].textContent,
                     getComputedStyle(td).fontWeight])};
  })()))")
                                              .get<std::string>());
  const int width = seen["window"];
  EXPECT_LE(seen["page"].get<int>(), width) << "the page scrolls sideways: " << seen.dump();
  EXPECT_LE(seen["table"].get<int>(), width - 20) << seen.dump();
  EXPECT_EQ(seen["headers"].back(), "preemptions per day") << seen.dump();
  // A long experiment name is cut short on screen, and whole in its tooltip.
  EXPECT_EQ(seen["name"][0], long_name);
  EXPECT_EQ(seen["name"][1], true) << seen.dump();
  // The long experiment's best steps per dollar is v5litepod-256 spot's (987,654 over 300.75 h x 256 chips x $0.60,
  // against 17 and 7 on v4-256); an experiment of one group has no best.
  ASSERT_EQ(seen["best"].size(), 1u) << seen.dump();
  EXPECT_EQ(seen["best"][0][0], "v5litepod-256");
  EXPECT_EQ(seen["best"][0][1], "spot");
  EXPECT_EQ(seen["best"][0][2], "700");
  browser.screenshot(dir / "compare-1400.png");
  EXPECT_TRUE(browser.problems().empty()) << browser.problems().front();
}

} // namespace report_compare_browser_test
} // namespace jobman::test
