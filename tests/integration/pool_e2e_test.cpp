// Workers and tasks driven end to end by `jobman daemon` against a real jobman-mock-cloud: workers keep slices and
// run the queue's #JOBMAN scripts and configs one at a time, a preempted worker's task goes back to the head of the
// queue and resumes from its checkpoint, and deleting the workers releases every slice.
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/queue.hpp"
#include "support/supervisor_home.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

namespace jobman::test {
namespace pool_e2e_test {

namespace fs = std::filesystem;
using domain::JobKind;
using domain::Phase;
using nlohmann::json;

class PoolTest : public SupervisorHome {
protected:
  // A v4 zone for most workers, and a v5litepod zone for the pool that mixes accelerators.
  PoolTest()
      : SupervisorHome("  us-central2-b:\n    v4:\n      spot: {chips: 64}\n      on_demand: {chips: 32}\n"
                       "  us-central1-a:\n    v5litepod:\n      spot: {chips: 16}\n") {}

  // A worker with the bucket mounted at ~/bucket (where training tasks keep their checkpoints); returns its id.
  std::int64_t start_worker(const std::string& name, const std::string& accelerator = "v4-8",
                            const std::string& pricing = "spot", const std::string& zone = kZone) {
    const auto config = dir.write(name + ".yaml", "job:\n  name: " + name + "\ntpu:\n  accelerator: " + accelerator +
                                                      "\n  zone: " + zone + "\n  pricing: " + pricing +
                                                      "\ngcsfuse:\n  bucket_name: pool-bucket\n"
                                                      "  mount_path: ~/bucket\n"
                                                      "command:\n  cmd: '# a worker'\n");
    const auto r = jm({"worker", "start", "--config", config.string(), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out, nullptr, false).value("id", std::int64_t{0});
  }

  // Queues the script `body` with `headers` (#JOBMAN lines); returns the task's id.
  std::int64_t submit(const std::string& name, const std::string& headers, const std::string& body) {
    const auto script = dir.write(name + ".sh", "#!/bin/bash\n" + headers + body + "\n");
    const auto r = jm({"task", "submit", script.string(), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto out = json::parse(r.out, nullptr, false);
    return out.is_array() && !out.empty() ? out[0].value("id", std::int64_t{0}) : 0;
  }

  // submit() as `user` (the login name a SQLite store records).
  std::int64_t submit_as(const std::string& user, const std::string& name, const std::string& headers,
                         const std::string& body) {
    const auto script = dir.write(name + ".sh", "#!/bin/bash\n" + headers + body + "\n");
    auto as_user = env;
    as_user["USER"] = user;
    const auto r = run_jobman({"task", "submit", script.string(), "--json"}, RunOptions{as_user, "", ""});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto out = json::parse(r.out, nullptr, false);
    return out.is_array() && !out.empty() ? out[0].value("id", std::int64_t{0}) : 0;
  }

  static std::string training(int steps, int step_ms) {
    return "systolic-train --steps " + std::to_string(steps) + " --step-time-ms " + std::to_string(step_ms) +
           " --ckpt-dir ~/bucket/ckpt-$JOBMAN_TASK_ID --ckpt-every 20";
  }

  // No two task attempts overlapped on one worker's slice, and no task ran on two workers at once: the attempts'
  // intervals, from the store, for every task.
  void expect_no_overlap(const std::vector<std::int64_t>& tasks) {
    struct Run {
      std::int64_t task;
      std::int64_t worker;
      std::int64_t start;
      std::int64_t end;
    };
    std::vector<Run> runs;
    for (const auto id : tasks) {
      for (const auto& a : db().attempts().of(id)) {
        ASSERT_TRUE(a.worker_id.has_value()) << "task " << id << " attempt " << a.number << " names no worker";
        ASSERT_TRUE(a.ended_ms.has_value()) << "task " << id << " attempt " << a.number << " never ended";
        runs.push_back({id, *a.worker_id, a.started_ms, *a.ended_ms});
      }
    }
    for (std::size_t i = 0; i < runs.size(); ++i) {
      for (std::size_t j = i + 1; j < runs.size(); ++j) {
        const auto& a = runs[i];
        const auto& b = runs[j];
        const bool overlap = a.start < b.end && b.start < a.end;
        if ((a.worker == b.worker || a.task == b.task) && overlap) {
          ADD_FAILURE() << "task " << a.task << " on worker " << a.worker << " and task " << b.task << " on worker "
                        << b.worker << " overlap";
        }
      }
    }
  }
};

TEST_F(PoolTest, AWorkerRunsTheQueueOneTaskAtATimeAndRetriesAFailedOne) {
  start_daemon();
  const auto worker = start_worker("pool-a");
  ASSERT_GT(worker, 0);
  const std::string v4 = "#JOBMAN --accelerator=v4-8\n#JOBMAN --zone=us-central2-b\n";
  const auto hello = submit("hello", v4 + "#JOBMAN --name=hello\n",
                            "echo \"hello from task $JOBMAN_TASK_ID on $JOBMAN_TPU_NAME host $JOBMAN_WORKER_ID of "
                            "$JOBMAN_NUM_WORKERS\"");
  // Fails its first run (a marker in the bucket remembers it), then succeeds: one retry spent.
  const auto flaky = submit("flaky", v4 + "#JOBMAN --max-retries=2\n",
                            "if [ ! -e ~/bucket/flaky-ran ]; then touch ~/bucket/flaky-ran; echo failing once; "
                            "exit 3; fi\necho second run resume=$JOBMAN_RESUME");
  const auto doomed = submit("doomed", v4 + "#JOBMAN --max-retries=1\n", "echo always failing; exit 7");
  const auto train = submit("train", v4, training(120, 2));
  const std::vector<std::int64_t> tasks = {hello, flaky, doomed, train};

  for (const auto id : {hello, flaky, train}) {
    ASSERT_TRUE(await_phase(id, Phase::succeeded)) << id << ": " << job(id).phase_reason;
  }
  ASSERT_TRUE(await_phase(doomed, Phase::failed)) << job(doomed).phase_reason;

  char padded[16];
  std::snprintf(padded, sizeof padded, "%06lld", static_cast<long long>(hello));
  EXPECT_NE(file_text(worker_log(hello, 1)).find(std::string("hello from task ") + padded + " on pool-a-"),
            std::string::npos)
      << file_text(worker_log(hello, 1));
  EXPECT_EQ(job(flaky).failures, 1);
  EXPECT_EQ(db().attempts().of(flaky).size(), 2U);
  EXPECT_NE(file_text(worker_log(flaky, 2)).find("second run resume=1"), std::string::npos);
  EXPECT_EQ(job(doomed).failures, 2) << "max-retries 1: one retry, then FAILED";
  EXPECT_EQ(db().attempts().of(doomed).size(), 2U);
  EXPECT_EQ(checksums(train, 1, 1).front(), uninterrupted_checksum(120));
  // Every run borrowed the worker's one slice; none overlapped another.
  const auto worker_slice = db().attempts().of(worker).back().queued_resource;
  for (const auto id : tasks) {
    for (const auto& a : db().attempts().of(id)) {
      EXPECT_EQ(a.worker_id, std::optional<std::int64_t>(worker));
      EXPECT_EQ(a.queued_resource, worker_slice);
    }
  }
  expect_no_overlap(tasks);
  EXPECT_EQ(db().attempts().of(worker).size(), 1U) << "the worker kept its slice";

  // status: both tables, from the store.
  const auto status = jm({"status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("=== Workers ==="), std::string::npos);
  EXPECT_NE(status.out.find("pool-a"), std::string::npos);
  EXPECT_NE(status.out.find("READY"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("=== Tasks ==="), std::string::npos);
  EXPECT_NE(status.out.find("2/1"), std::string::npos) << "doomed's RETRY column\n" << status.out;
  // `jobman logs` works on a task.
  const auto logs = jm({"logs", std::to_string(hello)});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("hello from task"), std::string::npos);
  // `worker sync` asks the cloud: the slice is ACTIVE and its node READY, as the supervisor recorded already.
  const auto synced = jm({"worker", "sync", "--json"});
  ASSERT_EQ(synced.exit_code, 0) << synced.err;
  const auto sync_rows = json::parse(synced.out)["workers"];
  ASSERT_EQ(sync_rows.size(), 1U) << synced.out;
  EXPECT_EQ(sync_rows[0]["slice"], worker_slice);
  EXPECT_EQ(sync_rows[0]["qr"], "ACTIVE");
  EXPECT_EQ(sync_rows[0]["vm"], "READY");
  EXPECT_EQ(sync_rows[0]["changed"], false);

  const auto deleted = jm({"worker", "delete", "--all"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.out << deleted.err;
  EXPECT_EQ(job(worker).phase, Phase::deleted);
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

TEST_F(PoolTest, AnIdleWorkerReleasesItsSliceAndAQueuedTaskBringsANewOne) {
  start_daemon();
  // --idle-release 10m: 0.6 s at the tests' time scale.
  const auto started =
      jm({"worker", "start", "-a", "v4-8", "-z", kZone, "-n", "idler", "--idle-release", "10m", "--json"});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  const auto worker = json::parse(started.out).value("id", std::int64_t{0});
  const auto idle = [&] {
    const auto w = job(worker);
    return w.phase == Phase::pending && w.phase_reason.starts_with("idle: no task for 10m");
  };
  ASSERT_TRUE(eventually(idle, kPatience)) << job(worker).phase_reason;
  ASSERT_EQ(db().attempts().of(worker).size(), 1U);
  EXPECT_EQ(db().attempts().of(worker).front().outcome, domain::AttemptOutcome::idle);
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
  // Recorded released once a listing shows it gone.
  EXPECT_TRUE(eventually([&] { return db().attempts().of(worker).front().released_ms.has_value(); }, kPatience));
  const auto status = jm({"status", "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(json::parse(status.out)["workers"][0].value("process", ""), "IDLE") << status.out;

  // A task for it: the worker asks for a slice again, sets it up and runs the task there.
  const auto hello = submit("hello", "#JOBMAN --accelerator=v4-8\n", "echo hello on $JOBMAN_TPU_NAME");
  ASSERT_TRUE(await_phase(hello, Phase::succeeded)) << job(hello).phase_reason;
  const auto slices = db().attempts().of(worker);
  ASSERT_GE(slices.size(), 2U);
  EXPECT_EQ(db().attempts().of(hello).front().queued_resource, slices[1].queued_resource);
  EXPECT_NE(slices[1].queued_resource, slices[0].queued_resource);
  bool said_why = false;
  for (const auto& e : db().events().of(worker)) {
    said_why = said_why || e.message.find(" is queued for it: requesting a slice again") != std::string::npos;
  }
  EXPECT_TRUE(said_why);
  // Idle again after the task, and released again.
  ASSERT_TRUE(eventually(idle, kPatience)) << job(worker).phase_reason;
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
  EXPECT_EQ(jm({"worker", "delete", "--all"}).exit_code, 0);
  EXPECT_EQ(job(worker).phase, Phase::deleted);
}

TEST_F(PoolTest, APreemptedWorkersTaskGoesBackToTheHeadOfTheQueueAndResumesFromItsCheckpoint) {
  start_daemon();
  const auto worker = start_worker("pool-b");
  const std::string v4 = "#JOBMAN --accelerator=v4-8\n";
  const auto train = submit("train", v4, training(300, 10));
  const auto later = submit("later", v4, "echo later");
  ASSERT_TRUE(
      eventually([&] { return file_text(worker_log(train, 1)).find("step=100 ") != std::string::npos; }, kPatience))
      << job(train).phase_reason;
  const auto node = db().attempts().of(worker).back().node;
  ASSERT_TRUE(preempt(node));

  ASSERT_TRUE(await_phase(train, Phase::succeeded)) << job(train).phase_reason;
  ASSERT_TRUE(await_phase(later, Phase::succeeded)) << job(later).phase_reason;
  const auto attempts = db().attempts().of(train);
  ASSERT_EQ(attempts.size(), 2U);
  EXPECT_EQ(attempts[0].outcome, domain::AttemptOutcome::preempted);
  EXPECT_EQ(attempts[1].outcome, domain::AttemptOutcome::succeeded);
  EXPECT_NE(attempts[0].queued_resource, attempts[1].queued_resource) << "the worker's new slice";
  EXPECT_EQ(job(train).preemptions, 1);
  EXPECT_EQ(job(train).failures, 0);
  // Back at the head of the queue: it ran again before the task queued after it.
  EXPECT_LT(attempts[1].started_ms, db().attempts().of(later).front().started_ms);
  EXPECT_NE(file_text(worker_log(train, 2)).find("resumed from step="), std::string::npos);
  EXPECT_EQ(checksums(train, 2, 1).front(), uninterrupted_checksum(300));
  EXPECT_EQ(job(worker).phase, Phase::running);
  EXPECT_EQ(job(worker).preemptions, 1);
  expect_no_overlap({train, later});

  EXPECT_EQ(jm({"worker", "delete", "pool-b"}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

TEST_F(PoolTest, DeletingABusyWorkerRequeuesItsTaskOnAnotherAndPauseHoldsATaskBack) {
  start_daemon();
  const auto first = start_worker("pool-c1");
  ASSERT_TRUE(await_phase(first, Phase::running));
  const std::string v4 = "#JOBMAN --accelerator=v4-8\n";
  // Steps of 60 ms: the task still trains when its worker is deleted, however long the second worker takes to come up.
  const auto train = submit("train", v4, training(300, 60));
  ASSERT_TRUE(
      eventually([&] { return file_text(worker_log(train, 1)).find("step=40 ") != std::string::npos; }, kPatience));
  // A task paused while queued is never taken; requeued, it runs.
  const auto held = submit("held", v4, "echo held back");
  const auto paused = jm({"task", "pause", "held"}); // By name: a number of up to 5 digits is an index.
  EXPECT_EQ(paused.exit_code, 0) << paused.err;
  EXPECT_EQ(job(held).phase, Phase::cancelled);

  const auto second = start_worker("pool-c2", "v4-8", "ondemand");
  ASSERT_TRUE(await_phase(second, Phase::running));
  const auto deleted = jm({"worker", "delete", "pool-c1"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.out << deleted.err;
  ASSERT_TRUE(await_phase(train, Phase::succeeded)) << job(train).phase_reason;
  const auto attempts = db().attempts().of(train);
  ASSERT_EQ(attempts.size(), 2U);
  EXPECT_EQ(attempts[0].worker_id, std::optional<std::int64_t>(first));
  EXPECT_EQ(attempts[0].outcome, domain::AttemptOutcome::interrupted);
  EXPECT_EQ(attempts[1].worker_id, std::optional<std::int64_t>(second));
  EXPECT_EQ(checksums(train, 2, 1).front(), uninterrupted_checksum(300));
  EXPECT_EQ(job(held).phase, Phase::cancelled) << "a paused task stays paused";

  EXPECT_EQ(jm({"task", "requeue", "held"}).exit_code, 0);
  ASSERT_TRUE(await_phase(held, Phase::succeeded)) << job(held).phase_reason;
  expect_no_overlap({train, held});
  EXPECT_EQ(jm({"worker", "delete", "--all"}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

// The proof: three workers (a spot v4-8, an on-demand v4-8 and a spot v5litepod-4), forty tasks of every kind
// (#JOBMAN scripts and configs, a sweep, tasks that fail once, tasks that always fail, training with checkpoints),
// and preemptions of the spot workers' slices while they run tasks. Every task ends as its script implies, no two
// runs overlap on a worker and no task runs twice at once (from the attempts), every training task ends with the
// uninterrupted run's checksum, and `worker delete --all` leaves the mock empty.
TEST_F(PoolTest, FortyMixedTasksOnThreeWorkersThroughPreemptionsEndAsTheirScriptsSay) {
  start_daemon();
  const auto spot = start_worker("spot-v4");
  const auto ondemand = start_worker("ondemand-v4", "v4-8", "ondemand");
  const auto v5 = start_worker("spot-v5", "v5litepod-4", "spot", "us-central1-a");
  ASSERT_GT(spot, 0);
  ASSERT_GT(ondemand, 0);
  ASSERT_GT(v5, 0);

  std::map<std::int64_t, Phase> expected;
  std::vector<std::int64_t> training_tasks;
  const std::string v4 = "#JOBMAN --accelerator=v4-8\n";
  const std::string v5h = "#JOBMAN --accelerator=v5litepod-4\n#JOBMAN --zone=us-central1-a\n";
  for (int i = 0; i < 12; ++i) {
    expected[submit("echo-" + std::to_string(i), v4, "echo task $JOBMAN_TASK_ID; sleep 0.$((RANDOM % 5))")] =
        Phase::succeeded;
  }
  for (int i = 0; i < 8; ++i) {
    expected[submit("v5-" + std::to_string(i), v5h, "echo on $JOBMAN_ACCELERATOR; sleep 0.3")] = Phase::succeeded;
  }
  for (int i = 0; i < 6; ++i) {
    const auto marker = "~/bucket/once-" + std::to_string(i);
    expected[submit("once-" + std::to_string(i), v4 + "#JOBMAN --max-retries=2\n",
                    "if [ ! -e " + marker + " ]; then touch " + marker + "; exit 5; fi; echo fine")] = Phase::succeeded;
  }
  for (int i = 0; i < 2; ++i) {
    expected[submit("broken-" + std::to_string(i), v4 + "#JOBMAN --max-retries=1\n", "exit 9")] = Phase::failed;
  }
  for (int i = 0; i < 4; ++i) {
    const auto id = submit("train-" + std::to_string(i), v4 + "#JOBMAN --priority=1\n", training(200, 10));
    expected[id] = Phase::succeeded;
    training_tasks.push_back(id);
  }
  // Configs: a sweep of six, two of them training.
  const auto config =
      dir.write("sweep.yaml", "job:\n  name: cfg\ntpu:\n  accelerator: v4-8\n  zone: " + std::string(kZone) +
                                  "\ncommand:\n  cmd: |\n    if [ ${vars.i} -lt 2 ]; then " + training(200, 10) +
                                  "; else echo config ${vars.i}; fi\n"
                                  "vars:\n  i: 0\n");
  const auto swept = jm({"task", "submit", config.string(), "--sweep", "vars.i=0,1,2,3,4,5", "--json"});
  ASSERT_EQ(swept.exit_code, 0) << swept.err;
  const auto sweep_ids = json::parse(swept.out);
  ASSERT_EQ(sweep_ids.size(), 6U);
  for (std::size_t i = 0; i < sweep_ids.size(); ++i) {
    const auto id = sweep_ids[i]["id"].get<std::int64_t>();
    expected[id] = Phase::succeeded;
    if (i < 2) {
      training_tasks.push_back(id);
    }
  }
  // Two more training scripts with checkpoints every 20 steps, at the default priority.
  for (int i = 4; i < 6; ++i) {
    const auto id = submit("train-" + std::to_string(i), v4, training(200, 10));
    expected[id] = Phase::succeeded;
    training_tasks.push_back(id);
  }
  ASSERT_EQ(expected.size(), 40U);

  // Preempt the spot workers' slices while they run tasks, until six preemptions are done.
  const auto unfinished = [&] {
    return std::count_if(expected.begin(), expected.end(),
                         [&](const auto& e) { return !domain::is_terminal(job(e.first).phase); });
  };
  int preemptions = 0;
  const std::vector<std::pair<std::int64_t, std::string>> spot_workers = {{spot, kZone}, {v5, "us-central1-a"}};
  for (int round = 0; preemptions < 6 && unfinished() > 0 && round < 800; ++round) {
    const auto& [worker, zone] = spot_workers[static_cast<std::size_t>(round) % spot_workers.size()];
    const auto busy = db().queue().task_of_worker(worker);
    if (busy && job(*busy).phase == Phase::running && job(worker).phase == Phase::running) {
      if (preempt(db().attempts().of(worker).back().node, zone)) {
        ++preemptions;
        // The next only once this worker serves again.
        eventually([&] { return job(worker).phase != Phase::running; }, kPatience);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
  }
  EXPECT_GE(preemptions, 3) << "too few preemptions landed on a busy worker";

  for (const auto& [id, phase] : expected) {
    ASSERT_TRUE(eventually([&] { return domain::is_terminal(job(id).phase); }, std::chrono::seconds(300)))
        << "task " << id << " is still " << domain::to_string(job(id).phase) << ": " << job(id).phase_reason;
    EXPECT_EQ(job(id).phase, phase) << "task " << id << " " << job(id).name << ": " << job(id).phase_reason;
  }
  std::vector<std::int64_t> all;
  for (const auto& [id, phase] : expected) {
    all.push_back(id);
    // Each ran on a worker of its accelerator.
    for (const auto& a : db().attempts().of(id)) {
      ASSERT_TRUE(a.worker_id.has_value());
      EXPECT_EQ(job(*a.worker_id).accelerator, job(id).accelerator) << "task " << id;
    }
  }
  expect_no_overlap(all);
  const auto expected_sum = uninterrupted_checksum(200);
  for (const auto id : training_tasks) {
    EXPECT_EQ(checksums(id, job(id).attempt, 1).front(), expected_sum) << "task " << id << " " << job(id).name;
  }
  int interrupted_runs = 0;
  for (const auto id : all) {
    interrupted_runs += job(id).preemptions;
  }
  // A preemption may land as a task ends; most send one back to the queue.
  EXPECT_GE(interrupted_runs, 1) << "the preemptions sent tasks back to the queue";

  const auto deleted = jm({"worker", "delete", "--all"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.out << deleted.err;
  for (const auto w : {spot, ondemand, v5}) {
    EXPECT_EQ(job(w).phase, Phase::deleted);
  }
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

TEST_F(PoolTest, AUsersTasksBeyondTheirShareWaitInTheQueueWhileAnotherUsersRun) {
  // One v4-8 (4 chips) a user, on a pool of two.
  ASSERT_EQ(jm({"store", "share", "v4:spot", "4"}).exit_code, 0);
  start_daemon();
  const auto w1 = start_worker("share-a");
  const auto w2 = start_worker("share-b");
  ASSERT_GT(w1, 0);
  ASSERT_GT(w2, 0);
  const std::string v4 = "#JOBMAN --accelerator=v4-8\n";
  // alice queues two, bob one after them: bob's does not wait behind hers. Her first is the longer, so that her
  // second waits long enough for `status` to be seen saying why on a loaded machine.
  const std::vector<int> steps = {800, 200};
  std::vector<std::int64_t> alices;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    alices.push_back(submit_as("alice", "alice-" + std::to_string(i), v4, training(steps[i], 10)));
  }
  const auto bobs = submit_as("bob", "bob-0", v4, training(200, 10));

  // While her first runs, her next ones wait in the queue, and `status` says why.
  const std::string why = "alice holds 4 of their 4 v4 spot chips";
  std::string seen;
  ASSERT_TRUE(eventually(
      [&] {
        const auto status = jm({"status", "--json"});
        const auto rows = json::parse(status.out, nullptr, false);
        if (!rows.is_object()) {
          return false;
        }
        for (const auto& row : rows["tasks"]) {
          if (row.value("user", "") == "alice" && row["waiting_for"].is_string()) {
            seen = jm({"status"}).out;
            return row["waiting_for"] == why;
          }
        }
        return false;
      },
      kPatience));
  EXPECT_NE(seen.find("WAITING FOR"), std::string::npos) << seen;
  for (const auto id : alices) {
    ASSERT_TRUE(await_phase(id, Phase::succeeded)) << id << ": " << job(id).phase_reason;
  }
  ASSERT_TRUE(await_phase(bobs, Phase::succeeded)) << job(bobs).phase_reason;

  // alice never held two workers at once; bob's task started before her second.
  std::vector<std::pair<std::int64_t, std::int64_t>> hers;
  for (const auto id : alices) {
    for (const auto& a : db().attempts().of(id)) {
      ASSERT_TRUE(a.ended_ms.has_value());
      hers.emplace_back(a.started_ms, *a.ended_ms);
    }
  }
  for (std::size_t i = 0; i < hers.size(); ++i) {
    for (std::size_t j = i + 1; j < hers.size(); ++j) {
      EXPECT_FALSE(hers[i].first < hers[j].second && hers[j].first < hers[i].second)
          << "two of alice's tasks ran at once, over her share";
    }
  }
  EXPECT_LT(db().attempts().of(bobs).front().started_ms, db().attempts().of(alices[1]).front().started_ms);
  expect_no_overlap({alices[0], alices[1], bobs});
  const std::vector<std::pair<std::int64_t, int>> runs = {{alices[0], steps[0]}, {alices[1], steps[1]}, {bobs, 200}};
  for (const auto& [id, count] : runs) {
    EXPECT_EQ(checksums(id, static_cast<int>(db().attempts().of(id).size()), 1).front(), uninterrupted_checksum(count));
  }
  EXPECT_EQ(jm({"worker", "delete", "--all"}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

TEST_F(PoolTest, AJobBeyondTheLabsCapWaitsBeforeAskingForASlice) {
  ASSERT_EQ(jm({"store", "cap", "v4:spot", "4"}).exit_code, 0);
  const auto limits = jm({"store", "limits", "--json"});
  ASSERT_EQ(limits.exit_code, 0) << limits.err;
  EXPECT_EQ(json::parse(limits.out)["tiers"][0]["lab_cap"], 4) << limits.out;
  start_daemon();
  const auto first = create(config(SupervisorHome::training(300, 10)));
  const auto second = create(config(SupervisorHome::training(100, 5)));
  // The second waits in the store, asking the cloud for nothing, and says why.
  const std::string why = "waiting for its share of chips: the lab holds 4 of its 4 v4 spot chips";
  ASSERT_TRUE(eventually([&] { return job(second).phase_reason == why; }, kPatience)) << job(second).phase_reason;
  EXPECT_EQ(job(second).phase, Phase::pending);
  EXPECT_TRUE(db().attempts().of(second).empty());
  const auto shown = jm({"show", std::to_string(second)});
  EXPECT_NE(shown.out.find("the lab holds 4 of its 4 v4 spot chips"), std::string::npos) << shown.out;

  wait_for(first);
  wait_for(second);
  // Its slice was asked for once the first one's was gone.
  const auto released = db().attempts().of(first).back().released_ms;
  ASSERT_TRUE(released.has_value());
  EXPECT_GE(db().attempts().of(second).front().started_ms, *released);
  EXPECT_EQ(checksums(second, 1, 1).front(), uninterrupted_checksum(100));
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

} // namespace pool_e2e_test
} // namespace jobman::test
