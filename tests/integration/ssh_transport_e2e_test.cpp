// transport: ssh end to end: the real jobman and daemon against a private mock cloud whose hosts run Debian's sshd,
// reached with OpenSSH's own ssh and scp. The key goes with the create request, the hosts' keys come from their
// guest attributes, setup, launch and the log stream share one connection per host, a preempted slice is replaced
// and reached again, and `jobman ssh` runs a command on the chosen worker.
#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <filesystem>
#include <gtest/gtest.h>
#include <regex>
#include <set>

namespace jobman::test {
namespace ssh_transport_e2e_test {

namespace fs = std::filesystem;
using domain::Phase;

const std::string kWorld = test_world(1, "  us-central2-b:\n    v4:\n      spot: {chips: 64}\n");

class SshTransportTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!fs::exists("/usr/sbin/sshd") || !fs::exists("/usr/bin/ssh")) {
      GTEST_SKIP() << "OpenSSH's server and client are needed (scripts/test installs openssh-server)";
    }
    ASSERT_GT(mock->port(), 0) << mock->first_line();
    env = mock_home_environment(*mock, dir / "jobman", dir / "config");
    env["HOME"] = (dir / "user-home").string(); // No ~/.ssh/google_compute_engine: jobman makes its own key.
    env["JOBMAN_TRANSPORT"] = "ssh";
    daemon = std::make_unique<LineReadingProcess>(
        std::vector<std::string>{jobman_binary(), "daemon", "--tick", "50ms", "--lease-ttl", "2s"}, env,
        dir / "daemon.log");
  }

  void TearDown() override {
    daemon.reset();
    kill_processes_of(dir / "jobman");
  }

  RunResult jm(const std::vector<std::string>& args) const { return run_jobman(args, RunOptions{env, "", ""}); }

  [[nodiscard]] domain::JobRecord job(std::int64_t id) const {
    return store::JobStore::open(dir / "jobman" / "jobman.db").jobs().get(id);
  }

  [[nodiscard]] fs::path attempt_dir(std::int64_t id, int attempt) const {
    return dir / "jobman" / "jobs" / domain::format_job_id(id) / ("attempt-" + std::to_string(attempt));
  }

  TempDir dir;
  std::unique_ptr<MockCloudProcess> mock = start_test_mock(dir, kWorld);
  std::map<std::string, std::string> env;
  std::unique_ptr<LineReadingProcess> daemon;
};

TEST_F(SshTransportTest, AJobRunsOnEveryHostOverOpenSshWithTheHostsKeysChecked) {
  const auto config =
      dir.write("job.yaml", "job:\n  name: over-ssh\ntpu:\n  accelerator: v4-16\n"
                            "  zone: us-central2-b\n  pricing: spot\nsetup:\n"
                            "  script: echo set up on $(hostname)\n"
                            "command:\n  cmd: echo \"ran on $(hostname) as worker $JOBMAN_WORKER_ID\"\n");
  const auto created = jm({"create", config.string(), "--wait"});
  ASSERT_EQ(created.exit_code, 0) << created.out << created.err << file_text(dir / "daemon.log");
  EXPECT_EQ(job(1).phase, Phase::succeeded);
  // Each host answered as itself: only a host's own sshd runs under its hostname.
  const std::regex ran("ran on t1v-n-[0-9a-f]{8}-w-([01]) as worker ([01])\n");
  for (int w = 0; w < 2; ++w) {
    const auto log = file_text(attempt_dir(1, 1) / ("worker-" + std::to_string(w) + ".log"));
    std::smatch match;
    ASSERT_TRUE(std::regex_search(log, match, ran)) << log;
    EXPECT_EQ(match[1].str(), std::to_string(w));
    EXPECT_EQ(match[2].str(), std::to_string(w));
    EXPECT_NE(file_text(attempt_dir(1, 1) / ("setup-" + std::to_string(w) + ".log")).find("set up on t1v-n-"),
              std::string::npos);
  }
  // The hosts' keys, from their guest attributes, under their aliases; jobman's own key, made for it.
  const auto known = util::split(file_text(attempt_dir(1, 1) / "known_hosts"), '\n');
  ASSERT_GE(known.size(), 2U);
  for (int w = 0; w < 2; ++w) {
    EXPECT_TRUE(std::regex_match(known[static_cast<std::size_t>(w)],
                                 std::regex("tpu\\.[0-9]+-" + std::to_string(w) + " ssh-ed25519 [A-Za-z0-9+/=]+")))
        << known[static_cast<std::size_t>(w)];
  }
  EXPECT_TRUE(fs::exists(dir / "jobman" / "ssh" / "id_ed25519"));
}

