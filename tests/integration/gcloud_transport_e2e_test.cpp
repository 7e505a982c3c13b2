// transport: gcloud end to end: the real jobman and daemon against a private mock cloud whose hosts run Debian's sshd,
// reached through Google's own gcloud (/usr/bin/gcloud, as installed), logged in with the mock's service-account key
// in a configuration directory of jobman's. gcloud adds its key to the node's metadata itself, jobman gives it the
// hosts' keys from their guest attributes so that it checks them strictly, and `jobman ssh` runs a command and a shell
// on the chosen worker.
#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <filesystem>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <regex>

namespace jobman::test {
namespace gcloud_transport_e2e_test {

namespace fs = std::filesystem;
using domain::Phase;

constexpr const char* kGcloud = "/usr/bin/gcloud";
// A port nothing listens on: every proxy variable points there, so that an HTTP request gcloud might make to any
// address but the mock's fails at once instead of leaving this machine.
constexpr const char* kClosedProxy = "http://127.0.0.1:9";

const std::string kWorld = test_world(1, "  us-central2-b:\n    v4:\n      spot: {chips: 64}\n");

class GcloudTransportTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!fs::exists(kGcloud)) {
      GTEST_SKIP() << "Google's gcloud is not installed at " << kGcloud << " (the Cloud SDK, package google-cloud-cli)";
    }
    if (!fs::exists("/usr/sbin/sshd") || !fs::exists("/usr/bin/ssh")) {
      GTEST_SKIP() << "OpenSSH's server and client are needed (scripts/test installs openssh-server)";
    }
    ASSERT_GT(mock->port(), 0) << mock->first_line();
    env = mock_home_environment(*mock, dir / "jobman", dir / "config");
    // gcloud's own files (its key, its known hosts) go to a HOME of the test's; its configuration to jobman's.
    env["HOME"] = (dir / "user-home").string();
    env["JOBMAN_TRANSPORT"] = "gcloud";
    env["JOBMAN_GCLOUD"] = kGcloud;
    env["JOBMAN_MOCK_SERVICE_ACCOUNT_KEY"] = key_file().string();
    env["SSH_AUTH_SOCK"] = "";
    for (const char* name : {"CLOUDSDK_CONFIG", "CLOUDSDK_CORE_PROJECT", "CLOUDSDK_CORE_ACCOUNT",
                             "GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE"}) {
      env[name] = "";
    }
    for (const char* name : {"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"}) {
      env[name] = kClosedProxy;
    }
    env["NO_PROXY"] = "127.0.0.1";
    env["no_proxy"] = "127.0.0.1";
    daemon = std::make_unique<LineReadingProcess>(
        std::vector<std::string>{jobman_binary(), "daemon", "--tick", "50ms", "--lease-ttl", "2s"}, env,
        dir / "daemon.log");
  }

  void TearDown() override {
    daemon.reset();
    kill_processes_of(dir / "jobman");
  }

  RunResult jm(const std::vector<std::string>& args, const std::string& input = "") const {
    return run_jobman(args, RunOptions{env, input, ""});
  }

  [[nodiscard]] domain::JobRecord job(std::int64_t id) const {
    return store::JobStore::open(dir / "jobman" / "jobman.db").jobs().get(id);
  }

  [[nodiscard]] fs::path attempt_dir(std::int64_t id, int attempt) const {
    return dir / "jobman" / "jobs" / domain::format_job_id(id) / ("attempt-" + std::to_string(attempt));
  }

  [[nodiscard]] fs::path key_file() const { return dir / "mock-key.json"; }

  TempDir dir;
  std::unique_ptr<MockCloudProcess> mock =
      start_test_mock(dir, kWorld, 1, {"--write-service-account-key", (dir / "mock-key.json").string()});
  std::map<std::string, std::string> env;
  std::unique_ptr<LineReadingProcess> daemon;
};

