// Every example in configs/examples/ run as a new user runs it, on the bundled mock cloud with its default world
// (configs/mock-cloud.yaml): no endpoint, no project, autostart on, so jobman starts the mock and the supervisor
// itself. The jobs, the sweep's three members and the worker's three tasks all end SUCCEEDED.
#include "jobman/store/job_store.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace jobman::test {
namespace examples_e2e_test {

namespace fs = std::filesystem;

const fs::path kExamples = fs::path(JOBMAN_SOURCE_DIR) / "configs" / "examples";

class ExamplesTest : public ::testing::Test {
protected:
  void TearDown() override { kill_processes_of(home); }

  // jobman as a new user runs it: the bundled mock, started by the first command that needs it.
  RunResult jm(const std::vector<std::string>& args) {
    return run_jobman(args, RunOptions{{{"JOBMAN_HOME", home.string()},
                                        {"XDG_CONFIG_HOME", (dir / "config").string()},
                                        {"JOBMAN_CLOUD", ""},
                                        {"JOBMAN_PROJECT", ""},
                                        {"JOBMAN_ZONE", ""},
                                        {"JOBMAN_API_ENDPOINT", ""},
                                        {"JOBMAN_MOCK_TIME_SCALE", ""},
                                        {"JOBMAN_MOCK_ADMIN_TOKEN_FILE", ""},
                                        {"JOBMAN_GCLOUD", ""},
                                        {"JOBMAN_STORE", ""},
                                        {"JOBMAN_AUTOSTART", "1"},
                                        {"NO_COLOR", "1"}},
                                       "",
                                       ""});
  }

  // The ids a command printed, one per line.
  static std::vector<std::string> ids(const RunResult& r) {
    std::vector<std::string> out;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) {
        out.push_back(line);
      }
    }
    return out;
  }

  TempDir dir;
  fs::path home = dir / "home";
};

TEST_F(ExamplesTest, EveryExampleRunsToSucceededOnTheDefaultMock) {
  std::vector<std::string> jobs;
  for (const char* example : {"spot-v4-systolic.yaml", "sweep-v6e.yaml", "ondemand-v5e.yaml"}) {
    const auto path = (kExamples / example).string();
    const auto validated = jm({"validate", path});
    EXPECT_EQ(validated.exit_code, 0) << example << ": " << validated.out << validated.err;
    const auto created = jm({"create", path});
    ASSERT_EQ(created.exit_code, 0) << example << ": " << created.err;
    const auto made = ids(created);
    ASSERT_FALSE(made.empty()) << example;
    jobs.insert(jobs.end(), made.begin(), made.end());
  }
  ASSERT_EQ(jobs.size(), 5U) << "one job each, and the sweep's three";

  // The worker and the queue's three scripts.
  const auto worker = jm({"worker", "start", "--config", (kExamples / "worker-v4.yaml").string(), "-n", "examples"});
  ASSERT_EQ(worker.exit_code, 0) << worker.err;
  std::vector<std::string> tasks;
  for (const char* script : {"hello.sh", "train.sh", "flaky.sh"}) {
    const auto submitted = jm({"task", "submit", (kExamples / "tasks" / script).string(), "--json"});
    ASSERT_EQ(submitted.exit_code, 0) << script << ": " << submitted.err;
    const auto document = nlohmann::json::parse(submitted.out);
    const auto& task = document.is_array() ? document.at(0) : document;
    tasks.push_back(std::to_string(task.at("id").get<std::int64_t>()));
  }

  std::vector<std::string> wait{"wait"};
  wait.insert(wait.end(), jobs.begin(), jobs.end());
  wait.insert(wait.end(), tasks.begin(), tasks.end());
  wait.insert(wait.end(), {"--timeout", "600", "--json"});
  const auto waited = jm(wait);
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err;
  const auto ended = nlohmann::json::parse(waited.out, nullptr, false);
  ASSERT_TRUE(ended.is_array()) << waited.out;
  for (const auto& job : ended) {
    EXPECT_EQ(job.value("status", ""), "SUCCEEDED") << job.dump(2);
  }
  // The flaky task failed its first run on purpose and succeeded on its second.
  const auto flaky = nlohmann::json::parse(jm({"show", tasks[2], "--json"}).out);
  EXPECT_EQ(flaky["attempts"].size(), 2U) << flaky.dump(2);

  const auto released = jm({"worker", "delete", "--all"});
  EXPECT_EQ(released.exit_code, 0) << released.err;
}

// validate asks the bundled mock as create would, starting it when it is not running, so that its verdict does not
// depend on whether a mock happens to run; and the mock's world says which tiers each zone has, so on-demand where a
// zone has only spot is refused at tpu.pricing, with its line.
TEST_F(ExamplesTest, ValidateAsksTheBundledMockAndKnowsItsTiers) {
  const auto nowhere = dir.write("nowhere.yaml", "job:\n  name: nowhere\ntpu:\n  accelerator: v4-8\n"
                                                 "  zone: us-nowhere1-a\ncommand:\n  cmd: echo hi\n");
  const auto refused = jm({"validate", nowhere.string()});
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("nowhere.yaml:5:"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("us-nowhere1-a"), std::string::npos) << refused.err;

  const auto spot_only = dir.write("spot-only.yaml", "job:\n  name: v5e\ntpu:\n  accelerator: v5litepod-16\n"
                                                     "  zone: europe-west4-b\n  pricing: ondemand\n"
                                                     "command:\n  cmd: echo hi\n");
  const auto tier = jm({"validate", spot_only.string()});
  EXPECT_EQ(tier.exit_code, 2) << tier.out << tier.err;
  EXPECT_NE(tier.err.find("spot-only.yaml:6:"), std::string::npos) << tier.err;
  EXPECT_NE(tier.err.find("tpu.pricing: v5litepod on-demand is not offered in europe-west4-b"), std::string::npos)
      << tier.err;
  EXPECT_EQ(jm({"create", spot_only.string()}).exit_code, 2) << "nothing recorded";
  EXPECT_EQ(jm({"list", "--all", "--json"}).out, "[]\n");
}

} // namespace examples_e2e_test
} // namespace jobman::test
