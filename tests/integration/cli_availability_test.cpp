// `jobman availability` through the binary: what it learnt of jobs stays when `jobman clean` removes them.
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/system.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace jobman::test {
namespace cli_availability_test {

const std::string kTrain = std::string(JOBMAN_TEST_DATA_DIR) + "/cli/train.yaml"; // A spot v4-32 in us-central2-b.

class CliAvailability : public ::testing::Test {
protected:
  TempDir dir;
  RunResult jm(const std::vector<std::string>& args) const {
    RunOptions options;
    options.env = {{"JOBMAN_HOME", (dir / "home").string()},
                   {"XDG_CONFIG_HOME", (dir / "config").string()},
                   {"JOBMAN_PROJECT", ""},
                   {"JOBMAN_CLOUD", ""},
                   {"JOBMAN_ZONE", ""},
                   {"JOBMAN_AUTOSTART", "false"}, // No supervisor: the test records the attempts itself.
                   {"NO_COLOR", ""},
                   {"USER", "alice"}};
    return run_jobman(args, options);
  }
  [[nodiscard]] store::JobStore open_store() const { return store::JobStore::open(dir / "home" / "jobman.db"); }
  // `jobman create`; the job's id.
  std::int64_t create() const {
    const auto r = jm({"create", kTrain});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::stoll(r.out.substr(0, r.out.find('\n')));
  }
  // Records an attempt of job `id` in `zone` as the supervisor would: requested, up (or not), ended with `outcome`
  // (none leaves it waiting) and its slice released.
  void attempt(std::int64_t id, const std::string& zone, bool came_up, domain::AttemptOutcome outcome) const {
    auto store = open_store();
    const auto number = static_cast<int>(store.attempts().of(id).size()) + 1;
    const auto name = "cli-train-" + std::to_string(id) + "-a" + std::to_string(number);
    (void)store.attempts().begin(id, name, name, zone, true);
    store.attempts().confirm_created(id, number);
    if (came_up) {
      store.attempts().record_slice_active(id, number, {});
    }
    if (outcome != domain::AttemptOutcome::none) {
      store.attempts().end(id, number, outcome, std::nullopt);
      store.attempts().mark_released(id, name, "deleted by the test");
    }
  }
  void finish(std::int64_t id, domain::Phase phase) const {
    domain::PhaseChange change;
    change.to = phase;
    change.reason = "set by the test";
    ASSERT_TRUE(open_store().jobs().transition(id, std::nullopt, change));
  }
  nlohmann::json availability() const {
    const auto r = jm({"availability", "-a", "v4-32", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  }
};

TEST_F(CliAvailability, CleanRemovesJobsButNotWhatAvailabilityLearntOfThem) {
  const auto preempted = create();
  attempt(preempted, "us-central2-b", true, domain::AttemptOutcome::preempted);
  attempt(preempted, "us-east1-d", true, domain::AttemptOutcome::succeeded);
  finish(preempted, domain::Phase::succeeded);
  const auto waited_out = create();
  attempt(waited_out, "us-central2-b", false, domain::AttemptOutcome::timed_out);
  attempt(waited_out, "us-east1-d", true, domain::AttemptOutcome::failed);
  finish(waited_out, domain::Phase::failed);
  const auto waiting = create();
  attempt(waiting, "us-central2-b", false, domain::AttemptOutcome::none);

  const auto before = availability();
  ASSERT_EQ(before.size(), 2U) << before.dump(2);
  EXPECT_EQ(before[0]["zone"], "us-central2-b");
  EXPECT_EQ(before[0]["requests"], 3);
  EXPECT_EQ(before[0]["waiting_now"], 1);
  EXPECT_EQ(before[1]["requests"], 2);

  const auto cleaned = jm({"clean", "--all-finished"});
  ASSERT_EQ(cleaned.exit_code, 0) << cleaned.err;
  EXPECT_EQ(cleaned.out, "000001: removed\n000002: removed\n");
  EXPECT_EQ(jm({"show", "1"}).exit_code, 3) << "the job is gone";
  EXPECT_FALSE(std::filesystem::exists(dir / "home" / "jobs" / "000001")) << "and its directory";

  EXPECT_EQ(availability(), before) << "what was learnt of the cleaned jobs stays";
  EXPECT_EQ(create(), 4) << "ids are never reused";
}

} // namespace cli_availability_test
} // namespace jobman::test
