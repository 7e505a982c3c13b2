// Many jobman processes on one store at the same moment.
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <barrier>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

namespace jobman::test {
namespace cli_concurrency_test {

TEST(CliConcurrency, ThirtyTwoCreatesAtOnceGetDistinctIdsAndLoseNothing) {
  TempDir dir;
  RunOptions options;
  options.env["JOBMAN_HOME"] = (dir / "home").string();
  options.env["XDG_CONFIG_HOME"] = (dir / "config").string();
  options.env["JOBMAN_ZONE"] = "";
  const std::string config = std::string(JOBMAN_TEST_DATA_DIR) + "/cli/train.yaml";
  constexpr int kProcesses = 32;
  std::vector<RunResult> results(kProcesses);
  std::barrier start(kProcesses);
  std::vector<std::thread> threads;
  for (int i = 0; i < kProcesses; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      results[static_cast<std::size_t>(i)] = run_jobman({"create", config}, options);
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  std::set<std::string> ids;
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("locked"), std::string::npos) << r.err;
    ASSERT_EQ(r.out.size(), 7U) << r.out;
    ids.insert(r.out.substr(0, 6));
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kProcesses));
  EXPECT_EQ(*ids.begin(), "000001");
  EXPECT_EQ(*ids.rbegin(), "000032");
  const auto list = run_jobman({"list", "--all", "--json"}, options);
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(nlohmann::json::parse(list.out).size(), static_cast<std::size_t>(kProcesses));
}

} // namespace cli_concurrency_test
} // namespace jobman::test
