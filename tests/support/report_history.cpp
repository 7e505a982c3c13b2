#include "support/report_history.hpp"

#include "jobman/store/attempts.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/queue.hpp"
#include "jobman/util/system.hpp"

#include <stdexcept>
#include <string>

namespace jobman::test {

namespace {

using domain::JobKind;
using domain::Phase;

constexpr const char* kZone = "us-central2-b";

domain::NewJob new_job(const std::string& name, JobKind kind) {
  domain::NewJob job;
  job.kind = kind;
  job.name = name;
  job.user = "alice";
  job.accelerator = "v4-8";
  job.zone = kZone;
  job.pricing = domain::Pricing::spot;
  job.tpu_name = name;
  job.hosts = 1;
  job.max_failures = 3;
  job.config_yaml = "name: " + name + "\n";
  return job;
}

void move(store::JobStore& store, std::int64_t id, Phase to, bool release_worker = false) {
  domain::PhaseChange change;
  change.to = to;
  change.reason = "test";
  change.release_worker = release_worker;
  if (!store.jobs().transition(id, std::nullopt, change)) {
    throw std::runtime_error("job " + std::to_string(id) + " did not move");
  }
}

// A slice for attempt `number` of the job, up.
void slice_up(store::JobStore& store, std::int64_t id, int number) {
  const auto name = "slice-" + std::to_string(id) + "-" + std::to_string(number);
  store.attempts().begin(id, name, name, kZone);
  store.attempts().record_slice_active(id, number, {});
}

bool is_task(int i) {
  return i % 997 == 5;
}

} // namespace

ReportHistory add_report_history(store::JobStore& store, int count) {
  ReportHistory history;
  history.worker = store.jobs().create({new_job("pool", JobKind::worker)}).front();
  std::vector<domain::NewJob> jobs;
  for (int i = 0; i < count; ++i) {
    jobs.push_back(new_job("run-" + std::to_string(i), is_task(i) ? JobKind::task : JobKind::job));
  }
  history.jobs = store.jobs().create(jobs);
  slice_up(store, history.worker, 1);
  move(store, history.worker, Phase::running);
  store::WorkerOffer offer;
  offer.worker_id = history.worker;
  offer.accelerator = "v4-8";
  offer.zone = kZone;
  offer.pricing = domain::Pricing::spot;
  offer.placement = domain::Placement{"pool", "pool", kZone, "v4-8", 1, std::nullopt, {}};
  for (int i = 0; i < count; ++i) {
    const auto id = history.jobs[static_cast<std::size_t>(i)];
    if (is_task(i)) {
      if (store.queue().claim(offer, "test", 15'000, util::now_ms()) != id) {
        throw std::runtime_error("the worker did not claim task " + std::to_string(id));
      }
      move(store, id, Phase::succeeded, true);
      continue;
    }
    if (i % 7 != 0) {
      continue;
    }
    slice_up(store, id, 1);
    move(store, id, Phase::running);
    int attempt = 1;
    if (i % 3 == 0) {
      move(store, id, Phase::recovering);
      store.attempts().end(id, 1, domain::AttemptOutcome::preempted, std::nullopt);
      slice_up(store, id, ++attempt);
      move(store, id, Phase::running);
    }
    if (i % 2 == 0) {
      store.attempts().end(id, attempt, domain::AttemptOutcome::succeeded, 0);
      move(store, id, Phase::succeeded);
    }
  }
  return history;
}

} // namespace jobman::test
