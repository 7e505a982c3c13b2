// The remote layer's runner of many clients (src/remote/child.hpp): how many run at once, and whose time a timeout
// counts.
#include "../../src/remote/child.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace jobman::test {
namespace remote_run_all_test {

using remote::detail::run_all;
using std::chrono::milliseconds;

// `count` shells that each mark themselves running in `dir`, print how many are marked, live `seconds`, then unmark.
std::vector<std::vector<std::string>> counting_shells(const TempDir& dir, int count, const std::string& seconds) {
  std::vector<std::vector<std::string>> argvs;
  argvs.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    argvs.push_back({"sh", "-c",
                     "d=" + dir.path().string() + "; mkdir \"$d/" + std::to_string(i) +
                         ".run\" && set -- \"$d\"/*.run && echo \"$#\" && sleep " + seconds + " && rmdir \"$d/" +
                         std::to_string(i) + ".run\""});
  }
  return argvs;
}

TEST(RemoteRunAll, AtMostTheLimitRunAtOnceAndEveryOneRuns) {
  TempDir dir;
  const auto runs = run_all(counting_shells(dir, 6, "0.2"), {}, milliseconds(30'000), {}, 2);
  ASSERT_EQ(runs.size(), 6U);
  for (const auto& run : runs) {
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_FALSE(run.timed_out);
    const int running = std::stoi(run.output);
    EXPECT_GE(running, 1);
    EXPECT_LE(running, 2) << "more than the limit ran at once";
  }
}

TEST(RemoteRunAll, WithoutALimitAllStartTogether) {
  TempDir dir;
  // Each waits (20 s at most) until all four have started, then says how many had.
  std::vector<std::vector<std::string>> argvs;
  argvs.reserve(4);
  for (int i = 0; i < 4; ++i) {
    argvs.push_back({"sh", "-c",
                     "d=" + dir.path().string() + "; mkdir \"$d/" + std::to_string(i) +
                         ".run\"; i=0; while set -- \"$d\"/*.run && [ $# -lt 4 ] && [ $i -lt 400 ]; do sleep 0.05; "
                         "i=$((i+1)); done; echo \"$#\""});
  }
  const auto runs = run_all(argvs, {}, milliseconds(30'000));
  for (const auto& run : runs) {
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_EQ(run.output, "4\n");
  }
}

TEST(RemoteRunAll, EachClientsTimeCountsFromItsOwnStart) {
  TempDir dir;
  // One at a time, three clients of 0.6 s each take 1.8 s in all: past a timeout of 1.5 s, which none of them reaches.
  const auto runs = run_all(counting_shells(dir, 3, "0.6"), {}, milliseconds(1'500), {}, 1);
  for (const auto& run : runs) {
    EXPECT_FALSE(run.timed_out) << run.output;
    EXPECT_EQ(run.exit_code, 0) << run.output;
  }
  // One that outlives its own time is stopped, and the one after it still gets all of its own.
  std::vector<std::vector<std::string>> argvs = {{"sh", "-c", "exec sleep 30"}, {"sh", "-c", "echo second"}};
  const auto stopped = run_all(argvs, {}, milliseconds(300), {}, 1);
  EXPECT_TRUE(stopped[0].timed_out);
  EXPECT_NE(stopped[0].exit_code, 0);
  EXPECT_FALSE(stopped[1].timed_out);
  EXPECT_EQ(stopped[1].exit_code, 0);
  EXPECT_EQ(stopped[1].output, "second\n");
}

TEST(RemoteRunAll, InputsReachTheirClientsUnderALimit) {
  std::vector<std::vector<std::string>> argvs;
  std::vector<std::string> inputs;
  for (int i = 0; i < 5; ++i) {
    argvs.push_back({"cat"});
    inputs.push_back("input " + std::to_string(i) + "\n");
  }
  const auto runs = run_all(argvs, {}, milliseconds(30'000), inputs, 2);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].output, inputs[i]);
    EXPECT_EQ(runs[i].exit_code, 0);
  }
}

} // namespace remote_run_all_test
} // namespace jobman::test
