// The job driver's core: stepping a job, the store helpers every phase uses, and which phase does what.
#include "job_driver.hpp"

#include "jobman/core/jobs.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/store/rivals.hpp"
#include "jobman/store/shares.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"

#include <algorithm>
#include <cmath>
#include <spdlog/spdlog.h>
#include <utility>

namespace jobman::core::supervision {

using domain::DesiredState;
using domain::Phase;

std::string job_label(std::int64_t id) {
  return "job " + domain::format_job_id(id);
}

SliceRef SliceRef::of(const domain::AttemptRecord& attempt) {
  return {attempt.slice_name(), attempt.zone, attempt.node_only()};
}

std::string SliceRef::label() const {
  return (node_only ? "node " : "queued resource ") + name;
}

std::optional<SliceView> SliceRef::get(SliceOps& slices) const {
  if (node_only) {
    const auto node = slices.get_node(zone, name);
    return node ? std::optional(view_slice(*node)) : std::nullopt;
  }
  const auto qr = slices.get_queued_resource(zone, name);
  return qr ? std::optional(view_slice(*qr)) : std::nullopt;
}

std::optional<cloud::Operation> SliceRef::remove(SliceOps& slices) const {
  if (node_only) {
    return slices.delete_node(zone, name);
  }
  return slices.delete_queued_resource(zone, name);
}

std::vector<int> all_workers(int hosts) {
  std::vector<int> all(static_cast<std::size_t>(std::max(hosts, 1)));
  for (int w = 0; w < static_cast<int>(all.size()); ++w) {
    all[static_cast<std::size_t>(w)] = w;
  }
  return all;
}

std::vector<int> command_workers(const config::JobConfig& config, int hosts) {
  return config.command.workers.all ? all_workers(hosts) : config.command.workers.indices;
}

void load_rivals(const store::JobStore& store, Driven& d) {
  if (d.rivals.empty() && !(d.config && d.config->tpu.strategy == config::CandidateStrategy::first_ready)) {
    return; // Only a first-ready job races (and one whose config changed still lets its rivals go).
  }
  d.rivals.clear();
  for (auto& rival : store.rivals().of(d.job.id)) {
    if (!rival.released_ms) {
      d.rivals.push_back(std::move(rival));
    }
  }
}

void load_driven(Driven& d, const domain::JobRecord& fresh, const store::JobStore& store, const Driven* worker) {
  d.job = fresh;
  d.job.config_yaml.clear();
  d.attempts = store.attempts().of(fresh.id);
  auto config = recorded_config(fresh);
  if (const auto missing = expand_recorded_environment(fresh.id, config); !missing.empty()) {
    throw Error("the environment variable " + missing.front() +
                ", which it reads with ${oc.env:...}, was not set at create and is not set for the supervisor");
  }
  if (d.job.kind == domain::JobKind::task) {
    // A task runs as its worker connects and in its worker's environment, unless its own config says otherwise.
    d.own_config = std::make_shared<const config::JobConfig>(config);
    if (worker != nullptr && worker->config) {
      lend_worker_settings(*worker->config, config);
    }
  }
  d.config = std::make_shared<const config::JobConfig>(std::move(config));
  load_rivals(store, d);
}

JobDriver::JobDriver(DriverHost& host, std::shared_ptr<const CloudAccess> access, Operations ops,
                     std::shared_ptr<Counters> counters)
    : host_(host), access_(std::move(access)), slices_(std::move(ops.slices)), workers_(std::move(ops.workers)),
      counters_(std::move(counters)) {}

double JobDriver::backoff(Driven& d) {
  const auto& r = d.config->recovery;
  const double wait = std::min(static_cast<double>(r.backoff_max_seconds),
                               static_cast<double>(r.backoff_initial_seconds) *
                                   std::pow(std::max(1.0, r.backoff_multiplier), d.retry_step));
  d.retry_at_ms = host_.now_ms() + host_.scaled(wait).count();
  ++d.retry_step;
  return wait;
}

void JobDriver::reload(Driven& d) {
  if (auto job = store().jobs().find(d.job.id)) {
    d.job = std::move(*job);
    d.attempts = store().attempts().of(d.job.id);
    load_rivals(store(), d);
  }
  d.dirty = true;
}

void JobDriver::take_news(Driven& d, domain::JobRecord row) {
  if (d.busy || (row.updated_ms == d.job.updated_ms && row.desired == d.job.desired && row.phase == d.job.phase)) {
    return;
  }
  if (row.desired != d.job.desired) {
    d.retry_at_ms = 0;
  }
  d.job = std::move(row);
  d.attempts = store().attempts().of(d.job.id);
  load_rivals(store(), d);
  d.dirty = true;
}

bool JobDriver::move(Driven& d, std::optional<Phase> expected, const domain::PhaseChange& change) {
  const Phase from = d.job.phase;
  domain::PhaseChange c = change;
  if (domain::is_terminal(c.to) && !d.rivals.empty()) {
    c.cleanup_pending = true; // Its rivals are deleted, by whichever supervisor drives it next.
  }
  const bool moved = store().jobs().transition(d.job.id, expected, c);
  if (moved) {
    ++counters_->transitions;
    spdlog::info("{}: {} -> {}: {}", job_label(d.job.id), domain::to_string(from), domain::to_string(change.to),
                 change.reason);
  }
  reload(d);
  if (moved) {
    notify_phase(d, from, change.to);
  }
  return moved;
}

void JobDriver::event(Driven& d, std::string_view kind, const std::string& message, const nlohmann::json& data) {
  spdlog::info("{}: {}", job_label(d.job.id), message);
  store().events().append(d.job.id, kind, message, data.is_null() ? std::string() : data.dump());
}

void JobDriver::error_event(Driven& d, const std::string& message) {
  spdlog::warn("{}: {}", job_label(d.job.id), message);
  store().events().append(d.job.id, "error", message);
}

void JobDriver::end_open_attempt(Driven& d, domain::AttemptOutcome outcome, std::optional<int> exit_code,
                                 std::optional<std::int64_t> rollback_step) {
  if (const auto* attempt = d.current(); attempt != nullptr && !attempt->ended_ms) {
    record_progress_now(d);
    store().attempts().end(d.job.id, attempt->number, outcome, exit_code, rollback_step);
    reload(d);
  }
}

void JobDriver::step(Driven& d) {
  const auto& job = d.job;
  if (job.kind == domain::JobKind::worker && (job.phase != Phase::running || job.desired != DesiredState::run)) {
    wake_task_of(d); // Its task, if it has one, must let go of the slice.
  }
  if (job.desired == DesiredState::remove || job.desired == DesiredState::clean) {
    tear_down(d);
  } else if (domain::is_terminal(job.phase)) {
    if (job.cleanup_pending || !d.rivals.empty()) {
      release(d, [this, &d] {
        store().jobs().set_cleanup_pending(d.job.id, false);
        reload(d);
        host_.drop_later(d.job.id);
      });
    } else {
      host_.drop_later(job.id);
    }
  } else if (job.desired == DesiredState::stop) {
    cancel(d);
  } else {
    drive(d);
  }
}

bool JobDriver::step_when_due(Driven& d) {
  if (d.busy || d.lost || !d.dirty || !d.config || d.retry_at_ms > host_.now_ms()) {
    return true;
  }
  d.dirty = false;
  try {
    step(d);
  } catch (const domain::NoSuchJobError&) {
    return false;
  } catch (const store::LeaseLostError&) {
    host_.lease_taken(d);
    return false;
  } catch (const store::ShareExceededError& e) {
    // Another supervisor handed the chips out since this one last counted them.
    d.dirty = true;
    wait_for_share(d, e.what());
  } catch (const store::JobChangedError& e) {
    // A user's request got in first: decide again on what the store says now.
    d.dirty = true;
    spdlog::info("{}: {}", job_label(d.job.id), e.what());
    try {
      reload(d);
    } catch (const domain::NoSuchJobError&) {
      return false;
    }
  } catch (const std::exception& e) {
    // Stepped again after the backoff, even when recording the error fails too (the store is what failed: a server
    // restarting): the error then ends the tick, and without this the job would wait for news that never comes.
    d.dirty = true;
    backoff(d);
    error_event(d, e.what());
  }
  return true;
}

bool JobDriver::apply_result(std::int64_t id, Driven* d, const std::function<void()>& apply, bool ends_operation) {
  try {
    if (d != nullptr && ends_operation) {
      d->busy = false;
      reload(*d);
    }
    apply();
  } catch (const domain::NoSuchJobError&) {
    return false;
  } catch (const store::LeaseLostError&) {
    if (Driven* again = host_.find(id)) {
      host_.lease_taken(*again); // SupervisorLoop::apply lets it go.
    }
  } catch (const std::exception& e) {
    spdlog::error("{}: {}", job_label(id), e.what());
    if (Driven* again = host_.find(id)) {
      backoff(*again);
    }
  }
  return true;
}

void JobDriver::drive(Driven& d) {
  if (!d.rivals.empty() && d.job.phase != Phase::queued && d.job.phase != Phase::provisioning && delete_rivals(d)) {
    return; // The race is over; its last rivals are being deleted.
  }
  switch (d.job.phase) {
  case Phase::pending:
  case Phase::recovering:
    if (d.job.kind == domain::JobKind::task) {
      host_.drop_later(d.job.id); // Queued: a worker claims it.
    } else if (!parked(d)) {
      acquire_slice(d);
    }
    break;
  case Phase::queued:
  case Phase::provisioning: await_slice(d); break;
  case Phase::setup: set_up(d); break;
  case Phase::running:
    if (d.job.kind == domain::JobKind::worker) {
      serve(d);
    } else {
      watch(d);
    }
    break;
  default: break;
  }
}

// An operation's failure: an error event and a retry after the backoff.
std::function<void()> JobDriver::failed_operation(std::int64_t id, std::string message) {
  return [this, id, message = std::move(message)] {
    Driven* live = host_.find(id);
    if (live == nullptr) {
      return;
    }
    error_event(*live, message);
    backoff(*live);
    live->dirty = true;
  };
}

} // namespace jobman::core::supervision
