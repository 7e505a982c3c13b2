// A worker host's own filesystem: /mnt, /srv, /opt, /tmp and any top-level directory a job makes are the host's
// (kept across its ssh sessions, private from other hosts, wiped with it), this machine's system directories are
// read-only there, and nothing a job, the mock's gcsfuse or scp does on a host reaches this machine. Sessions are
// Debian's ssh and scp as root (who may write /mnt, as a TPU VM's user may with sudo); zephyr has an account too.
#include "jobman/util/system.hpp"
#include "support/host_ssh.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace worker_host_filesystem_test {

using jobman::test::eventually;
using jobman::test::MockCloudProcess;
using jobman::test::RunResult;
using nlohmann::json;
namespace fs = std::filesystem;

const std::string kZone = "us-central2-b";
const std::string kLoc = "projects/p/locations/" + kZone;
const httplib::Headers kAuth = {{"Authorization", "Bearer test-token"}};
const std::string kWorld = jobman::test::test_world(1, "  us-central2-b:\n    v4:\n      spot: {chips: 64}\n");

// True when something exists at `path` on this machine (a dangling link too).
bool exists_here(const fs::path& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type() != fs::file_type::not_found;
}

// A mock with a v4-32 slice "h" (node "h-node", four hosts) and ways to run commands on its hosts as zephyr.
class WorkerHostFilesystemTest : public ::testing::Test {
protected:
  void SetUp() override { start({}); }

