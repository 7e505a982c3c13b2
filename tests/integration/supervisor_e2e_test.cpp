// Jobs driven end to end by `jobman daemon` against a real jobman-mock-cloud: slices requested, set up, trained on,
// preempted, recovered, cancelled, resumed, deleted and cleaned. Each test checks the final phase, the attempts, the
// checksum of the training run, and that the mock holds no queued resource, node or process afterwards.
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/util/system.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/serving_thread.hpp"
#include "support/supervisor_home.hpp"
#include "support/temp_dir.hpp"

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <fstream>
#include <gtest/gtest.h>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

namespace jobman::test {
namespace supervisor_e2e_test {

namespace fs = std::filesystem;
using domain::Phase;
using nlohmann::json;

// What the proxy does with a queuedResources.create.
enum class CreateHold {
  none,           // Forwards it and returns the answer.
  before_sending, // Holds it without forwarding: the request never reaches the API.
  after_sending,  // Forwards it, then holds the answer: the API made the resource, the caller never hears so.
};

// A proxy in front of the mock that, when told to, refuses queued-resource deletes with 403 PERMISSION_DENIED, as
// the API does when the caller's role changed, or holds queued-resource creates (see CreateHold) until destroyed.
class RefusingProxy {
public:
  explicit RefusingProxy(int upstream_port) : upstream_port_(upstream_port) {
    const auto forward = [this](const httplib::Request& req, httplib::Response& res) {
      const bool create = req.method == "POST" && req.path.ends_with("/queuedResources");
      const auto hold = create ? hold_creates_.load() : CreateHold::none;
      if (hold == CreateHold::before_sending) {
        held_until_destroyed();
        return;
      }
      if (refuse_deletes_ && req.method == "DELETE" && req.path.find("/queuedResources/") != std::string::npos) {
        ++refused_;
        res.status = 403;
        res.set_content(R"({"error":{"code":403,"message":"Permission 'tpu.queuedResources.delete' denied",)"
                        R"("status":"PERMISSION_DENIED"}})",
                        "application/json");
        return;
      }
      httplib::Client upstream("127.0.0.1", upstream_port_);
      httplib::Headers headers;
      for (const auto& [name, value] : req.headers) {
        if (name == "Authorization" || name == "Metadata-Flavor") {
          headers.emplace(name, value);
        }
      }
      const auto type = req.get_header_value("Content-Type");
      auto answer = req.method == "GET"    ? upstream.Get(req.target, headers)
                    : req.method == "POST" ? upstream.Post(req.target, headers, req.body, type)
                    : req.method == "PUT"  ? upstream.Put(req.target, headers, req.body, type)
                                           : upstream.Delete(req.target, headers, req.body, type);
      if (!answer) {
        res.status = 502;
        return;
      }
      if (hold == CreateHold::after_sending) {
        held_until_destroyed();
        return;
      }
      res.status = answer->status;
      res.set_content(answer->body, answer->get_header_value("Content-Type"));
    };
    server_.Get(".*", forward);
    server_.Post(".*", forward);
    server_.Put(".*", forward);
    server_.Delete(".*", forward);
    // Bound before the thread starts, so connections made at once wait in the backlog until it accepts them.
    port_ = server_.bind_to_any_port("127.0.0.1");
    serving_ = std::make_unique<ServingThread>(server_);
  }
  ~RefusingProxy() {
    {
      const std::lock_guard lock(held_mutex_);
      closing_ = true;
    }
    held_cv_.notify_all();
    serving_.reset();
  }
  RefusingProxy(const RefusingProxy&) = delete;
  RefusingProxy& operator=(const RefusingProxy&) = delete;

  [[nodiscard]] int port() const { return port_; }
  void refuse_deletes(bool refuse) { refuse_deletes_ = refuse; }
  [[nodiscard]] int refused() const { return refused_; }
  void hold_creates(CreateHold hold) { hold_creates_ = hold; }
  // How many creates are held now.
  [[nodiscard]] int held() const { return held_; }

private:
  // Keeps a request unanswered until the proxy is destroyed.
  void held_until_destroyed() {
    ++held_;
    std::unique_lock lock(held_mutex_);
    held_cv_.wait(lock, [this] { return closing_; });
  }

