// The mock's worker hosts through the real jobman: configs/examples/sweep-v6e.yaml (shortened to 40 steps), whose
// gcsfuse bucket is mounted at /mnt/bucket, runs its three jobs at once, each on a host with a /mnt of its own, all to
// SUCCEEDED, and this machine gets no /mnt/bucket. And the bundled mock jobman starts by itself is told to exit once
// unused.
#include "jobman/store/jobs.hpp"
#include "support/supervisor_home.hpp"

#include <algorithm>
#include <fstream>
#include <gtest/gtest.h>

namespace jobman::test {
namespace mock_host_filesystem_e2e_test {

namespace fs = std::filesystem;

// True when something exists at `path` on this machine (a dangling link too).
bool exists_here(const fs::path& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type() != fs::file_type::not_found;
}

// A jobman home on a mock with room for the sweep's three v6e-8 slices in us-east1-d.
class MockHostFilesystemE2eTest : public SupervisorHome {
protected:
  MockHostFilesystemE2eTest() : SupervisorHome("  us-east1-d:\n    v6e:\n      spot: {chips: 64}\n") {}

  // Whether this machine can give the mock's hosts filesystems of their own (the mock's own probe says).
  static bool hosts_have_filesystems() {
    const auto login = fs::path(mock_cloud_binary()).parent_path() / "tools" / "jobman-mock-host-login";
    return run_program({login.string(), "--probe"}).exit_code == 0;
  }
};

TEST_F(MockHostFilesystemE2eTest, TheSweepWithItsBucketAtMntBucketSucceedsEverywhereAndLeavesThisMachineAlone) {
  if (!hosts_have_filesystems()) {
    GTEST_SKIP() << "this machine gives the mock's hosts no filesystems of their own";
  }
  ASSERT_FALSE(exists_here("/mnt/bucket")) << "this machine has a /mnt/bucket already (left by an earlier mock?)";
  // The example as it is, but for 40 training steps instead of 1,000 (checkpoints every 100 steps become every 20).
  auto text = file_text(fs::path(JOBMAN_SOURCE_DIR) / "configs" / "examples" / "sweep-v6e.yaml");
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"--steps 1000", "--steps 40"},
                                 std::pair<std::string, std::string>{"--ckpt-every 100", "--ckpt-every 20"}}) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << "configs/examples/sweep-v6e.yaml no longer says " << from;
    text.replace(at, from.size(), to);
  }
  ASSERT_NE(text.find("mount_path: /mnt/bucket"), std::string::npos);
  const auto config = dir.write("sweep-v6e.yaml", text);
  start_daemon();
  const auto created = jm({"create", config.string()});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const auto jobs = db().jobs().list({});
  ASSERT_EQ(jobs.size(), 3U) << created.out;
  std::vector<std::string> wait = {"wait"};
  for (const auto& job : jobs) {
    wait.push_back(std::to_string(job.id));
  }
  wait.insert(wait.end(), {"--timeout", "240"});
  const auto waited = jm(wait);
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err;
  // Each job's checkpoints went through its host's /mnt/bucket into the bucket: /mnt/bucket/ckpt/${job.name}, the
  // member's name with its id.
  std::vector<std::string> written;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir / "state" / "buckets" / "jobman-demo" / "ckpt", ec)) {
    if (entry.is_directory() && !fs::is_empty(entry.path())) {
      written.push_back(entry.path().filename().string());
    }
  }
  EXPECT_EQ(written.size(), jobs.size());
  for (const auto& job : jobs) {
    const auto ended = this->job(job.id);
    EXPECT_EQ(ended.phase, domain::Phase::succeeded) << ended.name << ": " << ended.phase_reason;
    EXPECT_EQ(ended.attempt, 1) << ended.name << ": " << ended.phase_reason;
    EXPECT_EQ(std::count_if(written.begin(), written.end(),
                            [&](const std::string& name) { return name.starts_with(ended.name + "-"); }),
              1)
        << ended.name << " has no checkpoints in the bucket";
  }
  EXPECT_FALSE(exists_here("/mnt/bucket")) << "a job's mount reached this machine";
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

TEST_F(MockHostFilesystemE2eTest, TheBundledMockIsStartedWithTheSupervisorsIdleExit) {
  env.erase("JOBMAN_API_ENDPOINT");
  env.erase("JOBMAN_MOCK_ADMIN_TOKEN_FILE");
  // sync asks the cloud (the bundled mock, started for it) and starts no supervisor; TearDown ends the mock.
  const auto synced = jm({"sync"});
  ASSERT_EQ(synced.exit_code, 0) << synced.err;
  ASSERT_NE(synced.err.find("bundled mock cloud"), std::string::npos) << synced.err;
  const auto record = nlohmann::json::parse(file_text(home / "mock" / "server.json"), nullptr, false);
  ASSERT_TRUE(record.is_object() && record.contains("pid")) << file_text(home / "mock" / "server.json");
  std::ifstream cmdline("/proc/" + std::to_string(record["pid"].get<long>()) + "/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string arg;
  while (std::getline(cmdline, arg, '\0')) {
    args.push_back(arg);
  }
  const auto option = std::find(args.begin(), args.end(), "--idle-exit");
  ASSERT_NE(option, args.end()) << "the bundled mock runs without --idle-exit";
  ASSERT_NE(option + 1, args.end());
  EXPECT_EQ(*(option + 1), "600");
}

} // namespace mock_host_filesystem_e2e_test
} // namespace jobman::test
