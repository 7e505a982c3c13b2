// Pools of slices and a queue of tasks, as the commands see them: recording workers and tasks, and finding them by
// the references jobman-lite's users type (a name, an index from `jobman status`, an id). The supervisor drives both
// with the same state machine as jobs (see docs/ARCHITECTURE.md, "Workers and tasks").
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/store/job_store.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::core {

// Records one worker per config (its tpu section is the slice it keeps, its setup what runs once on every host) for
// `user`; returns their ids.
std::vector<std::int64_t> start_workers(store::JobStore& store, const std::vector<config::JobConfig>& configs,
                                        const std::string& user);

// A task about to be queued: its config, and what it asks of a worker beyond the accelerator.
struct TaskToSubmit {
  config::JobConfig config;
  std::string zone;                       // "" runs on a worker in any zone.
  std::optional<domain::Pricing> pricing; // nullopt runs on a worker of any pricing.
  int priority = 0;                       // Higher runs first; FIFO within a priority.
};

// Queues the tasks (the members of a sweep together, in one transaction) for `user`; returns their ids.
std::vector<std::int64_t> submit_tasks(store::JobStore& store, const std::vector<TaskToSubmit>& tasks,
                                       const std::string& user);

// The name the next worker on `accelerator` in `zone` gets when none is given: "<accelerator>-<zone>-<n>", n one
// more than the largest such name's, as jobman-lite names its workers.
// How a worker's phase reason begins while it waits in PENDING, its slice released, for a task (tpu.idle_release).
inline constexpr std::string_view kIdleReleaseReason = "idle: ";
// Whether `worker` waits so: `jobman status` shows it IDLE.
bool idle_released(const domain::JobRecord& worker);

std::string next_worker_name(const store::JobStore& store, const std::string& accelerator, const std::string& zone);

// The workers or the tasks `status` shows (unfinished ones, and those finished in the last day), by id. Their
// positions in this list, from 1, are the indices `status` prints in its # column.
std::vector<domain::JobRecord> status_records(const store::JobStore& store, domain::JobKind kind,
                                              std::int64_t now_ms = 0);

// Which records a worker or task command acts on.
struct Selection {
  std::vector<std::string> refs; // Each a name, an index from `status` (1 to 5 digits), or an id (000042).
  bool all = false;              // Every record `status` shows.
  std::string accelerator;       // Those on this accelerator.
  std::string zone;              // Those in this zone.
  std::string pattern;           // Those whose name matches this glob (tasks).
  [[nodiscard]] bool empty() const {
    return refs.empty() && !all && accelerator.empty() && zone.empty() && pattern.empty();
  }
};

// The records `selection` names, in the order given (refs) or by id (filters), without duplicates. Throws UsageError
// when it names nothing at all, and domain::NoSuchJobError naming every reference that matches no record, or a name
// that matches several (with their ids).
std::vector<domain::JobRecord> select_records(const store::JobStore& store, domain::JobKind kind,
                                              const Selection& selection);

} // namespace jobman::core