  int upstream_port_;
  httplib::Server server_;
  int port_ = 0;
  std::unique_ptr<ServingThread> serving_;
  std::atomic<bool> refuse_deletes_{false};
  std::atomic<int> refused_{0};
  std::atomic<CreateHold> hold_creates_{CreateHold::none};
  std::atomic<int> held_{0};
  std::mutex held_mutex_;
  std::condition_variable held_cv_;
  bool closing_ = false;
};

// The supervisor's end-to-end fixture (support/supervisor_home.hpp), with a proxy that holds creates.
// Puts an `ssh` first on the daemon's PATH that runs `body` (bash, with the arguments in "$@") and then this
// machine's ssh: how a test holds or cuts one of jobman's connections.
void wrap_ssh(const TempDir& dir, std::map<std::string, std::string>& env, const std::string& body) {
  const auto wrapper = dir.write("ssh-wrapper/ssh", "#!/bin/bash\n" + body + "exec /usr/bin/ssh \"$@\"\n");
  fs::permissions(wrapper, fs::perms::owner_all);
  const char* path = std::getenv("PATH");
  env["PATH"] = wrapper.parent_path().string() + ":" + (path != nullptr ? path : "/usr/bin:/bin");
}

class SupervisorTest : public SupervisorHome {
protected:
  // Starts a daemon that reaches the API through `proxy`, which holds queued-resource creates as `hold`; creates a
  // job running `command` and waits until its create is held. Returns the daemon's index and the job's id. Other
  // processes started afterwards reach the mock directly.
  std::pair<std::size_t, std::int64_t> create_with_held_request(RefusingProxy& proxy, CreateHold hold,
                                                                const std::string& command) {
    proxy.hold_creates(hold);
    const auto direct = env["JOBMAN_API_ENDPOINT"];
    env["JOBMAN_API_ENDPOINT"] = "http://127.0.0.1:" + std::to_string(proxy.port());
    const auto daemon = start_daemon();
    env["JOBMAN_API_ENDPOINT"] = direct;
    const auto id = create(config(command));
    EXPECT_TRUE(eventually([&] { return proxy.held() == 1; }, kPatience));
    return {daemon, id};
  }
};

TEST_F(SupervisorTest, AnOnDemandJobRunsToSuccessAndLeavesNothingBehind) {
  start_daemon();
  const auto id = create(config(training(200, 2), "ondemand"));
  const auto done = wait_for(id, 0, 120);
  EXPECT_EQ(done.attempt, 1);
  EXPECT_EQ(done.exit_code, 0);
  EXPECT_EQ(checksums(id, 1, 1), std::vector<std::string>{uninterrupted_checksum(200)});
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
  EXPECT_TRUE(eventually([&] { return db().attempts().of(id).back().released_ms.has_value(); }, kPatience));
  // Every phase on the way was recorded, in order (PROVISIONING only when a listing caught the slice in it).
  std::vector<Phase> phases;
  for (const auto& e : db().events().of(id)) {
    if (e.kind == "phase" && e.to != Phase::provisioning) {
      phases.push_back(*e.to);
    }
  }
  EXPECT_EQ(phases, (std::vector<Phase>{Phase::queued, Phase::setup, Phase::running, Phase::succeeded}));
}

TEST_F(SupervisorTest, ASpotJobPreemptedDuringSetupAndWhileRunningFinishesWithTheUninterruptedChecksum) {
  // An ssh that holds the first setup step until the test lets it go: the preemption lands inside the setup.
  const auto gate = dir / "gate";
  wrap_ssh(dir, env,
           "if [[ \"$*\" == *jobman-setup* ]] && [ -e '" + gate.string() + ".armed' ]; then\n  rm -f '" +
               gate.string() + ".armed'\n  touch '" + gate.string() + ".held'\n  while [ -e '" + gate.string() +
               ".held' ]; do sleep 0.02; done\nfi\n");
  dir.write("gate.armed", "");
  start_daemon();
  const auto id = create(config(training(400, 10), "spot", "v4-16"));

  // 1. Preempted while the first attempt's setup is under way.
  ASSERT_TRUE(eventually([&] { return fs::exists(dir / "gate.held"); }, kPatience));
  EXPECT_EQ(job(id).phase, Phase::setup);
  ASSERT_TRUE(preempt(node_of(id)));
  fs::remove(dir / "gate.held");

  // 2. Preempted again while the second attempt trains, after a checkpoint.
  ASSERT_TRUE(eventually([&] { return job(id).attempt == 2 && job(id).phase == Phase::running; }, kPatience))
      << job(id).phase_reason;
  ASSERT_TRUE(await_log(id, 2, "step=100 "));
  ASSERT_TRUE(preempt(node_of(id)));

  const auto done = wait_for(id, 0, 180);
  EXPECT_EQ(done.attempt, 3);
  EXPECT_EQ(done.preemptions, 2);
  EXPECT_EQ(done.failures, 0);
  const auto attempts = db().attempts().of(id);
  ASSERT_EQ(attempts.size(), 3U);
  EXPECT_EQ(attempts[0].outcome, domain::AttemptOutcome::preempted);
  EXPECT_EQ(attempts[1].outcome, domain::AttemptOutcome::preempted);
  EXPECT_EQ(attempts[2].outcome, domain::AttemptOutcome::succeeded);
  EXPECT_NE(attempts[0].queued_resource, attempts[1].queued_resource) << "a new slice for every attempt";
  // Attempt 1 never ran the command; attempt 3 resumed from a checkpoint and every worker ends where an
  // uninterrupted run ends.
  EXPECT_FALSE(fs::exists(worker_log(id, 1, 0)));
  EXPECT_NE(file_text(worker_log(id, 3, 0)).find("resumed from step="), std::string::npos);
  const auto expected = uninterrupted_checksum(400);
  EXPECT_EQ(checksums(id, 3, 2), (std::vector<std::string>{expected, expected}));
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

TEST_F(SupervisorTest, ANewDaemonAfterKillNineFinishesTheJobWithTheSameWorkloadProcess) {
  const auto first = start_daemon();
  const auto id = create(config(training(500, 10)));
  ASSERT_TRUE(await_phase(id, Phase::running));
  ASSERT_TRUE(await_log(id, 1, "step=50 "));
  const auto node = node_of(id);
  const auto worker =
      http_call(*client, "GET", std::string(kLocation) + "/nodes/" + node + "/workers/0?user=" + util::current_user(),
                nullptr, mock->admin_headers());
  ASSERT_EQ(worker.status, 200);
  char name[16];
  std::snprintf(name, sizeof name, "%06lld", static_cast<long long>(id));
  const auto pid_file =
      fs::path(worker.body["sandbox_home"].get<std::string>()) / ".jobman" / "jobs" / name / "attempt-1" / "pid";
  const auto pid_before = file_text(pid_file);
  ASSERT_FALSE(pid_before.empty());
  const auto owner_before = db().leases().of(id)->owner;

  daemons[first]->send(SIGKILL);
  EXPECT_EQ(daemons[first]->finish(), 128 + SIGKILL);
  start_daemon();
  // The new daemon takes the lease once the old one expires, and re-attaches to the same process.
  ASSERT_TRUE(
      eventually([&] { return db().leases().of(id) && db().leases().of(id)->owner != owner_before; }, kPatience));
  if (fs::exists(pid_file)) {
    EXPECT_EQ(file_text(pid_file), pid_before);
  }
  const auto done = wait_for(id, 0, 120);
  EXPECT_EQ(done.attempt, 1);
  EXPECT_EQ(done.preemptions, 0);
  // Launched once, started from step 0 once, never resumed: the same run from start to end, its output complete.
  const auto log = file_text(worker_log(id, 1, 0));
  EXPECT_EQ(log.find("starting from step=0"), log.rfind("starting from step=0"));
  EXPECT_EQ(log.find("resumed"), std::string::npos);
  int launches = 0;
  for (const auto& e : db().events().of(id)) {
    launches += e.message.starts_with("launched attempt") ? 1 : 0;
  }
  EXPECT_EQ(launches, 1);
  for (int step = 1; step <= 500; ++step) {
    ASSERT_NE(log.find("step=" + std::to_string(step) + " "), std::string::npos) << "line of step " << step;
  }
  EXPECT_EQ(checksums(id, 1, 1), std::vector<std::string>{uninterrupted_checksum(500)});
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

TEST_F(SupervisorTest, TwoDaemonsNeverDriveTheSameJob) {
  start_daemon();
  start_daemon();
  std::vector<std::int64_t> ids;
  ids.reserve(6);
  for (int i = 0; i < 6; ++i) {
    ids.push_back(create(config(training(60, 2))));
  }
  std::vector<std::string> args{"wait", "--timeout", "120"};
  for (const auto id : ids) {
    args.push_back(std::to_string(id));
  }
  const auto waited = jm(args);
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err;
  for (const auto id : ids) {
    int drivers = 0;
    int launches = 0;
    for (const auto& e : db().events().of(id)) {
      drivers += e.message.starts_with("driven by supervisor") ? 1 : 0;
      launches += e.message.starts_with("launched attempt") ? 1 : 0;
    }
    EXPECT_EQ(drivers, 1) << "job " << id;
    EXPECT_EQ(launches, 1) << "job " << id;
    EXPECT_EQ(job(id).attempt, 1);
  }
  EXPECT_EQ(metrics()["requests"]["queuedResources.create"].value("200", 0), 6);
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

// One supervisor lists each zone: once one of them drives a job in a zone, the zone's next jobs are left to it (the
// other takes them up only if they wait a minute).
TEST_F(SupervisorTest, TwoDaemonsLeaveAZonesJobsToTheOneThatDrivesThere) {
  start_daemon("30s");
  start_daemon("30s");
  std::vector<std::int64_t> ids;
  ids.reserve(4);
  for (int i = 0; i < 4; ++i) {
    ids.push_back(create(config(training(100000, 10))));
  }
  std::set<std::string> drivers;
  for (const auto id : ids) {
    ASSERT_TRUE(await_phase(id, Phase::running)) << job(id).phase_reason;
    for (const auto& e : db().events().of(id)) {
      if (e.message.starts_with("driven by supervisor ")) {
        drivers.insert(e.message);
      }
    }
  }
  EXPECT_EQ(drivers.size(), 1U) << "every job of the zone is driven by one supervisor";
  std::vector<std::string> cancel{"cancel", "--no-wait"};
  cancel.reserve(cancel.size() + ids.size());
  for (const auto id : ids) {
    cancel.push_back(std::to_string(id));
  }
  EXPECT_EQ(jm(cancel).exit_code, 0);
}

TEST_F(SupervisorTest, InjectedApiFaultsCreateNoDuplicateQueuedResource) {
  ASSERT_EQ(http_call(*client, "POST", "/mock/v1/faults", {{"rate", 0.2}, {"codes", {429, 503}}}, mock->admin_headers())
                .status,
            200);
  start_daemon();
  const auto id = create(config(training(100, 2)));
  EXPECT_EQ(wait_for(id, 0, 180).attempt, 1);
  const auto m = metrics();
  EXPECT_EQ(m["requests"]["queuedResources.create"].value("200", 0), 1) << m["requests"].dump();
  EXPECT_GT(
      m["requests"]["queuedResources.list"].value("429", 0) + m["requests"]["queuedResources.list"].value("503", 0), 0)
      << "faults were injected";
  EXPECT_EQ(checksums(id, 1, 1), std::vector<std::string>{uninterrupted_checksum(100)});
  ASSERT_EQ(
      http_call(*client, "POST", "/mock/v1/faults", {{"rate", 0.0}, {"codes", json::array()}}, mock->admin_headers())
          .status,
      200);
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

// Chaos seed 3017: a supervisor killed after its queuedResources.create reached the API and before it recorded the
// answer, then the job cancelled and cleaned before another supervisor took it. The store knew no slice, so the job
// ended CANCELLED at once and the queued resource was left in the cloud. The name is now recorded before the
// request leaves: the CLI leaves the job to a supervisor, which deletes the resource when the job is cleaned.
TEST_F(SupervisorTest, ASliceRequestedJustBeforeTheSupervisorDiedIsDeletedWhenTheJobIsCancelledAndCleaned) {
  RefusingProxy proxy(mock->port());
  const auto held = create_with_held_request(proxy, CreateHold::after_sending, training(100, 10));
  const auto first = held.first;
  const auto id = held.second;
  ASSERT_EQ(proxy.held(), 1);
  EXPECT_EQ(metrics()["queuedResourcesCreated"], 1) << "the API made it";
  daemons[first]->send(SIGKILL);
  EXPECT_EQ(daemons[first]->finish(), 128 + SIGKILL);

  const auto asked = db().attempts().of(id);
  ASSERT_EQ(asked.size(), 1U);
  EXPECT_TRUE(asked[0].create_pending);
  EXPECT_EQ(job(id).phase, Phase::pending);
  const auto shown = jm({"show", std::to_string(id)});
  EXPECT_NE(shown.out.find(asked[0].queued_resource), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("requesting"), std::string::npos) << shown.out;
  // No supervisor runs: the CLI cannot tell whether the slice exists, so it records the request and leaves it.
  const auto cancelled = jm({"cancel", std::to_string(id), "--no-wait"});
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.err;
  EXPECT_EQ(job(id).phase, Phase::pending) << job(id).phase_reason;

  start_daemon();
  ASSERT_TRUE(await_phase(id, Phase::cancelled)) << job(id).phase_reason;
  const auto cleaned = jm({"clean", "--all-finished"});
  EXPECT_EQ(cleaned.exit_code, 0) << cleaned.out << cleaned.err;
  EXPECT_TRUE(eventually([&] { return !db().jobs().find(id); }, kPatience));
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
  EXPECT_EQ(metrics()["queuedResourcesCreated"], 1);
}

// The other side of the same moment: the name was recorded and the supervisor died before its request left. The
// next supervisor asks again under the same name, as the same attempt: no preemption, no second resource.
TEST_F(SupervisorTest, ASliceRequestThatNeverLeftIsMadeAgainAsTheSameAttempt) {
  RefusingProxy proxy(mock->port());
  const auto held = create_with_held_request(proxy, CreateHold::before_sending, training(100, 2));
  const auto first = held.first;
  const auto id = held.second;
  ASSERT_EQ(proxy.held(), 1);
  const auto recorded = db().attempts().of(id);
  ASSERT_EQ(recorded.size(), 1U);
  EXPECT_TRUE(recorded[0].create_pending);
  daemons[first]->send(SIGKILL);
  EXPECT_EQ(daemons[first]->finish(), 128 + SIGKILL);
  EXPECT_EQ(metrics()["queuedResourcesCreated"], 0) << "the request never reached the API";

  start_daemon();
  const auto done = wait_for(id, 0, 120);
  EXPECT_EQ(done.attempt, 1);
  EXPECT_EQ(done.preemptions, 0);
  const auto attempts = db().attempts().of(id);
  ASSERT_EQ(attempts.size(), 1U);
  EXPECT_EQ(attempts[0].queued_resource, recorded[0].queued_resource);
  EXPECT_FALSE(attempts[0].create_pending);
  EXPECT_EQ(checksums(id, 1, 1), std::vector<std::string>{uninterrupted_checksum(100)});
  EXPECT_EQ(metrics()["queuedResourcesCreated"], 1);
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

// SIGTERM while an operation hangs (a create the API never answers). The supervisor waits a moment for it, then
// abandons it and exits 0 at once, without tearing down the logger and libcurl under the thread that still runs it
// (a stopping daemon once did: a heap-use-after-free under ASan in the store stress). The next one finishes the job.
TEST_F(SupervisorTest, ADaemonStoppedWhileARequestHangsAbandonsItAndExitsZero) {
  RefusingProxy proxy(mock->port());
  const auto held = create_with_held_request(proxy, CreateHold::before_sending, training(60, 2));
  const auto first = held.first;
  const auto id = held.second;
  ASSERT_EQ(proxy.held(), 1);
  daemons[first]->send(SIGTERM);
  EXPECT_EQ(daemons[first]->finish(), 0);
  const auto log = file_text(dir / "daemon-0.log");
  EXPECT_NE(log.find("1 operation(s) still running are abandoned"), std::string::npos) << log;
  EXPECT_NE(log.find("supervisor stats:"), std::string::npos) << "the log was flushed before the exit";
  EXPECT_EQ(log.find("ERROR: AddressSanitizer"), std::string::npos) << log;

  start_daemon();
  const auto done = wait_for(id, 0, 120);
  EXPECT_EQ(done.attempt, 1);
  EXPECT_EQ(metrics()["queuedResourcesCreated"], 1);
}

// tpu.queue_timeout reaches the API as queueingPolicy.validUntilDuration: the mock fails a request still waiting for
// capacity when it expires, and with no preemption budget left the job ends FAILED, saying why.
TEST_F(SupervisorTest, AQueueTimeoutReachesTheApiAndARequestThatOutwaitsItFailsTheJob) {
  ASSERT_EQ(http_call(*client, "PUT", "/mock/v1/capacity",
                      {{"zone", kZone}, {"generation", "v4"}, {"tier", "spot"}, {"chips", 0}}, mock->admin_headers())
                .status,
            200);
  start_daemon();
  const auto id =
      create(config(training(50, 2), "spot\n  queue_timeout: 1h", "v4-8", "recovery:\n  max_preemptions: 0\n"));
  // While it waits for capacity, the request the API holds carries the policy (an hour: 3.6 s at the mock's scale).
  ASSERT_TRUE(eventually(
      [&] {
        const auto attempts = db().attempts().of(id);
        if (attempts.empty()) {
          return false;
        }
        const auto qr = http_call(*client, "GET",
                                  "/v2/projects/jobman-mock/locations/us-central2-b/queuedResources/" +
                                      attempts.front().queued_resource,
                                  nullptr, {{"Authorization", "Bearer test-token"}});
        return qr.status == 200 && qr.body["state"]["state"] == "WAITING_FOR_RESOURCES" &&
               qr.body["queueingPolicy"]["validUntilDuration"] == "3600s";
      },
      kPatience));
  const auto done = wait_for(id, 4, 120);
  EXPECT_EQ(done.phase, Phase::failed);
  EXPECT_NE(done.phase_reason.find("validUntil deadline"), std::string::npos) << done.phase_reason;
  EXPECT_EQ(done.attempt, 1) << "no second request once the budget is spent";
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

TEST_F(SupervisorTest, CreateStartsTheBundledMockAndASupervisorAndSaysSoOnce) {
  env.erase("JOBMAN_API_ENDPOINT");
  env["JOBMAN_AUTOSTART"] = "1";
  const auto path = config(training(50, 2));
  auto first = jm({"create", path});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("bundled mock cloud"), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("started the supervisor"), std::string::npos) << first.err;
  auto second = jm({"create", path, "--wait"});
  EXPECT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.err.find("bundled mock cloud"), std::string::npos) << "said once: " << second.err;
  // The id on stdout; the job's outcome on stderr, possibly while its slice is still being released.
  EXPECT_EQ(second.out, "000002\n");
  EXPECT_NE(second.err.find("000002: SUCCEEDED"), std::string::npos) << second.err;
  const auto waited = jm({"wait", "1", "2", "--timeout", "120"});
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err;
  EXPECT_TRUE(fs::exists(home / "mock" / "server.json"));
  EXPECT_TRUE(fs::exists(home / "daemon.log"));
}

// validate and create ask the cloud what the zone offers (acceleratorTypes.list, runtimeVersions.list), keep the answer
// for a day, refuse what the zone lacks at its file, line and key, and say so when the cloud cannot be asked.
TEST_F(SupervisorTest, ValidateAndCreateCheckTheAcceleratorAndVersionAgainstTheZonesOffer) {
  const auto good = config("echo hi");
  const auto first = jm({"validate", good, "--json"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(json::parse(first.out)["offer_check"]["source"], "cloud") << first.out;
  const auto second = jm({"validate", good, "--json"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(json::parse(second.out)["offer_check"]["source"], "cache") << second.out;

  // This mock's zone has only v4: a v5p slice is not offered there. Nothing is recorded.
  const auto other = config("echo hi", "spot", "v5p-8");
  const auto refused = jm({"create", other});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find(other + ":4:16: tpu.accelerator: v5p-8 is not offered in us-central2-b (us-central2-b "
                                     "offers v4-8, v4-16"),
            std::string::npos)
      << refused.err;
  EXPECT_TRUE(db().jobs().list({}).empty());
  const auto version = jm({"create", good, "--set", "tpu.version=tpu-ubuntu2204-bse"});
  EXPECT_EQ(version.exit_code, 2) << version.err;
  EXPECT_NE(version.err.find("tpu.version: runtime version 'tpu-ubuntu2204-bse' does not exist in us-central2-b (did "
                             "you mean 'tpu-ubuntu2204-base'?)"),
            std::string::npos)
      << version.err;
  EXPECT_TRUE(db().jobs().list({}).empty());

  // A cloud that does not answer: the built-in catalog decides, and stderr says so.
  env["JOBMAN_API_ENDPOINT"] = "http://127.0.0.1:1";
  const auto offline = jm({"validate", good});
  EXPECT_EQ(offline.exit_code, 0) << offline.err;
  EXPECT_NE(offline.err.find("the cloud could not be asked what us-central2-b offers"), std::string::npos)
      << offline.err;
  EXPECT_NE(offline.err.find("checked against jobman's built-in catalog only"), std::string::npos) << offline.err;
}

// A supervisor that died (kill -9, a reboot) leaves its jobs frozen in the store. The next command that reads them
// notices that nobody drives them and starts a supervisor, or with autostart off says so.
TEST_F(SupervisorTest, ListAndShowStartASupervisorForJobsNobodyDrives) {
  const auto first = start_daemon();
  const auto id = create(config(training(400, 10)));
  ASSERT_TRUE(await_phase(id, Phase::running));
  const auto owner_before = db().leases().of(id)->owner;
  daemons[first]->send(SIGKILL);
  EXPECT_EQ(daemons[first]->finish(), 128 + SIGKILL);

  // While the dead supervisor's lease lasts, the job counts as driven: nothing is said.
  // Once it expires: with autostart off, list and show say so on stderr, their output unchanged.
  RunResult listed;
  ASSERT_TRUE(eventually(
      [&] {
        listed = jm({"list"});
        return listed.err.find("no supervisor") != std::string::npos;
      },
      kPatience));
  EXPECT_EQ(listed.exit_code, 0);
  EXPECT_NE(listed.err.find("1 unfinished job has no supervisor driving it, and autostart is off"), std::string::npos)
      << listed.err;
  EXPECT_NE(listed.out.find("RUNNING"), std::string::npos) << listed.out;
  const auto shown = jm({"show", std::to_string(id), "--json"});
  EXPECT_EQ(shown.exit_code, 0);
  EXPECT_NE(shown.err.find("autostart is off"), std::string::npos) << shown.err;
  EXPECT_EQ(nlohmann::json::parse(shown.out)["id"], id);
  EXPECT_EQ(db().leases().of(id)->owner, owner_before) << "nothing took the job over";

  // With autostart on, `list` starts a supervisor, which re-attaches to the running workload and finishes the job.
  env["JOBMAN_AUTOSTART"] = "1";
  const auto restarted = jm({"list", "--json"});
  EXPECT_EQ(restarted.exit_code, 0) << restarted.err;
  EXPECT_NE(restarted.err.find("1 unfinished job has no supervisor driving it; starting one"), std::string::npos)
      << restarted.err;
  EXPECT_NE(restarted.err.find("started the supervisor in the background"), std::string::npos) << restarted.err;
  EXPECT_EQ(nlohmann::json::parse(restarted.out).size(), 1U);
  ASSERT_TRUE(
      eventually([&] { return db().leases().of(id) && db().leases().of(id)->owner != owner_before; }, kPatience));
  // A second reader finds the supervisor alive: nothing more is said, and no second one starts.
  const auto again = jm({"list"});
  EXPECT_EQ(again.err, "");
  const auto done = wait_for(id, 0, 120);
  EXPECT_EQ(done.attempt, 1);
  EXPECT_EQ(done.preemptions, 0);
  EXPECT_EQ(checksums(id, 1, 1), std::vector<std::string>{uninterrupted_checksum(400)});
}

// Found by the chaos harness (seed 1002): one worker's stream broke off (its connection dropped) while the
// workload went on; when the workload finished, the job was recorded SUCCEEDED with that worker's log cut short,
// its last lines and checksum missing.
TEST_F(SupervisorTest, OutputABrokenStreamMissedIsFetchedBeforeTheAttemptIsRecordedAsOver) {
  // The first stream of worker 0 (its host key's alias ends in -0) is cut after a second, and the next one fails at
  // once as a dropped connection does (255); every other ssh runs normally.
  const std::string cut = (dir / "cut").string();
  const std::string dropped = (dir / "dropped").string();
  wrap_ssh(dir, env,
           "if [[ \"$*\" =~ HostKeyAlias=tpu\\.[0-9]+-0\\  && \"$*\" == *'tail -c'* ]]; then\n"
           "  if mkdir '" +
               cut + "' 2> /dev/null; then exec timeout -s KILL 1 /usr/bin/ssh \"$@\"; fi\n  if mkdir '" + dropped +
               "' 2> /dev/null; then echo closed >&2; exit 255; fi\nfi\n");
  start_daemon();
  const auto id = create(config(training(300, 10), "ondemand", "v4-16"));
  const auto done = wait_for(id, 0, 120);
  EXPECT_EQ(done.attempt, 1);
  ASSERT_TRUE(fs::exists(dir / "cut")) << "the stream was cut";
  ASSERT_TRUE(fs::exists(dir / "dropped")) << "the first fetch of the rest failed";
  const auto expected = uninterrupted_checksum(300);
  EXPECT_EQ(checksums(id, 1, 2), (std::vector<std::string>{expected, expected}));
  const auto log = file_text(worker_log(id, 1, 0));
  for (int step = 1; step <= 300; ++step) {
    const auto line = "\nstep=" + std::to_string(step) + " ";
    ASSERT_NE(log.find(line), std::string::npos) << "worker 0's line of step " << step;
    ASSERT_EQ(log.find(line), log.rfind(line)) << "worker 0's line of step " << step << " twice";
  }
}

// Found by the chaos harness (seed 2002): a job cleaned by `clean` (nothing of it in the cloud yet) between the
// supervisor's listing and its adoption made the supervisor exit with "no job". It must shrug and go on. And found
// by this test: a job cleaned while its slice was being requested left that slice behind (quota spent, and billed).
TEST_F(SupervisorTest, ADaemonSurvivesJobsCleanedWhileItAdoptsThem) {
  start_daemon();
  // A long config: the supervisor takes a while parsing it between taking the lease and recording the adoption,
  // which is when the clean must land.
  std::string vars = "vars:\n";
  for (int i = 0; i < 4000; ++i) {
    vars += "  v" + std::to_string(i) + ": value-" + std::to_string(i) + "\n";
  }
  const auto path = config("echo hi", "ondemand", "v4-8", vars);
  for (int round = 0; round < 20; ++round) {
    const auto id = create(path);
    const auto cleaned = jm({"clean", std::to_string(id), "--no-wait"});
    ASSERT_EQ(cleaned.exit_code, 0) << cleaned.err;
  }
  // Still alive, and still driving (it is the only supervisor): a job created now runs to the end. And nothing of
  // the cleaned jobs is left.
  const auto id = create(config(training(20, 1), "ondemand"));
  EXPECT_EQ(wait_for(id, 0, 120).phase, Phase::succeeded);
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
  EXPECT_LE(metrics().value("queuedResourcesCreated", 0), 21);
}

// ---- tpu.allocation_mode: tpu-vm: the node is created directly with nodes.create, without a queued resource ----

class TpuVmSupervisorTest : public SupervisorTest {
protected:
  // A config for a job in tpu-vm mode on `accelerator` with `pricing`, running `command`.
  std::string tpu_vm_config(const std::string& command, const std::string& pricing = "spot",
                            const std::string& accelerator = "v4-8") {
    return config(command, pricing + "\n  allocation_mode: tpu-vm", accelerator);
  }

  // How many requests of `method` the mock answered with `status`.
  int requests(const std::string& method, const std::string& status = "200") {
    const auto m = metrics();
    return m.contains("requests") && m["requests"].contains(method) ? m["requests"][method].value(status, 0) : 0;
  }

  // The node as the API shows it (null when it is gone).
  json node(const std::string& name) {
    const auto got =
        http_call(*client, "GET", "/v2/projects/jobman-mock/locations/" + std::string(kZone) + "/nodes/" + name,
                  nullptr, {{"Authorization", "Bearer test-token"}});
    return got.status == 200 ? got.body : json();
  }

  bool any_event(std::int64_t id, const std::function<bool(const domain::EventRecord&)>& match) {
    for (const auto& e : db().events().of(id)) {
      if (match(e)) {
        return true;
      }
    }
    return false;
  }
};

TEST_F(TpuVmSupervisorTest, ASpotJobRunsToSuccessOnANodeCreatedDirectly) {
  start_daemon();
  const auto id = create(tpu_vm_config(training(200, 2)));
  ASSERT_TRUE(await_phase(id, Phase::running)) << job(id).phase_reason;
  const auto name = node_of(id);
  const auto running = node(name);
  ASSERT_TRUE(running.is_object()) << "the node exists while the job runs";
  EXPECT_EQ(running["schedulingConfig"]["spot"], true) << running.dump();
  EXPECT_EQ(running["labels"]["jobman-job-id"], "000001");

  const auto done = wait_for(id, 0, 120);
  EXPECT_EQ(done.attempt, 1);
  EXPECT_EQ(done.exit_code, 0);
  EXPECT_EQ(checksums(id, 1, 1), std::vector<std::string>{uninterrupted_checksum(200)});
  const auto attempts = db().attempts().of(id);
  ASSERT_EQ(attempts.size(), 1U);
  EXPECT_TRUE(attempts[0].queued_resource.empty()) << "no queued resource in tpu-vm mode";
  EXPECT_EQ(attempts[0].node, "e2e-000001-a1");
  EXPECT_EQ(requests("nodes.create"), 1);
  EXPECT_EQ(requests("queuedResources.create"), 0);
  EXPECT_LE(requests("queuedResources.list"), 1)
      << "tpu-vm jobs are observed by listing nodes; only the orphan sweep at start lists queued resources";
  EXPECT_GT(requests("nodes.list"), 0);
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
  EXPECT_TRUE(eventually([&] { return db().attempts().of(id).back().released_ms.has_value(); }, kPatience));

  std::vector<Phase> phases;
  for (const auto& e : db().events().of(id)) {
    if (e.kind == "phase") {
      phases.push_back(*e.to);
    }
  }
  EXPECT_EQ(phases, (std::vector<Phase>{Phase::provisioning, Phase::setup, Phase::running, Phase::succeeded}));

  // show and show --json name the node, and no queued resource.
  const auto shown = jm({"show", std::to_string(id)});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("NODE"), std::string::npos) << shown.out;
  EXPECT_EQ(shown.out.find("QUEUED RESOURCE"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("e2e-000001-a1"), std::string::npos) << shown.out;
  const auto shown_json = json::parse(jm({"show", std::to_string(id), "--json"}).out);
  EXPECT_TRUE(shown_json["attempts"][0]["queued_resource"].is_null()) << shown_json["attempts"].dump();
  EXPECT_EQ(shown_json["attempts"][0]["node"], "e2e-000001-a1");
}

TEST_F(TpuVmSupervisorTest, PreemptibleAndOnDemandNodesCarryTheirPricingAndSucceed) {
  start_daemon();
  const auto preemptible = create(tpu_vm_config(training(1000, 10), "preemptible"));
  const auto ondemand = create(tpu_vm_config(training(100, 2), "ondemand"));
  ASSERT_TRUE(await_phase(preemptible, Phase::running)) << job(preemptible).phase_reason;
  ASSERT_TRUE(await_phase(ondemand, Phase::running)) << job(ondemand).phase_reason;
  const auto preemptible_node = node(node_of(preemptible));
  EXPECT_EQ(preemptible_node["schedulingConfig"].value("preemptible", false), true) << preemptible_node.dump();
  EXPECT_FALSE(preemptible_node["schedulingConfig"].value("spot", false));
  const auto ondemand_node = node(node_of(ondemand));
  EXPECT_FALSE(ondemand_node.contains("schedulingConfig") &&
               (ondemand_node["schedulingConfig"].value("spot", false) ||
                ondemand_node["schedulingConfig"].value("preemptible", false)))
      << ondemand_node.dump();
  ASSERT_TRUE(jm({"cancel", std::to_string(preemptible), "--no-wait"}).exit_code == 0);
  EXPECT_EQ(wait_for(ondemand).attempt, 1);
  EXPECT_EQ(checksums(ondemand, 1, 1), std::vector<std::string>{uninterrupted_checksum(100)});
  ASSERT_TRUE(await_phase(preemptible, Phase::cancelled));
  EXPECT_EQ(jm({"delete", std::to_string(preemptible)}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

} // namespace supervisor_e2e_test
} // namespace jobman::test