  void start(const std::vector<std::string>& options) {
    server = jobman::test::start_test_mock(dir, kWorld, 1, options);
    ASSERT_GT(server->port(), 0) << server->first_line();
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    hosts = std::make_unique<jobman::test::MockHostSsh>(dir, *server, std::vector<std::string>{"root", "zephyr"});
    ASSERT_EQ(hosts->error(), "");
    const json body = {{"tpu",
                        {{"nodeSpec",
                          {{{"parent", kLoc},
                            {"nodeId", "h-node"},
                            {"node", {{"acceleratorType", "v4-32"}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
                       {"spot", json::object()}};
    // A restarted mock (same state) has the slice already.
    if (api("GET", "/v2/" + kLoc + "/queuedResources/h").status == 404) {
      ASSERT_EQ(api("POST", "/v2/" + kLoc + "/queuedResources?queuedResourceId=h", body).status, 200);
    }
    ASSERT_TRUE(
        eventually([&] { return api("GET", "/v2/" + kLoc + "/nodes/h-node").body.value("state", "") == "READY"; }));
  }

  // Whether this machine gives the hosts filesystems of their own (else the test is skipped).
  bool namespaced() { return worker(0).value("home_mode", "") == "namespace"; }

  jobman::test::HttpAnswer api(const std::string& method, const std::string& path, const json& body = nullptr) {
    return jobman::test::http_call(*client, method, path, body, kAuth);
  }

  // Worker `index` as the mock describes it to zephyr.
  json worker(int index) {
    return jobman::test::http_call(
               *client, "GET", "/mock/v1/" + kLoc + "/nodes/h-node/workers/" + std::to_string(index) + "?user=zephyr",
               nullptr, server->admin_headers())
        .body;
  }

  // One ssh session on host `index` as root, running `command`.
  RunResult ssh(int index, const std::string& command) {
    return hosts->ssh(kZone, "h-node", std::to_string(index), command, "root");
  }

  jobman::test::TempDir dir;
  // A name no other test or run uses (and not the test's own directory): this machine's /mnt/NAME, /tmp/NAME and the
  // like must never appear.
  std::string unique = dir.path().filename().string() + "-host";
  std::unique_ptr<MockCloudProcess> server;
  std::unique_ptr<httplib::Client> client;
  std::unique_ptr<jobman::test::MockHostSsh> hosts;
};

TEST_F(WorkerHostFilesystemTest, WhatAJobWritesOutsideItsHomeStaysOnItsHostAcrossSessionsAndGoesWithIt) {
  if (!namespaced()) {
    GTEST_SKIP() << "this machine gives worker hosts no namespaces: " << worker(0).value("home_mode_reason", "");
  }
  const std::vector<fs::path> paths = {"/mnt/" + unique, "/srv/" + unique,  "/opt/" + unique,
                                       "/tmp/" + unique, "/data/" + unique, "/" + unique + "-data"};
  const bool data_was_here = exists_here("/data");
  for (const auto& path : paths) {
    ASSERT_FALSE(exists_here(path)) << path << " exists on this machine before the test";
  }
  // The setup session: directories and files in /mnt, /srv, /opt and /tmp, and two new top-level directories.
  const auto setup =
      ssh(0, "mkdir -p /mnt/" + unique + " /srv/" + unique + " /opt/" + unique + " /tmp/" + unique + " /data/" +
                 unique + " /" + unique + "-data/x && echo mnt > /mnt/" + unique + "/f && echo srv > /srv/" + unique +
                 "/f && echo opt > /opt/" + unique + "/f && echo tmp > /tmp/" + unique + "/f && echo data > /data/" +
                 unique + "/f && echo top > /" + unique + "-data/x/f");
  ASSERT_EQ(setup.exit_code, 0) << setup.err;
  const std::string files = "/mnt/" + unique + "/f /srv/" + unique + "/f /opt/" + unique + "/f /tmp/" + unique +
                            "/f /data/" + unique + "/f /" + unique + "-data/x/f";
  // The workload, launched in another session as jobman launches it (setsid, nohup, its session ended at once).
  ASSERT_EQ(ssh(0, "setsid nohup bash -c 'cat " + files +
                       " > /home/zephyr/seen.part && mv /home/zephyr/seen.part /home/zephyr/seen; sleep 600' "
                       "> /dev/null 2>&1 < /dev/null &")
                .exit_code,
            0);
  const fs::path home = worker(0)["sandbox_home"].get<std::string>();
  ASSERT_TRUE(eventually([&] { return fs::exists(home / "seen"); }));
  EXPECT_EQ(jobman::util::read_file(home / "seen"), "mnt\nsrv\nopt\ntmp\ndata\ntop\n");
  // A third session sees them too, and they are on the host's disk, in its sandbox.
  const auto later = ssh(0, "cat " + files);
  EXPECT_EQ(later.out, "mnt\nsrv\nopt\ntmp\ndata\ntop\n") << later.err;
  const fs::path root = worker(0)["root"].get<std::string>();
  EXPECT_EQ(jobman::util::read_file(root / "mnt" / unique / "f"), "mnt\n");
  EXPECT_EQ(jobman::util::read_file(root / (unique + "-data") / "x" / "f"), "top\n");

  // This machine has none of them.
  for (const auto& path : paths) {
    EXPECT_FALSE(exists_here(path)) << path << " appeared on this machine";
  }
  EXPECT_EQ(exists_here("/data"), data_was_here);

  // A preemption wipes the host, its own / with it.
  ASSERT_EQ(jobman::test::http_call(*client, "POST", "/mock/v1/" + kLoc + "/nodes/h-node:preempt", json::object(),
                                    server->admin_headers())
                .status,
            200);
  EXPECT_TRUE(eventually([&] { return !fs::exists(root); })) << "the host's root is wiped with it";
  for (const auto& path : paths) {
    EXPECT_FALSE(exists_here(path)) << path << " appeared on this machine";
  }
}

TEST_F(WorkerHostFilesystemTest, TwoHostsHaveEachAMntOfTheirOwn) {
  if (!namespaced()) {
    GTEST_SKIP() << "this machine gives worker hosts no namespaces: " << worker(0).value("home_mode_reason", "");
  }
  const auto path = "/mnt/" + unique;
  ASSERT_FALSE(exists_here(path));
  ASSERT_EQ(ssh(0, "mkdir -p " + path + " && echo zero > " + path + "/f && echo zero > /tmp/" + unique).exit_code, 0);
  const auto one = ssh(1, "test -e " + path + " && echo seen || echo unseen; test -e /tmp/" + unique +
                              " && echo seen || echo unseen; mkdir -p " + path + " && echo one > " + path + "/f");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, "unseen\nunseen\n") << "host 1 does not see host 0's /mnt or /tmp";
  EXPECT_EQ(ssh(0, "cat " + path + "/f").out, "zero\n");
  EXPECT_EQ(ssh(1, "cat " + path + "/f").out, "one\n");
  EXPECT_FALSE(exists_here(path));
  EXPECT_FALSE(exists_here("/tmp/" + unique));
}

TEST_F(WorkerHostFilesystemTest, SystemDirectoriesAreReadOnlyAndThisMachinesOtherFilesAreNotThere) {
  if (!namespaced()) {
    GTEST_SKIP() << "this machine gives worker hosts no namespaces: " << worker(0).value("home_mode_reason", "");
  }
  for (const std::string system : {"/usr", "/etc", "/var"}) {
    const auto path = system + "/" + unique;
    const auto touched = ssh(0, "touch " + path);
    EXPECT_NE(touched.exit_code, 0) << system << " is writable on the host";
    EXPECT_NE(touched.err.find("Read-only file system"), std::string::npos) << touched.err;
    EXPECT_FALSE(exists_here(path));
  }
  // What the host runs is this machine's, read-only: its shell, tools and libraries work.
  const auto tools = ssh(0, "bash --version > /dev/null && python3 -c 'print(6 * 7)' && ls /usr/bin > /dev/null");
  EXPECT_EQ(tools.exit_code, 0) << tools.err;
  EXPECT_EQ(tools.out, "42\n");
  // This machine's /tmp is not the host's: a file beside the test's directory is not there. The test's directory is
  // (start_test_mock makes it --visible-to-hosts), read-only; the mock's buckets are writable through the host's own
  // root of them (metered), and land in the buckets' directory.
  const auto here = dir.path().string() + "-here";
  jobman::util::write_file_atomic(here, "this machine's\n", 0600);
  const auto listed = ssh(0, "test -e " + here + " && echo seen || echo unseen; cat " + (dir / "world.yaml").string() +
                                 " > /dev/null && echo visible; touch " + (dir / unique).string() +
                                 " 2> /dev/null || echo read-only; "
                                 "touch \"$MOCK_GCS_ROOT\"/" +
                                 unique + " && echo writable");
  fs::remove(here);
  EXPECT_EQ(listed.out, "unseen\nvisible\nread-only\nwritable\n") << listed.err;
  EXPECT_TRUE(exists_here(dir / "state" / "buckets" / unique));
  EXPECT_FALSE(exists_here(dir / unique));
  // The mock's tools are there to run, not to change.
  const auto tools_dir = fs::path(jobman::test::mock_cloud_binary()).parent_path() / "tools";
  const auto changed = ssh(0, "touch " + (tools_dir / unique).string());
  EXPECT_NE(changed.exit_code, 0);
  EXPECT_FALSE(exists_here(tools_dir / unique));
}

TEST_F(WorkerHostFilesystemTest, GcsfuseMountsABucketAtMntBucketOnEachHostForItsLaterSessions) {
  if (!namespaced()) {
    GTEST_SKIP() << "this machine gives worker hosts no namespaces: " << worker(0).value("home_mode_reason", "");
  }
  ASSERT_FALSE(exists_here("/mnt/bucket")) << "this machine has a /mnt/bucket (left by an earlier mock?)";
  // The setup sessions of two hosts mount the same bucket at the same path, as a sweep's jobs do.
  for (int w : {0, 1}) {
    const auto mounted = ssh(w, "mkdir -p /mnt/bucket && gcsfuse --implicit-dirs demo /mnt/bucket");
    ASSERT_EQ(mounted.exit_code, 0) << "worker " << w << ": " << mounted.err;
  }
  // Later sessions find it mounted and write through it.
  for (int w : {0, 1}) {
    const auto written =
        ssh(w, "mountpoint -q /mnt/bucket && echo " + std::to_string(w) + " > /mnt/bucket/from-" + std::to_string(w));
    EXPECT_EQ(written.exit_code, 0) << "worker " << w << ": " << written.err;
  }
  EXPECT_EQ(jobman::util::read_file(dir / "state" / "buckets" / "demo" / "from-0"), "0\n");
  EXPECT_EQ(jobman::util::read_file(dir / "state" / "buckets" / "demo" / "from-1"), "1\n");
  EXPECT_EQ(ssh(2, "mountpoint -q /mnt/bucket").exit_code, 32) << "a host that mounted nothing has no mount";
  EXPECT_EQ(ssh(0, "fusermount -u /mnt/bucket && ! mountpoint -q /mnt/bucket && test -d /mnt/bucket").exit_code, 0);
  EXPECT_EQ(ssh(1, "mountpoint -q /mnt/bucket").exit_code, 0) << "host 1's mount is its own";
  EXPECT_FALSE(exists_here("/mnt/bucket"));
}

TEST_F(WorkerHostFilesystemTest, ScpReadsAndWritesTheHostsOwnPathsNeverThisMachines) {
  if (!namespaced()) {
    GTEST_SKIP() << "this machine gives worker hosts no namespaces: " << worker(0).value("home_mode_reason", "");
  }
  const auto path = "/mnt/" + unique;
  ASSERT_FALSE(exists_here(path));
  ASSERT_EQ(ssh(1, "mkdir -p " + path + " && echo from-host > " + path + "/b.txt").exit_code, 0);
  dir.write("upload/a.txt", "alpha\n");
  const auto scp_to = [&](const std::string& from, const std::string& to, bool recursive = false) {
    return hosts->scp_to(kZone, "h-node", "1", {from}, to, "root", recursive);
  };
  auto sent = scp_to((dir / "upload" / "a.txt").string(), path + "/a.txt");
  ASSERT_EQ(sent.exit_code, 0) << sent.err;
  EXPECT_EQ(ssh(1, "cat " + path + "/a.txt").out, "alpha\n");
  auto tree = scp_to((dir / "upload").string(), path, true);
  ASSERT_EQ(tree.exit_code, 0) << tree.err;
  EXPECT_EQ(ssh(1, "cat " + path + "/upload/a.txt").out, "alpha\n");
  auto back = hosts->scp_from(kZone, "h-node", 1, path + "/b.txt", (dir / "b.txt").string(), "root");
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(jobman::util::read_file(dir / "b.txt"), "from-host\n");
  // A path the host cannot write is refused there, and a source it lacks is missing.
  auto system = scp_to((dir / "upload" / "a.txt").string(), "/usr/" + unique);
  EXPECT_EQ(system.exit_code, 1);
  EXPECT_NE(system.err.find("dest open \"/usr/" + unique + "\""), std::string::npos) << system.err;
  auto missing = hosts->scp_from(kZone, "h-node", 1, "/srv/" + unique, (dir / "m").string(), "root");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("No such file or directory"), std::string::npos) << missing.err;
  EXPECT_FALSE(exists_here(path));
  EXPECT_FALSE(exists_here("/usr/" + unique));
  EXPECT_EQ(ssh(0, "test -e " + path + " && echo seen || echo unseen").out, "unseen\n") << "host 0 got none of it";
}

} // namespace worker_host_filesystem_test
