#include "rig.hpp"

#include "jobman/config/loader.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/store/queue.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "observe.hpp"

#include <spdlog/spdlog.h>

namespace jobman::test {

using core::supervision::Driven;

namespace {

// The cloud the driver is told it reaches: the project and the settings only (the fakes answer every call).
std::shared_ptr<const core::CloudAccess> fake_access() {
  auto access = std::make_shared<core::CloudAccess>();
  access->mock = false;
  access->settings.cloud = config::CloudKind::google; // gcloud is named, never looked for: the fakes answer.
  access->project = "test-project";
  access->gcloud = "gcloud";
  return access;
}

constexpr std::int64_t kLeaseMs = 60'000;

} // namespace

// ---- FakeHost ----

void FakeHost::read_jobs() {
  std::set<std::int64_t> present;
  for (auto& row : store_.leases().jobs_to_drive()) {
    present.insert(row.id);
    if (Driven* d = find(row.id)) {
      driver_->take_news(*d, std::move(row));
    } else {
      adopt(row);
    }
  }
  for (const auto& [id, d] : driven_) {
    if (!present.contains(id)) {
      to_drop_.insert(id);
    }
  }
}

void FakeHost::adopt(const domain::JobRecord& row) {
  if (!store_.leases().try_acquire(row.id, owner_, kLeaseMs, now_ms_)) {
    return;
  }
  Driven& d = driven_[row.id];
  const auto fresh = store_.jobs().get(row.id, true);
  const Driven* worker = fresh.worker_id ? find(*fresh.worker_id) : nullptr;
  core::supervision::load_driven(d, fresh, store_, worker);
}

void FakeHost::dispatch(Driven& d, core::supervision::Work work) {
  d.busy = true;
  operations_.push_back({d.job.id, std::move(work)});
  if (on_dispatch) {
    on_dispatch(d.job.id);
  }
}

void FakeHost::watch_in_background(std::int64_t id, core::supervision::Work watch) {
  watches_.push_back({id, std::move(watch)});
}

void FakeHost::post(std::int64_t id, std::function<void()> apply) {
  results_.push_back({id, std::move(apply), false});
}

std::optional<std::int64_t> FakeHost::claim(Driven& worker, const store::WorkerOffer& offer) {
  const auto id = store_.queue().claim(offer, owner_, kLeaseMs, now_ms_);
  if (!id) {
    return std::nullopt;
  }
  if (auto row = store_.jobs().find(*id)) {
    adopt(*row);
  }
  worker.dirty = true;
  return id;
}

Driven* FakeHost::find(std::int64_t id) {
  auto it = driven_.find(id);
  return it == driven_.end() ? nullptr : &it->second;
}

std::chrono::milliseconds FakeHost::scaled(double seconds) const {
  return std::chrono::milliseconds(static_cast<long long>(std::max(1.0, seconds * 1000.0)));
}

void FakeHost::lose_lease(std::int64_t id) {
  if (Driven* d = find(id)) {
    d->lost = true;
    if (!d->busy) {
      driver_->stop_stream(*d);
      driven_.erase(id);
    }
  }
}

void FakeHost::lease_taken(Driven& d) {
  if (!d.lost) {
    d.lost = true;
    leases_taken_.push_back(d.job.id);
  }
}

void FakeHost::apply(Result& result) {
  auto it = driven_.find(result.id);
  if (it != driven_.end() && it->second.lost) {
    // As the loop does: what this supervisor learnt is not its to record once another took the job.
    if (result.ends_operation) {
      it->second.busy = false;
      driver_->stop_stream(it->second);
      driven_.erase(it);
      if (!store_.jobs().find(result.id)) {
        result.apply();
      }
    }
    return;
  }
  if (!driver_->apply_result(result.id, it == driven_.end() ? nullptr : &it->second, result.apply,
                             result.ends_operation)) {
    driven_.erase(result.id);
    return;
  }
  if (Driven* again = find(result.id)) {
    if (again->lost && !again->busy) {
      driver_->stop_stream(*again);
      driven_.erase(result.id);
    } else {
      again->dirty = true;
    }
  }
}

bool FakeHost::settle(const std::function<bool(std::int64_t id, int attempt)>& has_news) {
  bool ran = false;
  for (int round = 0; round < 100; ++round) {
    bool any = false;
    while (!operations_.empty()) {
      auto op = std::move(operations_.front());
      operations_.pop_front();
      std::function<void()> apply;
      try {
        apply = op.work();
      } catch (const std::exception& e) {
        std::string message = e.what();
        apply = [message] { throw Error(message); };
      }
      results_.push_back({op.id, std::move(apply), true});
      any = true;
    }
    for (auto& task : std::exchange(detached_, {})) {
      task();
      any = true;
    }
    while (!results_.empty()) {
      auto result = std::move(results_.front());
      results_.pop_front();
      apply(result);
      any = true;
    }
    std::deque<Pending> waiting;
    while (!watches_.empty()) {
      auto watch = std::move(watches_.front());
      watches_.pop_front();
      const Driven* d = find(watch.id);
      if (d == nullptr || !d->stream) {
        continue; // Stopped: the stream's thread would see its stop token and hand nothing back.
      }
      if (!has_news(watch.id, d->stream->attempt)) {
        waiting.push_back(std::move(watch));
        continue;
      }
      if (auto apply = watch.work()) {
        results_.push_back({watch.id, std::move(apply), false});
      }
      any = true;
    }
    watches_ = std::move(waiting);
    ran = ran || any;
    if (!any) {
      break;
    }
  }
  return ran;
}

void FakeHost::prune() {
  for (const auto id : std::exchange(to_drop_, {})) {
    auto it = driven_.find(id);
    if (it != driven_.end() && !it->second.busy) {
      driver_->stop_stream(it->second);
      store_.leases().release(id, owner_);
      driven_.erase(it);
    }
  }
}

// ---- Rig ----

Rig::Rig() : home("JOBMAN_HOME", dir.path().string()), store(core::open_store()), supervisor_store(core::open_store()) {
  spdlog::set_level(spdlog::level::warn);
  start_supervisor(util::now_ms());
}

void Rig::start_supervisor(std::int64_t now_ms) {
  const std::string owner = "in-process:" + std::to_string(++supervisors_) + ":1:00000000";
  host = std::make_unique<FakeHost>(supervisor_store, owner, now_ms);
  supervisor_store.drive_as(owner);
  driver = std::make_unique<core::supervision::JobDriver>(
      *host, fake_access(), core::supervision::JobDriver::Operations{slices, workers}, counters);
  host->set_driver(driver.get());
}

void Rig::restart_supervisor() {
  const auto now = host->now_ms() + kLeaseMs + 1;
  for (auto& [id, d] : host->driven()) {
    driver->stop_stream(d);
  }
  start_supervisor(now);
}

Rig::~Rig() {
  for (auto& [id, d] : host->driven()) {
    driver->stop_stream(d);
  }
}

std::vector<std::int64_t> Rig::create(const std::string& yaml) {
  const auto path = dir.write("job-" + std::to_string(util::now_ms()) + ".yaml", yaml);
  return core::create_jobs(store, config::load_job_configs(path.string()), "alice");
}

void Rig::tick() {
  host->read_jobs();
  core::supervision::observe_slices(host->driven(), *slices, *host, *counters);
  core::supervision::mark_due_after_observation(host->driven(), *host); // As the loop does.
  const auto news = [this](std::int64_t id, int attempt) { return workers->has_news(wid(id), attempt); };
  for (int round = 0; round < 20; ++round) {
    bool stepped = false;
    for (auto& [id, d] : host->driven()) {
      if (!d.busy && d.dirty && d.retry_at_ms <= host->now_ms()) {
        stepped = true;
      }
      if (!driver->step_when_due(d)) {
        host->drop_later(id);
      }
    }
    const bool settled = host->settle(news);
    host->prune();
    if (!stepped && !settled) {
      break;
    }
  }
}

bool Rig::tick_until(const std::function<bool()>& done, int limit, double step_seconds) {
  for (int i = 0; i < limit; ++i) {
    if (done()) {
      return true;
    }
    advance(step_seconds);
    tick();
  }
  return done();
}

domain::JobRecord Rig::job(std::int64_t id) const {
  return store.jobs().get(id);
}

std::vector<domain::AttemptRecord> Rig::attempts(std::int64_t id) const {
  return store.attempts().of(id);
}

std::string Rig::wid(std::int64_t id) {
  return core::workload_id(id, 1).job_id;
}

std::string Rig::slice_of(std::int64_t id) const {
  const auto all = store.attempts().of(id);
  return all.empty() ? std::string() : all.back().slice_name();
}

std::string Rig::node_of(std::int64_t id) const {
  const auto all = store.attempts().of(id);
  return all.empty() ? std::string() : all.back().node;
}

std::vector<std::string> Rig::events(std::int64_t id, const std::string& kind) const {
  std::vector<std::string> messages;
  for (const auto& e : store.events().of(id)) {
    if (e.kind == kind) {
      messages.push_back(e.message);
    }
  }
  return messages;
}

void Rig::request(std::int64_t id, domain::DesiredState desired) {
  using domain::DesiredState;
  const core::Request r = desired == DesiredState::stop     ? core::Request::cancel
                          : desired == DesiredState::remove ? core::Request::remove
                          : desired == DesiredState::clean  ? core::Request::clean
                                                            : core::Request::resume;
  core::apply_request(store, id, r);
}

} // namespace jobman::test