TEST_F(GcloudTransportTest, AJobRunsOnEveryHostThroughGcloudWithTheHostsKeysChecked) {
  const auto config =
      dir.write("job.yaml", "job:\n  name: over-gcloud\ntpu:\n  accelerator: v4-16\n"
                            "  zone: us-central2-b\n  pricing: spot\nsetup:\n"
                            "  script: echo set up on $(hostname)\n"
                            "command:\n  cmd: echo \"ran on $(hostname) as worker $JOBMAN_WORKER_ID\"\n");
  const auto created = jm({"create", config.string(), "--wait"});
  ASSERT_EQ(created.exit_code, 0) << created.out << created.err << file_text(dir / "daemon.log");
  EXPECT_EQ(job(1).phase, Phase::succeeded);
  // Each host answered as itself, and its output came home.
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
  // gcloud connected with jobman's key (there is no ~/.ssh/google_compute_engine to prefer), made once before the
  // workers' gcloud processes started, and checked the hosts against the keys their guest attributes publish, filed
  // where it looks for them under its own aliases (tpu.ID-WORKER-last six characters of the key): OpenSSH, told to
  // check strictly, added none of its own.
  EXPECT_TRUE(fs::exists(dir / "jobman" / "ssh" / "id_ed25519"));
  EXPECT_FALSE(fs::exists(dir / "user-home" / ".ssh" / "google_compute_engine"));
  const auto published = util::split(file_text(attempt_dir(1, 1) / "known_hosts"), '\n');
  const auto gcloud_known = file_text(dir / "user-home" / ".ssh" / "google_compute_known_hosts");
  ASSERT_GE(published.size(), 2U);
  for (int w = 0; w < 2; ++w) {
    const auto& line = published[static_cast<std::size_t>(w)];
    const auto space = line.find(' ');
    ASSERT_NE(space, std::string::npos) << line;
    const auto key = line.substr(space + 1);
    const auto alias = line.substr(0, space) + "-" + key.substr(key.size() - 6);
    EXPECT_NE(gcloud_known.find(alias + " " + key + "\n"), std::string::npos) << alias << "\n" << gcloud_known;
  }
  EXPECT_EQ(std::count(gcloud_known.begin(), gcloud_known.end(), '\n'), 2) << gcloud_known;
  // gcloud logged in once, in jobman's configuration directory for it, with the key's path: its secret is in no log.
  const auto gcloud_config = dir / "jobman" / "mock" / "gcloud";
  const auto key = nlohmann::json::parse(file_text(key_file()));
  EXPECT_EQ(file_text(gcloud_config / "jobman-activated-key"), key["private_key_id"].get<std::string>() + "\n");
  const auto secret = key["private_key"].get<std::string>().substr(40, 64);
  for (const auto& log : {dir / "daemon.log", gcloud_config / "jobman-activate.log"}) {
    EXPECT_EQ(file_text(log).find(secret), std::string::npos) << log;
  }
}

TEST_F(GcloudTransportTest, JobmanSshRunsACommandAndAShellOnTheChosenWorkerThroughGcloud) {
  const auto config = dir.write("job.yaml", "job:\n  name: long\ntpu:\n  accelerator: v4-16\n"
                                            "  zone: us-central2-b\n  pricing: spot\n"
                                            "command:\n  cmd: echo \"up on $(hostname)\"; exec sleep 600\n");
  ASSERT_EQ(jm({"create", config.string()}).exit_code, 0);
  ASSERT_TRUE(eventually([&] { return job(1).phase == Phase::running; }, std::chrono::seconds(120)))
      << file_text(dir / "daemon.log");
  ASSERT_TRUE(eventually(
      [&] { return file_text(attempt_dir(1, 1) / "worker-1.log").find("up on t1v-n-") != std::string::npos; },
      std::chrono::seconds(60)))
      << file_text(dir / "daemon.log");

  const auto command = jm({"ssh", "1", "--worker", "1", "--", "hostname"});
  EXPECT_EQ(command.exit_code, 0) << command.err;
  EXPECT_TRUE(std::regex_match(command.out, std::regex("t1v-n-[0-9a-f]{8}-w-1\n"))) << command.out << command.err;
  // No command: gcloud's interactive shell, here reading its commands from a pipe.
  const auto shell = jm({"ssh", "1", "--worker", "0"}, "echo \"shell on $(hostname) in $PWD\"\nexit 3\n");
  EXPECT_EQ(shell.exit_code, 3) << shell.out << shell.err;
  EXPECT_TRUE(std::regex_search(shell.out, std::regex("shell on t1v-n-[0-9a-f]{8}-w-0 in /home/[a-z_][a-z0-9_-]*\n")))
      << shell.out << shell.err;
  EXPECT_EQ(jm({"cancel", "1"}).exit_code, 0);
}

} // namespace gcloud_transport_e2e_test
} // namespace jobman::test