TEST_F(SshTransportTest, APreemptedSliceIsReplacedAndReachedAgainAndJobmanSshRunsOnTheChosenWorker) {
  const auto config = dir.write("job.yaml", "job:\n  name: long\ntpu:\n  accelerator: v4-16\n"
                                            "  zone: us-central2-b\n  pricing: spot\n"
                                            "command:\n  cmd: echo \"up on $(hostname)\"; exec sleep 600\n");
  ASSERT_EQ(jm({"create", config.string()}).exit_code, 0);
  ASSERT_TRUE(eventually([&] { return job(1).phase == Phase::running; }, std::chrono::seconds(60)))
      << file_text(dir / "daemon.log");
  httplib::Client admin("127.0.0.1", mock->port());
  const auto preempted =
      http_call(admin, "POST", "/mock/v1/projects/jobman-mock/locations/us-central2-b/nodes/long-000001-a1:preempt",
                nlohmann::json::object(), mock->admin_headers());
  ASSERT_EQ(preempted.status, 200) << preempted.text;
  ASSERT_TRUE(
      eventually([&] { return job(1).attempt == 2 && job(1).phase == Phase::running; }, std::chrono::seconds(60)))
      << file_text(dir / "daemon.log");
  ASSERT_TRUE(eventually(
      [&] { return file_text(attempt_dir(1, 2) / "worker-1.log").find("up on t1v-n-") != std::string::npos; }));

  const auto shell = jm({"ssh", "1", "--worker", "1", "--", "hostname"});
  EXPECT_EQ(shell.exit_code, 0) << shell.err;
  EXPECT_TRUE(std::regex_match(shell.out, std::regex("t1v-n-[0-9a-f]{8}-w-1\n"))) << shell.out;
  // The new slice's hosts have keys of their own, and attempt 2 checks against those.
  EXPECT_NE(file_text(attempt_dir(1, 1) / "known_hosts"), file_text(attempt_dir(1, 2) / "known_hosts"));
  EXPECT_EQ(jm({"cancel", "1"}).exit_code, 0);
}

TEST_F(SshTransportTest, WithOsLoginOnJobmanRegistersItsKeyAndRunsAsTheAccountOsLoginGives) {
  // The project turns OS Login on: the hosts let in only the keys OS Login holds, each as its account's POSIX user.
  httplib::Client api("127.0.0.1", mock->port());
  const httplib::Headers auth = {{"Authorization", "Bearer test-token"}};
  const auto project = http_call(api, "GET", "/compute/v1/projects/jobman-mock", nullptr, auth);
  ASSERT_EQ(project.status, 200) << project.text;
  const auto set =
      http_call(api, "POST", "/compute/v1/projects/jobman-mock/setCommonInstanceMetadata",
                nlohmann::json{{"fingerprint", project.body["commonInstanceMetadata"].value("fingerprint", "")},
                               {"items", {{{"key", "enable-oslogin"}, {"value", "TRUE"}}}}},
                auth);
  ASSERT_EQ(set.status, 200) << set.text;
  const auto config = dir.write("job.yaml", "job:\n  name: login\ntpu:\n  accelerator: v4-16\n"
                                            "  zone: us-central2-b\n  pricing: spot\n"
                                            "command:\n  cmd: echo \"as $(id -un) in $HOME\"; exec sleep 600\n");
  ASSERT_EQ(jm({"create", config.string()}).exit_code, 0);
  const std::regex as("as (sa_[0-9]+) in /home/(sa_[0-9]+)\n");
  std::smatch match;
  std::string log;
  ASSERT_TRUE(eventually(
      [&] {
        log = file_text(attempt_dir(1, 1) / "worker-1.log");
        return std::regex_search(log, match, as);
      },
      std::chrono::seconds(60)))
      << log << file_text(dir / "daemon.log");
  const auto user = match[1].str();
  EXPECT_EQ(match[2].str(), user);
  // The account OS Login named is kept with the hosts, and `jobman ssh` goes in as it too.
  EXPECT_NE(file_text(attempt_dir(1, 1) / "hosts.json").find("\"user\": \"" + user + "\""), std::string::npos);
  const auto shell = jm({"ssh", "1", "--worker", "0", "--", "id -un"});
  EXPECT_EQ(shell.exit_code, 0) << shell.err;
  EXPECT_EQ(shell.out, user + "\n");
  EXPECT_EQ(jm({"cancel", "1"}).exit_code, 0);
}

} // namespace ssh_transport_e2e_test
} // namespace jobman::test
