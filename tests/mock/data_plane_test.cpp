// The mock cloud's data plane, end to end, reached with Debian's ssh and scp: worker hosts per accelerator, exit codes,
// live output, processes ended and disks wiped on preemption and delete, buckets kept, gcsfuse.
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/worker_hosts.hpp"
#include "mock_cloud/world.hpp"
#include "support/host_ssh.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <poll.h>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace data_plane_test {

using jobman::test::eventually;
using jobman::test::MockCloudProcess;
using jobman::test::RunResult;
using nlohmann::json;
namespace fs = std::filesystem;

const std::string kZone = "us-central2-b";
const std::string kLoc = "projects/p/locations/" + kZone;
const httplib::Headers kAuth = {{"Authorization", "Bearer test-token"}};

// Room for every accelerator the tests use, one-second delays (1 ms at --time-scale 1000), no random events.
const std::string kWorld = jobman::test::test_world(1, R"(  us-central2-b:
    v4:
      spot: {chips: 64}
    v5litepod:
      spot: {chips: 64}
    v6e:
      spot: {chips: 256}
dcn: {latency: 2ms, bandwidth: 25Gbps}
)");

// The mock's tools directory (systolic-train is there).
fs::path tools_dir() {
  return fs::path(jobman::test::mock_cloud_binary()).parent_path() / "tools";
}

// The pids sessions started on the slice or host `prefix` names, from the process table (the hosts' sshd aside).
std::vector<pid_t> processes_marked(const std::string& prefix) {
  return jobman::mock::find_marked_processes(prefix, jobman::mock::Marked::workload);
}

using StreamingProcess = jobman::test::LineReadingProcess;

class MockDataPlaneTest : public ::testing::Test {
protected:
  jobman::test::TempDir dir;
  std::unique_ptr<MockCloudProcess> server;
  std::unique_ptr<httplib::Client> client;
  // A key of the test's own, authorized for root, zephyr and alice on every host of project p.
  std::unique_ptr<jobman::test::MockHostSsh> hosts;

  void SetUp() override { start(); }

  void start(const std::vector<std::string>& options = {}) {
    server = jobman::test::start_test_mock(dir, kWorld, 1, options);
    ASSERT_GT(server->port(), 0) << server->first_line();
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    hosts =
        std::make_unique<jobman::test::MockHostSsh>(dir, *server, std::vector<std::string>{"root", "zephyr", "alice"});
    ASSERT_EQ(hosts->error(), "");
  }

  // `ssh` as `user` to the workers `selection` names ("all", "2", "1,3", "1-3") of `node`, running `command`.
  RunResult ssh(const std::string& node, const std::string& selection, const std::string& command,
                const std::string& user = "root") {
    return hosts->ssh(kZone, node, selection, command, user);
  }

  // The argv of ssh running `command` on one worker of `node` as `user`, for a test that reads its output live.
  std::vector<std::string> ssh_argv(const std::string& node, int worker, const std::string& command,
                                    const std::string& user = "root") {
    const auto target = hosts->target(kZone, node, user);
    EXPECT_TRUE(target) << node << " is not up";
    return target ? jobman::remote::ssh_argv(*target, worker, command) : std::vector<std::string>{"false"};
  }

  jobman::test::HttpAnswer api(const std::string& method, const std::string& path, const json& body = nullptr,
                               const httplib::Headers& headers = kAuth) {
    return jobman::test::http_call(*client, method, path, body, headers);
  }

