// `jobman report` over thousands of jobs, the real binary: the JSON streams every row once, in id order, with totals
// that are the sum of its rows, and the CSV has the same rows. Long enough that the binary accounts chunks on a
// second thread while it reads the next (the ThreadSanitizer stage runs it too).
#include "jobman/core/goodput.hpp"
#include "jobman/store/job_store.hpp"
#include "support/report_history.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <array>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace jobman::test {
namespace report_scale_e2e_test {

using nlohmann::json;

TEST(ReportScaleTest, AReportOfThousandsOfJobsHasEveryRowOnceInOrderAndTotalsThatAreTheirSum) {
  TempDir dir;
  ReportHistory history;
  {
    auto store = store::JobStore::open(dir / "home" / "jobman.db");
    history = add_report_history(store, 6'000);
  }
  const RunOptions options{{{"JOBMAN_HOME", (dir / "home").string()}, {"JOBMAN_AUTOSTART", "0"}}, "", ""};
  std::vector<std::int64_t> all{history.worker};
  all.insert(all.end(), history.jobs.begin(), history.jobs.end());

  const auto report = run_jobman({"report", "--since", "1d", "--json"}, options);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const auto parsed = json::parse(report.out);
  const auto& rows = parsed.at("jobs");
  ASSERT_EQ(rows.size(), all.size());
  std::array<double, core::kBucketCount> seconds{};
  double cost = 0;
  double wall = 0;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const auto& row = rows[k];
    ASSERT_EQ(row.at("id").get<std::int64_t>(), all[k]) << "row " << k;
    cost += row.at("account").at("cost").get<double>();
    if (row.at("kind") == "task") {
      continue; // Inside its worker's time.
    }
    wall += row.at("account").at("wall_seconds").get<double>();
    std::size_t b = 0;
    for (const auto& [bucket, value] : row.at("account").at("seconds").items()) {
      seconds.at(b++) += value.get<double>();
    }
  }
  const auto& totals = parsed.at("totals");
  EXPECT_EQ(totals.at("jobs").get<std::size_t>(), all.size());
  EXPECT_NEAR(totals.at("cost").get<double>(), cost, 1e-6);
  EXPECT_GT(cost, 0.0);
  EXPECT_NEAR(totals.at("wall_seconds").get<double>(), wall, 1e-3 * static_cast<double>(all.size()));
  std::size_t b = 0;
  for (const auto& [bucket, value] : totals.at("seconds").items()) {
    EXPECT_NEAR(value.get<double>(), seconds.at(b++), 1e-3 * static_cast<double>(all.size())) << bucket;
  }
  EXPECT_GT(totals.at("by_zone").at(0).at("preemptions").get<int>(), 0);

  const auto csv = run_jobman({"report", "--since", "1d", "--csv"}, options);
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  std::istringstream lines(csv.out);
  std::string line;
  std::getline(lines, line); // The header.
  std::size_t k = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(k, all.size());
    EXPECT_EQ(line.substr(0, line.find(',')), std::to_string(all[k])) << "row " << k;
    ++k;
  }
  EXPECT_EQ(k, all.size());
}

} // namespace report_scale_e2e_test
} // namespace jobman::test
