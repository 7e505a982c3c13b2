// The HTML report (`jobman report --html`) in headless Chromium at a laptop's 1400 px: the per-job table, with long
// names and figures of days, fits the window, so its chip-hours and cost are on screen without scrolling sideways.
#include "jobman/config/prices.hpp"
#include "jobman/reporting/report.hpp"
#include "jobman/util/system.hpp"
#include "support/browser.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <fstream>
#include <gtest/gtest.h>

namespace jobman::test {
namespace report_html_browser_test {

using domain::Phase;

constexpr std::int64_t kMinute = 60'000;
constexpr std::int64_t kHour = 60 * kMinute;
constexpr std::int64_t kDay = 24 * kHour;

// A job of a report as a long run leaves it: days of time in every bucket, a name as sweeps make them.
reporting::ReportRow row(std::int64_t id, const std::string& name, Phase phase, std::int64_t scale) {
  reporting::ReportRow r;
  r.job.id = id;
  r.job.name = name;
  r.job.phase = phase;
  r.job.accelerator = "v5litepod-256";
  r.job.zone = "us-east5-b";
  r.job.pricing = domain::Pricing::spot;
  r.job.preemptions = 3;
  const std::int64_t now = util::now_ms();
  const std::array<std::int64_t, core::kBucketCount> ms = {
      13 * kHour + 47 * kMinute, 2 * kHour + 11 * kMinute, 3 * kHour + 58 * kMinute,
      31 * kDay + 7 * kHour,     9 * kHour + 33 * kMinute, 4 * kHour + 19 * kMinute,
      6 * kHour + 2 * kMinute,   2 * kHour + 26 * kMinute, 1 * kHour + 44 * kMinute};
  std::int64_t at = now - 40 * kDay;
  for (const auto bucket : core::all_buckets()) {
    const auto span = ms[static_cast<std::size_t>(bucket)] * scale;
    r.account.ms[static_cast<std::size_t>(bucket)] = span;
    r.account.timeline.push_back(core::TimelineSegment{at, at + span, bucket, 1, Phase::running});
    at += span;
  }
  r.account.lost_steps = 1'234'567 * scale;
  core::ChipUsage usage;
  usage.zone = r.job.zone;
  usage.accelerator = r.job.accelerator;
  usage.tier = domain::Pricing::spot;
  usage.chips = 256;
  usage.chip_hours = 198'765.43 * static_cast<double>(scale);
  r.account.usage.push_back(usage);
  r.cost.amount = 412'345.67 * static_cast<double>(scale);
  return r;
}

class ReportHtmlBrowserTest : public ::testing::Test {
protected:
  TempDir dir;

  // The report of `rows`, written as `jobman report --html` writes it; its file:// URL.
  std::string write_report(std::vector<reporting::ReportRow> rows) {
    reporting::Report report;
    report.now_ms = util::now_ms();
    report.since_ms = report.now_ms - 60 * kDay;
    for (const auto& r : rows) {
      for (std::size_t b = 0; b < core::kBucketCount; ++b) {
        report.ms[b] += r.account.ms[b];
      }
      report.cost += r.cost.amount;
      auto& group = report.by_kind[{r.job.accelerator, *r.job.pricing}];
      group.chip_hours += r.account.usage.front().chip_hours;
      group.cost += r.cost.amount;
      auto& zone = report.by_zone[r.job.zone];
      zone.chip_hours += r.account.usage.front().chip_hours;
      zone.cost += r.cost.amount;
      ++zone.attempts;
    }
    report.jobs = rows.size();
    report.rows = std::move(rows);
    const auto path = dir / "report.html";
    std::ofstream out(path);
    reporting::write_report_html(out, report, config::builtin_prices());
    return "file://" + path.string();
  }
};

TEST_F(ReportHtmlBrowserTest, TheJobTableFitsA1400PixelWindowWithChipHoursAndCostOnScreen) {
  ASSERT_TRUE(HeadlessBrowser::available()) << "chromium is missing: scripts/test installs the Debian package";
  const auto url = write_report({
      row(41, "llama3-70b-pretrain-lr3e-4-bs1024-warmup2000-cosine-decay-run-7", Phase::succeeded, 10),
      row(42, "vit-huge-finetune-imagenet21k", Phase::running, 10),
      row(43, "t5-xxl-eval-sweep-member-lr=1e-4,bs=512", Phase::failed, 1),
      row(44, "resnet", Phase::cancelled, 1),
  });
  HeadlessBrowser browser(1400, 900);
  browser.open(url);
  // Every header cell of the job table, its chip-hours and cost among them, ends inside the window, and the page
  // does not scroll sideways.
  const auto fit = browser.evaluate(R"(JSON.stringify((() => {
    const table = document.querySelector('table.per-job');
    const cells = [...table.querySelectorAll('th')].map(th => [th.textContent.trim(),
                                                                Math.round(th.getBoundingClientRect().right)]);
    return {window: document.documentElement.clientWidth, page: document.documentElement.scrollWidth,
            table: Math.round(table.getBoundingClientRect().right),
            container: table.parentElement.scrollWidth - table.parentElement.clientWidth, cells};
  })()))");
  const auto seen = nlohmann::json::parse(fit.get<std::string>());
  const int width = seen["window"];
  EXPECT_LE(seen["page"].get<int>(), width) << "the page scrolls sideways: " << seen.dump();
  // With room for a scrollbar that takes space (the page is long), as a desktop browser's does.
  EXPECT_LE(seen["table"].get<int>(), width - 20) << seen.dump();
  EXPECT_LE(seen["container"].get<int>(), 0) << "the table scrolls inside its container: " << seen.dump();
  std::vector<std::string> headers;
  for (const auto& cell : seen["cells"]) {
    headers.push_back(cell[0]);
    EXPECT_LE(cell[1].get<int>(), width) << cell[0] << " is off screen: " << seen.dump();
  }
  EXPECT_NE(std::find(headers.begin(), headers.end(), "chip-hours"), headers.end()) << seen.dump();
  EXPECT_NE(std::find(headers.begin(), headers.end(), "cost"), headers.end()) << seen.dump();
  // A long name is cut short on screen, and whole in its tooltip.
  EXPECT_EQ(browser.evaluate("document.querySelector('table.per-job td.job-name').title"),
            "llama3-70b-pretrain-lr3e-4-bs1024-warmup2000-cosine-decay-run-7");
  browser.screenshot(dir / "report-1400.png");
  EXPECT_TRUE(browser.problems().empty()) << browser.problems().front();
}

} // namespace report_html_browser_test
} // namespace jobman::test