  // Creates a spot queued resource `id` with node `id`-node and waits until it is ACTIVE.
  void create_active(const std::string& id, const std::string& accelerator) {
    json body = {{"tpu",
                  {{"nodeSpec",
                    {{{"parent", kLoc},
                      {"nodeId", id + "-node"},
                      {"node", {{"acceleratorType", accelerator}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
                 {"spot", json::object()}};
    auto created = api("POST", "/v2/" + kLoc + "/queuedResources?queuedResourceId=" + id, body);
    ASSERT_EQ(created.status, 200) << created.text;
    ASSERT_TRUE(eventually([&] {
      auto qr = api("GET", "/v2/" + kLoc + "/queuedResources/" + id);
      return qr.status == 200 && qr.body["state"]["state"] == "ACTIVE";
    }));
  }

  // The worker host as the mock describes it.
  // The worker host as the mock describes it to `user` (its home is /home/USER); the mock's default user without one.
  json worker(const std::string& node, int index, const std::string& user = "") {
    return api("GET",
               "/mock/v1/" + kLoc + "/nodes/" + node + "/workers/" + std::to_string(index) +
                   (user.empty() ? "" : "?user=" + user),
               nullptr, server->admin_headers())
        .body;
  }

  void preempt(const std::string& node) {
    ASSERT_EQ(
        api("POST", "/mock/v1/" + kLoc + "/nodes/" + node + ":preempt", json::object(), server->admin_headers()).status,
        200);
  }
};

TEST_F(MockDataPlaneTest, EachAcceleratorHasOneHostPerEndpoint) {
  const std::vector<std::pair<std::string, int>> cases = {
      {"v4-8", 1}, {"v4-32", 4}, {"v5litepod-16", 4}, {"v6e-256", 64}};
  for (const auto& [accelerator, count] : cases) {
    std::string id = accelerator;
    std::replace(id.begin(), id.end(), '-', 'x');
    create_active(id, accelerator);
    auto node = api("GET", "/v2/" + kLoc + "/nodes/" + id + "-node");
    EXPECT_EQ(node.body["networkEndpoints"].size(), static_cast<std::size_t>(count)) << accelerator;
    auto result = ssh(id + "-node", "all", "echo host-$MOCK_TPU_HOST");
    EXPECT_EQ(result.exit_code, 0) << result.err;
    std::set<std::string> seen;
    std::istringstream lines(result.out);
    for (std::string line; std::getline(lines, line);) {
      seen.insert(line);
    }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(count)) << accelerator << ": " << result.out;
    EXPECT_EQ(worker(id + "-node", count - 1).value("worker", -1), count - 1);
    EXPECT_TRUE(worker(id + "-node", count).contains("error")) << accelerator;
  }
}

TEST_F(MockDataPlaneTest, SshFormsSelectWorkersAndReturnTheCommandsExitCode) {
  create_active("s", "v4-32");
  auto one = ssh("s-node", "2", "echo $MOCK_TPU_HOST; pwd; hostname");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("/2\n"), std::string::npos) << one.out;
  // A session starts in the user's home, on a host named as Google names a TPU VM's workers.
  EXPECT_NE(one.out.find("\n" + worker("s-node", 2, "root")["home"].get<std::string>() + "\n"), std::string::npos)
      << one.out;
  EXPECT_NE(one.out.find("t1v-n-"), std::string::npos) << one.out;
  EXPECT_EQ(one.out.substr(one.out.size() - 5), "-w-2\n") << one.out;

  auto list = ssh("s-node", "1,3", "echo w${MOCK_TPU_HOST##*/}");
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_NE(list.out.find("w1\n"), std::string::npos);
  EXPECT_NE(list.out.find("w3\n"), std::string::npos);
  EXPECT_EQ(list.out.find("w2\n"), std::string::npos);
  auto range = ssh("s-node", "1-3", "echo w${MOCK_TPU_HOST##*/}");
  EXPECT_EQ(std::count(range.out.begin(), range.out.end(), '\n'), 3) << range.out;

  // Another user whose key the metadata holds has an account and a home of their own.
  auto alice = ssh("s-node", "0", "echo $USER $HOME; id -un", "alice");
  ASSERT_EQ(alice.exit_code, 0) << alice.err;
  EXPECT_EQ(alice.out, "alice /home/alice\nalice\n");

  // The command's own status comes back; on several workers, the first failure.
  EXPECT_EQ(ssh("s-node", "0", "exit 7").exit_code, 7);
  EXPECT_EQ(ssh("s-node", "all", "exit $(( ${MOCK_TPU_HOST##*/} == 2 ? 5 : 0 ))").exit_code, 5);
  // Quoting survives: the command reaches bash as one argument.
  auto quoted = ssh("s-node", "0", "printf '%s|' \"a b\" '$HOME' \"$(echo x)\"");
  EXPECT_EQ(quoted.out, "a b|$HOME|x|");
  // Standard input reaches a single worker.
  jobman::test::RunOptions with_input;
  with_input.input = "from stdin\n";
  auto piped = jobman::test::run_program(ssh_argv("s-node", 0, "cat"), with_input);
  EXPECT_EQ(piped.out, "from stdin\n");
}

TEST_F(MockDataPlaneTest, AKeyNotInTheMetadataIsRefusedAndALostHostRefusesConnections) {
  create_active("u", "v4-8");
  auto target = hosts->target(kZone, "u-node", "root");
  ASSERT_TRUE(target);
  // bob has no key in the metadata, so no account: ssh is refused before any command runs.
  auto bob = *target;
  bob.user = "bob";
  bob.control_dir.clear();
  const auto refused = jobman::test::run_program(jobman::remote::ssh_argv(bob, 0, "true"));
  EXPECT_EQ(refused.exit_code, 255);
  EXPECT_NE(refused.err.find("Permission denied"), std::string::npos) << refused.err;
  // A preempted host's address takes no connection: ssh's 255.
  ASSERT_EQ(ssh("u-node", "0", "true").exit_code, 0);
  preempt("u-node");
  target->control_dir.clear();
  const auto gone = jobman::test::run_program(jobman::remote::ssh_argv(*target, 0, "true"));
  EXPECT_EQ(gone.exit_code, 255) << gone.err;
  EXPECT_NE(gone.err.find("Connection refused"), std::string::npos) << gone.err;
}

TEST_F(MockDataPlaneTest, OutputStreamsLiveWhileTheCommandRuns) {
  create_active("live", "v4-8");
  const auto gate = dir / "gate";
  StreamingProcess running(
      ssh_argv("live-node", 0, "echo first; while [ ! -e " + gate.string() + " ]; do sleep 0.01; done; echo second"),
      {});
  // The first line arrives while the command is still blocked on the gate: nothing is buffered until the end.
  EXPECT_EQ(running.next_line(), "first");
  EXPECT_FALSE(fs::exists(gate));
  std::ofstream(gate) << "open";
  EXPECT_EQ(running.next_line(), "second");
  EXPECT_EQ(running.finish(), 0);
}

TEST_F(MockDataPlaneTest, PreemptionEndsEveryProcessWipesDisksAndKeepsBuckets) {
  create_active("p", "v4-32");
  const auto marker = worker("p-node", 0)["marker"].get<std::string>();
  const auto slice_prefix = marker.substr(0, marker.rfind('/') + 1);
  const fs::path worker_dir = worker("p-node", 1)["dir"].get<std::string>();
  // A bucket mounted on every worker, a file written to it, and a detached process that ignores SIGTERM.
  auto mounted =
      ssh("p-node", "all", "mkdir -p ~/bucket && gcsfuse --implicit-dirs data ~/bucket && mountpoint -q ~/bucket");
  ASSERT_EQ(mounted.exit_code, 0) << mounted.err;
  ASSERT_EQ(ssh("p-node", "0", "echo kept > ~/bucket/ckpt").exit_code, 0);
  EXPECT_EQ(ssh("p-node", "3", "cat ~/bucket/ckpt").out, "kept\n") << "the bucket is shared by the workers";
  ASSERT_EQ(
      ssh("p-node", "all", "setsid nohup bash -c 'trap \"\" TERM; sleep 600' >/dev/null 2>&1 < /dev/null &").exit_code,
      0);
  std::vector<std::unique_ptr<StreamingProcess>> foreground;
  for (int w = 0; w < 4; ++w) {
    foreground.push_back(std::make_unique<StreamingProcess>(ssh_argv("p-node", w, "echo up; sleep 600"),
                                                            std::map<std::string, std::string>{}));
    ASSERT_EQ(foreground.back()->next_line(), "up");
  }
  // One sleep per worker in the foreground and one detached per worker (bash execs the last command it runs).
  ASSERT_TRUE(eventually([&] { return processes_marked(slice_prefix).size() >= 8; }))
      << processes_marked(slice_prefix).size();

  preempt("p-node");
  // The foreground commands' connections drop: ssh's 255.
  for (auto& session : foreground) {
    EXPECT_EQ(session->finish(), 255);
  }
  // Every process of the slice is gone from the process table, the detached one that ignored SIGTERM included.
  EXPECT_TRUE(eventually([&] { return processes_marked(slice_prefix).empty(); }))
      << processes_marked(slice_prefix).size() << " left";
  EXPECT_TRUE(eventually([&] { return !fs::exists(worker_dir); })) << "the worker's disk is wiped";
  EXPECT_EQ(jobman::util::read_file(dir / "state" / "buckets" / "data" / "ckpt"), "kept\n");
  EXPECT_EQ(api("GET", "/mock/v1/metrics", nullptr, server->admin_headers()).body["processes_running"], 0);
}

TEST_F(MockDataPlaneTest, DeleteEndsEveryProcessToo) {
  create_active("d", "v4-8");
  const auto marker = worker("d-node", 0)["marker"].get<std::string>();
  ASSERT_EQ(ssh("d-node", "0", "setsid nohup sleep 600 >/dev/null 2>&1 < /dev/null &").exit_code, 0);
  ASSERT_TRUE(eventually([&] { return processes_marked(marker).size() == 1; }));
  EXPECT_EQ(api("GET", "/mock/v1/metrics", nullptr, server->admin_headers()).body["processes_running"], 1);
  ASSERT_EQ(api("DELETE", "/v2/" + kLoc + "/queuedResources/d?force=true").status, 200);
  EXPECT_TRUE(eventually([&] { return processes_marked(marker).empty(); }));
}

TEST_F(MockDataPlaneTest, AStandaloneNodesHostsEndOnStopAndComeBackFreshOnStart) {
  json body = {
      {"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}, {"schedulingConfig", {{"spot", true}}}};
  ASSERT_EQ(api("POST", "/v2/" + kLoc + "/nodes?nodeId=solo", body).status, 200);
  auto node_state = [&] { return api("GET", "/v2/" + kLoc + "/nodes/solo").body.value("state", ""); };
  ASSERT_TRUE(eventually([&] { return node_state() == "READY"; }));
  const auto marker = worker("solo", 0)["marker"].get<std::string>();
  ASSERT_EQ(ssh("solo", "0", "echo kept > before; setsid nohup sleep 600 >/dev/null 2>&1 < /dev/null &").exit_code, 0);
  ASSERT_TRUE(eventually([&] { return processes_marked(marker).size() == 1; }));

  ASSERT_EQ(api("POST", "/v2/" + kLoc + "/nodes/solo:stop", json::object()).status, 200);
  EXPECT_TRUE(eventually([&] { return processes_marked(marker).empty(); }));
  EXPECT_EQ(ssh("solo", "0", "true").exit_code, 255); // No host while the node is stopped.
  ASSERT_TRUE(eventually([&] { return node_state() == "STOPPED"; }));

  ASSERT_EQ(api("POST", "/v2/" + kLoc + "/nodes/solo:start", json::object()).status, 200);
  ASSERT_TRUE(eventually([&] { return node_state() == "READY"; }));
  const auto fresh = worker("solo", 0);
  EXPECT_NE(fresh["marker"], marker);
  auto listing = ssh("solo", "0", "test -e before && echo stale || echo fresh");
  EXPECT_EQ(listing.exit_code, 0) << listing.err;
  EXPECT_NE(listing.out.find("fresh"), std::string::npos) << listing.out;

  // A preempted standalone node keeps its record, but its processes end as a preempted slice's do.
  const auto new_marker = fresh["marker"].get<std::string>();
  ASSERT_EQ(ssh("solo", "0", "setsid nohup sleep 600 >/dev/null 2>&1 < /dev/null &").exit_code, 0);
  ASSERT_TRUE(eventually([&] { return processes_marked(new_marker).size() == 1; }));
  ASSERT_EQ(api("POST", "/mock/v1/" + kLoc + "/nodes/solo:preempt", json::object(), server->admin_headers()).status,
            200);
  EXPECT_TRUE(eventually([&] { return processes_marked(new_marker).empty(); }));
  EXPECT_EQ(node_state(), "PREEMPTED");
}

TEST_F(MockDataPlaneTest, StoppingTheMockEndsEveryWorkloadItStarted) {
  create_active("t", "v4-8");
  const auto marker = worker("t-node", 0)["marker"].get<std::string>();
  ASSERT_EQ(ssh("t-node", "0", "setsid nohup sleep 600 >/dev/null 2>&1 < /dev/null &").exit_code, 0);
  ASSERT_TRUE(eventually([&] { return processes_marked(marker).size() == 1; }));
  EXPECT_EQ(server->stop(), 0);
  EXPECT_TRUE(processes_marked(marker).empty()) << "SIGTERM returns only once the workloads are gone";
}

TEST_F(MockDataPlaneTest, AMockRestartedAfterBeingKilledEndsWhatItsLostSlicesLeftRunning) {
  create_active("k", "v4-8");
  const auto marker = worker("k-node", 0)["marker"].get<std::string>();
  const fs::path sandbox = fs::path(worker("k-node", 0)["dir"].get<std::string>()).parent_path();
  ASSERT_EQ(ssh("k-node", "0", "setsid nohup sleep 600 >/dev/null 2>&1 < /dev/null &").exit_code, 0);
  ASSERT_TRUE(eventually([&] { return processes_marked(marker).size() == 1; }));
  // The mock dies without ending anything, its reaper (its one child) first, as when the machine lost both;
  // meanwhile the slice is deleted from its state.
  for (const auto& id : jobman::test::process_ids()) {
    std::ifstream stat("/proc/" + id + "/stat");
    std::string line;
    const auto close_paren = std::getline(stat, line) ? line.rfind(')') : std::string::npos;
    // After the name: the state, then the parent's pid.
    std::istringstream fields(close_paren == std::string::npos ? std::string() : line.substr(close_paren + 1));
    std::string state;
    long parent = 0;
    if (fields >> state >> parent && parent == server->pid()) {
      ::kill(static_cast<pid_t>(std::stol(id)), SIGKILL);
    }
  }
  ::kill(server->pid(), SIGKILL);
  EXPECT_EQ(server->stop(), 128 + SIGKILL);
  {
    jobman::mock::World world(jobman::mock::load_mock_config(dir / "world.yaml"), 1000, 1);
    world.attach_store(dir / "state" / "state.db", jobman::util::now_ms());
    ASSERT_TRUE(world.delete_queued_resource("p", kZone, "k", true, "", jobman::util::now_ms()).ok());
  }
  EXPECT_EQ(processes_marked(marker).size(), 1U) << "nothing ended it yet";
  start();
  EXPECT_TRUE(processes_marked(marker).empty()) << "the restarted mock ends it before it serves";
  EXPECT_FALSE(fs::exists(sandbox));
}

TEST_F(MockDataPlaneTest, ScpCopiesToAndFromSelectedWorkers) {
  create_active("c", "v4-32");
  dir.write("upload/a.txt", "alpha\n");
  dir.write("upload/sub/b.txt", "beta\n");
  auto file = hosts->scp_to(kZone, "c-node", "all", {(dir / "upload" / "a.txt").string()}, "a.txt");
  ASSERT_EQ(file.exit_code, 0) << file.err;
  EXPECT_EQ(ssh("c-node", "all", "cat ~/a.txt").out, "alpha\nalpha\nalpha\nalpha\n");
  auto no_recurse = hosts->scp_to(kZone, "c-node", "0", {(dir / "upload").string()}, "up");
  EXPECT_NE(no_recurse.exit_code, 0);
  auto tree = hosts->scp_to(kZone, "c-node", "1,2", {(dir / "upload").string()}, "up", "root", true);
  ASSERT_EQ(tree.exit_code, 0) << tree.err;
  EXPECT_EQ(ssh("c-node", "2", "cat ~/up/sub/b.txt").out, "beta\n");
  EXPECT_NE(ssh("c-node", "3", "cat ~/up/sub/b.txt").exit_code, 0);
  ASSERT_EQ(ssh("c-node", "3", "echo from-3 > ~/result.txt").exit_code, 0);
  auto back = hosts->scp_from(kZone, "c-node", 3, "result.txt", (dir / "result.txt").string());
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(jobman::util::read_file(dir / "result.txt"), "from-3\n");
}

TEST_F(MockDataPlaneTest, GcsfuseMountsUnmountsAndRefusesABusyMountpoint) {
  create_active("g", "v4-8");
  EXPECT_EQ(ssh("g-node", "0", "mkdir -p ~/m && mountpoint -q ~/m").exit_code, 32);
  EXPECT_EQ(ssh("g-node", "0", "gcsfuse bkt ~/m && mountpoint -q ~/m && echo x > ~/m/f").exit_code, 0);
  EXPECT_EQ(ssh("g-node", "0", "gcsfuse bkt ~/m").exit_code, 1) << "already mounted";
  EXPECT_EQ(ssh("g-node", "0", "mkdir -p ~/busy && touch ~/busy/file && gcsfuse bkt ~/busy").exit_code, 1);
  EXPECT_EQ(ssh("g-node", "0", "fusermount -u ~/m && ! mountpoint -q ~/m && [ -d ~/m ] && [ ! -e ~/m/f ]").exit_code,
            0);
  EXPECT_EQ(jobman::util::read_file(dir / "state" / "buckets" / "bkt" / "f"), "x\n");
}

// The mount's gcsfuse serves what the host read and wrote through it, as gcsfuse's metrics, on the port it is given and
// the host's own address: another host's reads are not its, and a new mount counts from nothing.
TEST_F(MockDataPlaneTest, GcsfuseServesTheBytesItsHostReadOnItsPrometheusPort) {
  create_active("pm", "v4-16");
  const std::string data(3 * 1024 * 1024 + 17, 'd');
  dir.write("state/buckets/metered/data.bin", data);
  const std::string mount = "mkdir -p ~/m && gcsfuse --prometheus-port=9447 --implicit-dirs metered ~/m";
  const std::string scrape = "curl -fsS http://${MOCK_TPU_HOST_ADDRESSES%%,*}:9447/metrics";
  const auto metric = [](const std::string& text, const std::string& line_start) -> long long {
    const auto at = text.find("\n" + line_start + " ");
    return at == std::string::npos ? -1 : std::stoll(text.substr(at + line_start.size() + 2));
  };
  ASSERT_EQ(ssh("pm-node", "all", mount).exit_code, 0);
  ASSERT_EQ(ssh("pm-node", "0",
                "cat ~/m/data.bin > /dev/null && cat ~/m/data.bin | wc -c && head -c 1000 /dev/zero > "
                "~/m/out.bin")
                .out,
            std::to_string(data.size()) + "\n");
  const auto reader = ssh("pm-node", "0", scrape);
  ASSERT_EQ(reader.exit_code, 0) << reader.err;
  EXPECT_EQ(metric(reader.out, "gcs_read_bytes_count"), static_cast<long long>(2 * data.size())) << reader.out;
  EXPECT_GE(metric(reader.out, "fs_ops_count{fs_op=\"WriteFile\"}"), 1) << reader.out;
  EXPECT_EQ(metric(reader.out, "gcs_request_count{gcs_method=\"NewReader\"}"), 2) << reader.out;
  const auto idle = ssh("pm-node", "1", scrape);
  ASSERT_EQ(idle.exit_code, 0) << idle.err;
  EXPECT_EQ(metric(idle.out, "gcs_read_bytes_count"), 0) << "worker 1 read nothing: " << idle.out;
  EXPECT_EQ(jobman::util::read_file(dir / "state" / "buckets" / "metered" / "out.bin"), std::string(1000, '\0'));
  // Unmounted, nothing serves; mounted again, the count starts from nothing.
  ASSERT_EQ(ssh("pm-node", "0", "fusermount -u ~/m").exit_code, 0);
  EXPECT_NE(ssh("pm-node", "0", scrape).exit_code, 0);
  ASSERT_EQ(ssh("pm-node", "0", mount + " && head -c 100 ~/m/data.bin > /dev/null").exit_code, 0);
  const auto again = ssh("pm-node", "0", scrape);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  // What the kernel asks of a FUSE filesystem is whole pages (and gcsfuse reads ahead too): 100 bytes read cost more.
  EXPECT_GE(metric(again.out, "gcs_read_bytes_count"), 100) << again.out;
  EXPECT_LT(metric(again.out, "gcs_read_bytes_count"), static_cast<long long>(data.size())) << again.out;
}

// Google's gcloud on a host finds what it finds on a TPU VM: the VM's service account through the metadata server,
// and the project and zone it is told to use checked against the Compute API.
TEST_F(MockDataPlaneTest, GcloudOnAHostHasTheVmsServiceAccount) {
  if (!fs::exists("/usr/bin/gcloud")) {
    GTEST_SKIP() << "no /usr/bin/gcloud on this machine";
  }
  create_active("cfg", "v4-8");
  auto configured = ssh("cfg-node", "0",
                        "gcloud config set project p && gcloud config set compute/zone " + kZone +
                            " && gcloud auth list --filter=status:ACTIVE --format='value(account)' && gcloud config "
                            "get-value project && gcloud config get-value compute/zone");
  ASSERT_EQ(configured.exit_code, 0) << configured.out << configured.err;
  EXPECT_NE(configured.err.find("Updated property [compute/zone]."), std::string::npos) << configured.err;
  EXPECT_EQ(configured.err.find("WARNING"), std::string::npos) << "the zone is known: " << configured.err;
  EXPECT_EQ(configured.out, "default@jobman-mock.iam.gserviceaccount.com\np\n" + kZone + "\n");
}

TEST_F(MockDataPlaneTest, AFaultyNodeShowsItsWorkloadTheFaultFile) {
  create_active("f", "v4-8");
  EXPECT_EQ(ssh("f-node", "0", "test -e \"$MOCK_TPU_FAULT_FILE\"").exit_code, 1);
  ASSERT_EQ(
      api("POST", "/mock/v1/" + kLoc + "/nodes/f-node:markFaulty", json::object(), server->admin_headers()).status,
      200);
  EXPECT_EQ(ssh("f-node", "0", "test -e \"$MOCK_TPU_FAULT_FILE\"").exit_code, 0);
}

// The world's `dcn` reaches every host's commands, for systolic-train to delay its messages between slices.
TEST_F(MockDataPlaneTest, TheWorldsDcnReachesEveryHostsEnvironment) {
  create_active("d", "v4-32");
  for (int w = 0; w < 4; ++w) {
    const auto env = worker("d-node", w)["env"];
    EXPECT_EQ(env.value("MOCK_DCN_LATENCY_US", ""), "2000") << w;
    EXPECT_EQ(env.value("MOCK_DCN_BANDWIDTH_BPS", ""), "25000000000") << w;
    const auto seen = ssh("d-node", std::to_string(w), "echo $MOCK_DCN_LATENCY_US $MOCK_DCN_BANDWIDTH_BPS");
    EXPECT_EQ(seen.out, "2000 25000000000\n") << w << ": " << seen.err;
  }
}

TEST_F(MockDataPlaneTest, OnlyTheWorkerOnAFaultyMachineSeesTheFaultFileAndFailsTheSelftest) {
  create_active("m", "v4-32");
  const auto marked =
      api("POST", "/mock/v1/" + kLoc + "/nodes/m-node:markFaulty", json{{"worker", 1}}, server->admin_headers());
  ASSERT_EQ(marked.status, 200) << marked.text;
  ASSERT_EQ(marked.body["machines"].size(), 1U) << marked.text;
  EXPECT_EQ(marked.body["machines"][0]["worker"], 1);
  for (int w = 0; w < 4; ++w) {
    EXPECT_EQ(ssh("m-node", std::to_string(w), "test -e \"$MOCK_TPU_FAULT_FILE\"").exit_code, w == 1 ? 0 : 1) << w;
  }
  const auto failed = ssh("m-node", "1", "systolic-train --selftest");
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_EQ(failed.err.rfind("selftest failed: ", 0), 0U) << failed.out << failed.err;
  const auto passed = ssh("m-node", "0", "systolic-train --selftest");
  EXPECT_EQ(passed.exit_code, 0) << passed.err;
  EXPECT_EQ(passed.out.rfind("selftest passed: ", 0), 0U) << passed.out;

  // The machine's id is the same in the host's environment, the admin API's worker and the guest attributes.
  const auto guest = api("POST", "/v2/" + kLoc + "/nodes/m-node:getGuestAttributes", json{{"queryPath", "host/"}});
  ASSERT_EQ(guest.status, 200) << guest.text;
  ASSERT_EQ(guest.body["guestAttributes"].size(), 4U);
  std::set<std::string> machines;
  for (int w = 0; w < 4; ++w) {
    const auto id = guest.body["guestAttributes"][w]["queryValue"]["items"][0]["value"].get<std::string>();
    EXPECT_EQ(worker("m-node", w)["physical_host"], id);
    EXPECT_EQ(ssh("m-node", std::to_string(w), "echo $MOCK_TPU_PHYSICAL_HOST").out, id + "\n");
    machines.insert(id);
  }
  EXPECT_EQ(machines.size(), 4U);
  EXPECT_EQ(marked.body["machines"][0]["physicalHost"], worker("m-node", 1)["physical_host"]);
}

TEST_F(MockDataPlaneTest, AFaultyMachineGoesToTheNextSliceWithItsFault) {
  create_active("first", "v4-32");
  ASSERT_EQ(
      api("POST", "/mock/v1/" + kLoc + "/nodes/first-node:markFaulty", json{{"worker", 2}}, server->admin_headers())
          .status,
      200);
  std::vector<std::string> machines(4);
  for (int w = 0; w < 4; ++w) {
    machines[static_cast<std::size_t>(w)] = worker("first-node", w)["physical_host"].get<std::string>();
  }
  ASSERT_EQ(api("DELETE", "/v2/" + kLoc + "/queuedResources/first?force=true").status, 200);
  // With the zone cut to the chips of one v4-32 it has no room for new machines: the released ones are handed out
  // in the order they were freed, worker by worker.
  ASSERT_EQ(api("PUT", "/mock/v1/capacity",
                json{{"zone", kZone}, {"generation", "v4"}, {"tier", "spot"}, {"chips", 16}}, server->admin_headers())
                .status,
            200);
  create_active("second", "v4-32");
  for (int w = 0; w < 4; ++w) {
    EXPECT_EQ(worker("second-node", w)["physical_host"], machines[static_cast<std::size_t>(w)]) << w;
    EXPECT_EQ(ssh("second-node", std::to_string(w), "test -e \"$MOCK_TPU_FAULT_FILE\"").exit_code, w == 2 ? 0 : 1)
        << "the fault is there from the start on worker " << w << " only";
  }
  const auto metrics = api("GET", "/mock/v1/metrics", nullptr, server->admin_headers());
  EXPECT_EQ(metrics.body["faultyNodes"], json::array({kLoc + "/nodes/second-node"})) << metrics.text;
}

TEST_F(MockDataPlaneTest, WithEveryNewMachineFaultyAFreshSliceIsFaultyOnEveryWorker) {
  const auto set = api("PUT", "/mock/v1/hardware", json{{"faulty_fraction", 1}}, server->admin_headers());
  ASSERT_EQ(set.status, 200) << set.text;
  create_active("all", "v4-16");
  EXPECT_EQ(ssh("all-node", "all", "test -e \"$MOCK_TPU_FAULT_FILE\"").exit_code, 0);
  const auto node = api("GET", "/v2/" + kLoc + "/nodes/all-node");
  EXPECT_EQ(node.body["health"], "HEALTHY") << "as a real slice on bad hardware reports";
}

// The `checksum=` value in a run's output, or "".
std::string checksum_of(const std::string& output) {
  const auto at = output.rfind("checksum=");
  return at == std::string::npos ? "" : output.substr(at + 9, 16);
}

TEST_F(MockDataPlaneTest, TrainingSurvivesAPreemptionAndEndsWithTheUninterruptedChecksum) {
  const std::string train = "systolic-train --steps 60 --ckpt-every 5 --dim 16 --array 4";
  // The reference: the same run on this machine, never interrupted.
  auto reference = jobman::test::run_program(
      {(tools_dir() / "systolic-train").string(), "--steps", "60", "--ckpt-every", "5", "--dim", "16", "--array", "4"});
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const auto expected = checksum_of(reference.out);
  ASSERT_EQ(expected.size(), 16U) << reference.out;

  // Attempt 1 on a four-host slice, checkpoints in a mounted bucket; slow steps so the preemption lands mid-run.
  create_active("t1", "v4-32");
  const std::string mount = "mkdir -p ~/b && (mountpoint -q ~/b || gcsfuse runs ~/b) && ";
  const std::string run = mount + "JOBMAN_WORKER_ID=${MOCK_TPU_HOST##*/} " + train + " --ckpt-dir ~/b/ckpt";
  std::vector<std::unique_ptr<StreamingProcess>> first;
  for (int w = 0; w < 4; ++w) {
    first.push_back(std::make_unique<StreamingProcess>(ssh_argv("t1-node", w, run + " --step-time-ms 20"),
                                                       std::map<std::string, std::string>{}));
  }
  // Wait until worker 0 has written a checkpoint past step 10, then preempt.
  ASSERT_TRUE(first[0]->read_until("checkpoint step=15"));
  preempt("t1-node");
  // The slice went away under the command: ssh's 255, or the command's own 143 when it saved its checkpoint on the
  // SIGTERM and exited before the connection dropped.
  for (auto& session : first) {
    const int status = session->finish();
    EXPECT_TRUE(status == 255 || status == 143) << status;
  }

  // Attempt 2 on a new slice: it resumes from the newest checkpoint in the bucket and finishes.
  create_active("t2", "v4-32");
  auto second = ssh("t2-node", "all", run);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_NE(second.out.find("resumed from step="), std::string::npos) << second.out;
  EXPECT_EQ(second.out.find("starting from step=0"), std::string::npos) << second.out;
  // All four workers end with the uninterrupted run's checksum.
  std::size_t finished = 0;
  for (auto at = second.out.find("checksum="); at != std::string::npos; at = second.out.find("checksum=", at + 1)) {
    EXPECT_EQ(second.out.substr(at + 9, 16), expected);
    ++finished;
  }
  EXPECT_EQ(finished, 4U);
}

TEST_F(MockDataPlaneTest, TrainingOnAFaultyNodeGoesNaN) {
  create_active("nan", "v4-8");
  ASSERT_EQ(
      api("POST", "/mock/v1/" + kLoc + "/nodes/nan-node:markFaulty", json::object(), server->admin_headers()).status,
      200);
  auto result = ssh("nan-node", "0", "systolic-train --steps 5 --dim 8 --array 4");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.out.find("loss=nan"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("non-finite loss"), std::string::npos) << result.out;
}

// A loss spike reaches the workload of every worker through a file of its own, which the workload counts down as it
// computes the spiked steps (as another account than the mock's: the faults directory is everyone's), so the workers
// stay in lockstep: each ends with the same checksum, another than the unspiked run's.
TEST_F(MockDataPlaneTest, AnInjectedLossSpikeReachesEveryWorkerAndIsConsumedStepByStep) {
  const std::string train = "systolic-train --steps 4 --dim 8 --array 4";
  const auto reference = jobman::test::run_program(
      {(tools_dir() / "systolic-train").string(), "--steps", "4", "--dim", "8", "--array", "4"});
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  create_active("ls", "v4-16");
  for (int w = 0; w < 2; ++w) {
    const auto host = worker("ls-node", w);
    EXPECT_EQ(host["env"].value("MOCK_TPU_LOSS_SPIKE_FILE", ""),
              host["dir"].get<std::string>() + "/.mock/faults/loss-spike");
    EXPECT_EQ(host["env"].value("MOCK_TPU_HANG_FILE", ""), host["dir"].get<std::string>() + "/.mock/faults/hang");
  }
  const auto spiked = jobman::test::inject_loss_spike(*client, *server, kLoc, "ls-node", 10, 2);
  ASSERT_EQ(spiked.status, 200) << spiked.text;
  EXPECT_EQ(spiked.body["workers"], json::array({0, 1}));
  std::set<std::string> checksums;
  for (const std::string w : {"0", "1"}) {
    EXPECT_EQ(ssh("ls-node", w, "cat \"$MOCK_TPU_LOSS_SPIKE_FILE\"").out, "10.0 2\n") << w;
    const auto run = ssh("ls-node", w, train, "zephyr");
    ASSERT_EQ(run.exit_code, 0) << w << ": " << run.out << run.err;
    EXPECT_EQ(run.err, "") << w;
    const auto loss = [](const std::string& output, const std::string& step) {
      const auto at = output.find("step=" + step + " loss=") + step.size() + 11;
      return std::stod(output.substr(at, output.find(' ', at) - at));
    };
    EXPECT_NEAR(loss(run.out, "1") / loss(reference.out, "1"), 10.0, 1e-6) << run.out;
    EXPECT_NE(checksum_of(run.out), checksum_of(reference.out));
    checksums.insert(checksum_of(run.out));
    EXPECT_EQ(ssh("ls-node", w, "test -e \"$MOCK_TPU_LOSS_SPIKE_FILE\"").exit_code, 1) << "spent on worker " << w;
    // Spent: the same run again computes the unspiked steps.
    EXPECT_EQ(checksum_of(ssh("ls-node", w, train).out), checksum_of(reference.out)) << w;
  }
  EXPECT_EQ(checksums.size(), 1U) << "the workers stayed in lockstep";
}

// A hang on one worker: its workload blocks at its next step, silently, until SIGTERM ends it (143, nothing saved);
// the file is consumed, so the next run there does not hang; the other worker trains on.
TEST_F(MockDataPlaneTest, AnInjectedHangBlocksTheNextStepUntilTheWorkloadIsStopped) {
  create_active("hg", "v4-16");
  const auto hung = jobman::test::inject_hang(*client, *server, kLoc, "hg-node", 1);
  ASSERT_EQ(hung.status, 200) << hung.text;
  EXPECT_EQ(hung.body["workers"], json::array({1}));
  EXPECT_EQ(ssh("hg-node", "0", "test -e \"$MOCK_TPU_HANG_FILE\"").exit_code, 1);
  EXPECT_EQ(ssh("hg-node", "1", "test -e \"$MOCK_TPU_HANG_FILE\"").exit_code, 0);
  // Once the file is gone the workload is in (or about to enter) its hang: a SIGTERM then ends it either way.
  const std::string stop_when_hung =
      "systolic-train --steps 5 --dim 8 --array 4 --ckpt-dir ~/ckpt > ~/out.txt & pid=$!; "
      "while [ -e \"$MOCK_TPU_HANG_FILE\" ]; do sleep 0.01; done; kill -TERM $pid; wait $pid; echo \"exit=$?\"; "
      "cat ~/out.txt; ls ~/ckpt 2>/dev/null | wc -l";
  const auto stopped = ssh("hg-node", "1", stop_when_hung, "zephyr");
  EXPECT_EQ(stopped.out, "exit=143\nstarting from step=0 of 5\nterminated at step=0 by SIGTERM while hung in step=1, "
                         "nothing saved\n0\n")
      << stopped.err;
  const auto again = ssh("hg-node", "1", "systolic-train --steps 5 --dim 8 --array 4", "zephyr");
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_EQ(checksum_of(again.out).size(), 16U) << again.out;
  EXPECT_EQ(ssh("hg-node", "0", "systolic-train --steps 5 --dim 8 --array 4").exit_code, 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Each host's own /home/USER (namespace mode): what configs written for real TPU VMs name.

class MockWorkerHomesTest : public MockDataPlaneTest {
protected:
  void SetUp() override {
    MockDataPlaneTest::SetUp();
    create_active("h", "v4-32");
    const auto host = worker("h-node", 0);
    if (host.value("home_mode", "") != "namespace") {
      GTEST_SKIP() << "this machine gives worker hosts no namespaces: " << host.value("home_mode_reason", "");
    }
  }

  // `ssh zephyr@HOST-W CMD`.
  RunResult as_zephyr(int worker, const std::string& command) {
    return ssh("h-node", std::to_string(worker), command, "zephyr");
  }

  // The directory of this machine that holds zephyr's home on host W.
  fs::path sandbox_home(int w) { return worker("h-node", w, "zephyr")["sandbox_home"].get<std::string>(); }
};

TEST_F(MockWorkerHomesTest, TwoHostsOfASliceEachSeeTheirOwnHomeUnderHomeUser) {
  const auto host = worker("h-node", 0);
  EXPECT_EQ(host["home"], "/home/root") << "the answer without a user names root";
  auto zero = as_zephyr(0, "echo $HOME; pwd; echo from-0 > /home/zephyr/x; ls -A /home");
  ASSERT_EQ(zero.exit_code, 0) << zero.err;
  // Only the homes of the host's own accounts (one per user with a key) are under /home, not this machine's.
  EXPECT_EQ(zero.out, "/home/zephyr\n/home/zephyr\nalice\nroot\nzephyr\n");
  EXPECT_EQ(jobman::util::read_file(sandbox_home(0) / "x"), "from-0\n") << "host 0's file is in its sandbox";
  auto one = as_zephyr(1, "test -e /home/zephyr/x && echo seen || echo unseen; ls -A /home");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, "unseen\nalice\nroot\nzephyr\n") << "host 1 has a home of its own";
  EXPECT_FALSE(fs::exists(sandbox_home(1) / "x"));
  auto env = as_zephyr(2, "echo $USER $LOGNAME $HOME; id -un");
  EXPECT_EQ(env.out, "zephyr zephyr /home/zephyr\nzephyr\n") << env.err;
}

TEST_F(MockWorkerHomesTest, ScpToAndFromHomeUserUsesTheHostsSandbox) {
  dir.write("upload/a.txt", "alpha\n");
  auto scp = [&](const std::string& from, const std::string& to) {
    return hosts->scp_to(kZone, "h-node", "1", {from}, to, "zephyr");
  };
  ASSERT_EQ(as_zephyr(1, "mkdir -p /home/zephyr/in").exit_code, 0);
  auto sent = scp((dir / "upload" / "a.txt").string(), "/home/zephyr/in/a.txt");
  ASSERT_EQ(sent.exit_code, 0) << sent.err;
  EXPECT_EQ(jobman::util::read_file(sandbox_home(1) / "in" / "a.txt"), "alpha\n");
  EXPECT_EQ(as_zephyr(1, "cat /home/zephyr/in/a.txt").out, "alpha\n");
  ASSERT_EQ(as_zephyr(1, "echo beta > /home/zephyr/b.txt").exit_code, 0);
  auto back = hosts->scp_from(kZone, "h-node", 1, "/home/zephyr/b.txt", (dir / "b.txt").string(), "zephyr");
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(jobman::util::read_file(dir / "b.txt"), "beta\n");
  // Another user's home does not exist on the host, and nothing reaches this machine's /home.
  auto elsewhere = scp((dir / "upload" / "a.txt").string(), "/home/someone-else/a.txt");
  EXPECT_EQ(elsewhere.exit_code, 1);
  EXPECT_NE(elsewhere.err.find("No such file or directory"), std::string::npos) << elsewhere.err;
  EXPECT_FALSE(fs::exists("/home/someone-else/a.txt"));
}

TEST_F(MockWorkerHomesTest, ADetachedProcessKeepsItsHomeAndPreemptionStillEndsIt) {
  const auto marker = worker("h-node", 0)["marker"].get<std::string>();
  // Launched as jobman launches a workload: setsid and nohup, its session ended at once. It ignores SIGTERM.
  ASSERT_EQ(as_zephyr(0, "setsid nohup bash -c 'trap \"\" TERM; while [ ! -e /home/zephyr/go ]; do sleep 0.01; "
                         "done; cat /home/zephyr/go > /home/zephyr/done; sleep 600' > /dev/null 2>&1 < /dev/null &")
                .exit_code,
            0);
  ASSERT_TRUE(eventually([&] { return !processes_marked(marker).empty(); }));
  const auto home = sandbox_home(0);
  dir.write("go", "still home\n");
  fs::copy_file(dir / "go", home / "go.part");
  fs::rename(home / "go.part", home / "go");
  ASSERT_TRUE(eventually([&] { return fs::exists(home / "done") && fs::file_size(home / "done") > 0; }));
  EXPECT_EQ(jobman::util::read_file(home / "done"), "still home\n");

  preempt("h-node");
  EXPECT_TRUE(eventually([&] { return processes_marked(marker).empty(); }))
      << processes_marked(marker).size() << " namespaced processes left";
  EXPECT_TRUE(eventually([&] { return !fs::exists(home); })) << "the host's disk is wiped";
}

TEST_F(MockWorkerHomesTest, DockerGcsfuseAndCondaWorkWithHomeUserPaths) {
  auto mounted =
      as_zephyr(0, "mkdir -p /home/zephyr/gcs-bucket && gcsfuse --implicit-dirs data /home/zephyr/gcs-bucket "
                   "&& echo saved > /home/zephyr/gcs-bucket/ckpt");
  ASSERT_EQ(mounted.exit_code, 0) << mounted.err;
  EXPECT_EQ(jobman::util::read_file(dir / "state" / "buckets" / "data" / "ckpt"), "saved\n");

  auto docker = as_zephyr(0, "echo inside > /home/zephyr/w.txt; docker run --rm --privileged --network=host "
                             "-v /home/zephyr:/home/zephyr -w /home/zephyr --env HOME=/home/zephyr "
                             "yx3038/maxtext_base_image:latest bash -c 'pwd; echo $HOME; cat w.txt'");
  ASSERT_EQ(docker.exit_code, 0) << docker.err;
  EXPECT_NE(docker.out.find("/home/zephyr\n/home/zephyr\ninside\n"), std::string::npos) << docker.out;

  ASSERT_EQ(as_zephyr(0, "printf 'name: fms\\ndependencies:\\n  - python=3.10\\n' > /home/zephyr/fms.yaml").exit_code,
            0);
  auto conda = as_zephyr(0, "conda env create -f /home/zephyr/fms.yaml > /dev/null && conda run -n fms bash -c "
                            "'echo $CONDA_PREFIX'");
  ASSERT_EQ(conda.exit_code, 0) << conda.err;
  EXPECT_EQ(conda.out, "/home/zephyr/miniconda3/envs/fms\n");
  EXPECT_TRUE(fs::is_directory(sandbox_home(0) / "miniconda3" / "envs" / "fms"));
}

TEST_F(MockDataPlaneTest, WithoutNamespacesTheHostsRunNoSshAndTheWorkerAnswerSaysWhy) {
  server.reset();
  start({"--sandbox-homes"});
  create_active("f", "v4-8");
  const auto host = worker("f-node", 0);
  EXPECT_EQ(host["home_mode"], "sandbox");
  EXPECT_EQ(host["home"], host["sandbox_home"]);
  EXPECT_NE(host["home_mode_reason"].get<std::string>().find("--sandbox-homes"), std::string::npos) << host;
  // No sshd: a host without a filesystem of its own takes no session.
  const auto refused = ssh("f-node", "0", "true");
  EXPECT_EQ(refused.exit_code, 255);
  EXPECT_NE(refused.err.find("Connection refused"), std::string::npos) << refused.err;
}

} // namespace data_plane_test
