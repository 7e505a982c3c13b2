// The task queue in the store: what a worker claims, in which order, and that no task is ever claimed twice.
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/store/queue.hpp"
#include "jobman/util/system.hpp"
#include "support/store_backends.hpp"
#include "support/temp_dir.hpp"

#include <atomic>
#include <gtest/gtest.h>
#include <set>
#include <thread>

namespace jobman::store {
namespace store_queue_test {

using domain::JobKind;
using domain::NewJob;
using domain::Phase;

NewJob task(const std::string& name, const std::string& accelerator = "v4-8", const std::string& zone = "",
            std::optional<domain::Pricing> pricing = std::nullopt, int priority = 0) {
  NewJob job;
  job.kind = JobKind::task;
  job.name = name;
  job.user = "alice";
  job.accelerator = accelerator;
  job.zone = zone;
  job.pricing = pricing;
  job.tpu_name = name;
  job.hosts = 1;
  job.priority = priority;
  job.max_failures = 3;
  job.config_yaml = "name: " + name + "\n";
  return job;
}

NewJob worker(const std::string& name, const std::string& accelerator = "v4-8") {
  NewJob job = task(name, accelerator, "us-central2-b", domain::Pricing::spot);
  job.kind = JobKind::worker;
  return job;
}

// A worker's offer of its slice.
WorkerOffer offer(std::int64_t id, const std::string& accelerator = "v4-8", const std::string& zone = "us-central2-b",
                  domain::Pricing pricing = domain::Pricing::spot) {
  WorkerOffer o;
  o.worker_id = id;
  o.accelerator = accelerator;
  o.zone = zone;
  o.pricing = pricing;
  o.placement =
      domain::Placement{"w-" + std::to_string(id), "w-" + std::to_string(id), zone, accelerator, 1, std::nullopt, {}};
  return o;
}

constexpr std::int64_t kTtl = 15'000;

// Lets a task go as its driver does after it ran: SUCCEEDED, its worker released.
void finish(JobStore& store, std::int64_t task) {
  domain::PhaseChange done;
  done.to = Phase::succeeded;
  done.reason = "done";
  done.release_worker = true;
  ASSERT_TRUE(store.jobs().transition(task, std::nullopt, done));
}

class TaskQueueTest : public test::StoreBackendTest {};

TEST_P(TaskQueueTest, AWorkerTakesTheHighestPriorityFirstThenTheOldestAndOneTaskAtATime) {
  auto store = open_store();
  const auto w = store.jobs().create({worker("w")}).front();
  const auto ids = store.jobs().create({task("a"), task("b"), task("urgent", "v4-8", "", std::nullopt, 5), task("c")});
  const auto now = util::now_ms();

  const auto first = store.queue().claim(offer(w), "sup", kTtl, now);
  ASSERT_EQ(first, ids[2]) << "priority 5 before the older priority 0 tasks";
  EXPECT_FALSE(store.queue().claim(offer(w), "sup", kTtl, now)) << "a worker holds one task at a time";
  EXPECT_EQ(store.queue().task_of_worker(w), ids[2]);

  const auto claimed = store.jobs().get(*first);
  EXPECT_EQ(claimed.phase, Phase::setup);
  EXPECT_EQ(claimed.worker_id, std::optional<std::int64_t>(w));
  ASSERT_EQ(store.attempts().of(*first).size(), 1U);
  const auto attempt = store.attempts().of(*first).front();
  EXPECT_EQ(attempt.worker_id, std::optional<std::int64_t>(w));
  EXPECT_EQ(attempt.queued_resource, "w-" + std::to_string(w));
  EXPECT_FALSE(attempt.holds_slice()) << "a task borrows its worker's slice";
  ASSERT_TRUE(store.leases().of(*first).has_value());
  EXPECT_EQ(store.leases().of(*first)->owner, "sup");

  finish(store, *first);
  EXPECT_FALSE(store.queue().task_of_worker(w));
  EXPECT_EQ(store.queue().claim(offer(w), "sup", kTtl, now), ids[0]) << "then FIFO";
  finish(store, ids[0]);
  EXPECT_EQ(store.queue().claim(offer(w), "sup", kTtl, now), ids[1]);
  EXPECT_EQ(store.queue().queued(), 1);
}

TEST_P(TaskQueueTest, ATaskRunsOnlyOnAWorkerOfItsAcceleratorAndOfItsZoneAndPricingWhenItNamesThem) {
  auto store = open_store();
  const auto workers = store.jobs().create({worker("v4"), worker("v5", "v5litepod-4"), worker("v4b")});
  const auto ids = store.jobs().create({task("needs-v5", "v5litepod-4"), task("east", "v4-8", "us-east1-d"),
                                        task("on-demand", "v4-8", "", domain::Pricing::ondemand)});
  const auto now = util::now_ms();
  EXPECT_FALSE(store.queue().claim(offer(workers[0]), "sup", kTtl, now)) << "nothing for a spot v4-8 in us-central2-b";
  EXPECT_EQ(store.queue().claim(offer(workers[1], "v5litepod-4"), "sup", kTtl, now), ids[0]);
  EXPECT_EQ(store.queue().claim(offer(workers[0], "v4-8", "us-east1-d"), "sup", kTtl, now), ids[1]);
  EXPECT_EQ(
      store.queue().claim(offer(workers[2], "v4-8", "us-central2-b", domain::Pricing::ondemand), "sup", kTtl, now),
      ids[2]);
}

TEST_P(TaskQueueTest, AnInterruptedTaskGoesToTheHeadOfTheQueueAndAPausedOneIsNotTaken) {
  auto store = open_store();
  const auto w = store.jobs().create({worker("w")}).front();
  const auto ids = store.jobs().create({task("first"), task("second"), task("third")});
  const auto now = util::now_ms();
  ASSERT_EQ(store.queue().claim(offer(w), "sup", kTtl, now), ids[0]);
  finish(store, ids[0]);
  ASSERT_EQ(store.queue().claim(offer(w), "sup", kTtl, now), ids[1]);

  domain::PhaseChange back;
  back.to = Phase::pending;
  back.reason = "worker preempted";
  back.release_worker = true;
  back.to_queue_head = true;
  back.add_preemptions = 1;
  ASSERT_TRUE(store.jobs().transition(ids[1], Phase::setup, back));
  const auto requeued = store.jobs().get(ids[1]);
  EXPECT_FALSE(requeued.worker_id.has_value());
  EXPECT_EQ(requeued.preemptions, 1);
  EXPECT_LT(requeued.queue_order, store.jobs().get(ids[2]).queue_order);

  // Paused (desired stop): the queue skips it.
  store.jobs().set_desired_state(ids[1], domain::DesiredState::stop, "pause");
  EXPECT_EQ(store.queue().claim(offer(w), "sup", kTtl, now), ids[2]);
  finish(store, ids[2]);
  EXPECT_FALSE(store.queue().claim(offer(w), "sup", kTtl, now));
  store.jobs().set_desired_state(ids[1], domain::DesiredState::run, "requeue");
  EXPECT_EQ(store.queue().claim(offer(w), "sup", kTtl, now), ids[1]);
  EXPECT_EQ(store.attempts().of(ids[1]).size(), 2U) << "the second run is the task's attempt 2";
}

TEST_P(TaskQueueTest, QueuedTasksAreNotAmongTheRecordsASupervisorDrivesUntilClaimed) {
  auto store = open_store();
  const auto w = store.jobs().create({worker("w")}).front();
  const auto ids = store.jobs().create({task("a"), task("b")});
  auto driven = store.leases().jobs_to_drive();
  ASSERT_EQ(driven.size(), 1U);
  EXPECT_EQ(driven.front().id, w);
  EXPECT_EQ(driven.front().kind, JobKind::worker);
  ASSERT_EQ(store.queue().claim(offer(w), "sup", kTtl, util::now_ms()), ids[0]);
  driven = store.leases().jobs_to_drive();
  ASSERT_EQ(driven.size(), 2U);
  EXPECT_EQ(driven.back().id, ids[0]);
  EXPECT_EQ(driven.back().kind, JobKind::task);
  // The attempt borrows the worker's slice: it is not a slice the store holds for the task.
  for (const auto& held : store.attempts().held_slices()) {
    EXPECT_NE(held.job_id, ids[0]);
  }
}

TEST(TaskQueue, ManyWorkersClaimingAtOnceFromSeveralConnectionsNeverShareATask) {
  test::TempDir dir;
  const auto path = dir / "jobman.db";
  std::vector<std::int64_t> workers;
  {
    auto store = JobStore::open(path);
    std::vector<NewJob> ws;
    for (int i = 0; i < 8; ++i) {
      ws.push_back(worker("w" + std::to_string(i)));
    }
    workers = store.jobs().create(ws);
    std::vector<NewJob> tasks;
    for (int i = 0; i < 200; ++i) {
      tasks.push_back(task("t" + std::to_string(i)));
    }
    store.jobs().create(tasks);
  }
  std::mutex mutex;
  std::vector<std::int64_t> claimed;
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    threads.emplace_back([&, i] {
      auto store = JobStore::open(path);
      const auto owner = "sup-" + std::to_string(i % 2); // Two supervisors' worth of workers.
      while (true) {
        const auto id = store.queue().claim(offer(workers[i]), owner, kTtl, util::now_ms());
        if (!id) {
          if (store.queue().queued() == 0) {
            return;
          }
          continue;
        }
        {
          const std::lock_guard lock(mutex);
          claimed.push_back(*id);
        }
        finish(store, *id);
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(claimed.size(), 200U);
  EXPECT_EQ(std::set<std::int64_t>(claimed.begin(), claimed.end()).size(), 200U) << "a task claimed twice";
}

TEST_P(TaskQueueTest, TheBoardShowsEveryTaskButTheQueuesTailWithTheIndexesTheCommandsResolve) {
  auto store = open_store();
  const auto w = store.jobs().create({worker("w")}).front();
  std::vector<NewJob> batch;
  for (int i = 0; i < 12; ++i) {
    batch.push_back(task("t" + std::to_string(i), "v4-8", "", std::nullopt, i == 9 ? 7 : 0));
  }
  const auto ids = store.jobs().create(batch);
  const auto now = util::now_ms();
  const auto running = store.queue().claim(offer(w), "sup", kTtl, now); // t9, priority 7.
  ASSERT_EQ(running, ids[9]);
  JobFilter all;
  all.kinds = {JobKind::task};
  const auto listed = store.jobs().list(all); // What `status --all-tasks` shows, and what a `#` resolves against.
  ASSERT_EQ(listed.size(), 12U);

  const auto board = store.queue().board(3, now);
  EXPECT_EQ(board.queued, 11);
  EXPECT_EQ(board.queued_shown, 3);
  std::vector<std::int64_t> shown;
  for (const auto& [index, job] : board.shown) {
    ASSERT_GE(index, 1U);
    ASSERT_LE(index, listed.size());
    EXPECT_EQ(listed[index - 1].id, job.id) << "the # of task " << job.name;
    shown.push_back(job.id);
  }
  // The running task, then the three that run next (t0, t1, t2: equal priority, oldest first), in id order.
  EXPECT_EQ(shown, (std::vector<std::int64_t>{ids[0], ids[1], ids[2], ids[9]}));

  const auto everything = store.queue().board(100, now);
  EXPECT_EQ(everything.queued_shown, 11);
  EXPECT_EQ(everything.shown.size(), 12U);
}

JOBMAN_STORE_BACKENDS(TaskQueueTest);

} // namespace store_queue_test
} // namespace jobman::store
