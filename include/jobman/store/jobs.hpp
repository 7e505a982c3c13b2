// The store's jobs: creating them, reading and listing them, what changed, what the user wants of them, their phase,
// and removing them.
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/util/error.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace jobman::store {

// Which jobs `list` wants.
struct JobFilter {
  bool include_history = false; // false: unfinished jobs plus those finished within `recent_ms`.
  std::int64_t recent_ms = 24LL * 3600 * 1000;
  std::int64_t now_ms = 0;            // Reference time for `recent_ms`; 0 means the clock.
  std::vector<domain::Phase> phases;  // Empty: any phase.
  std::string name_glob;              // Empty: any name.
  std::string user;                   // Empty: any user.
  std::vector<domain::JobKind> kinds; // Empty: any kind.
  bool with_config = false;           // Fill JobRecord::config_yaml.
};

// What changed in the jobs after a change number a watcher saw (Jobs::changes_since).
struct JobChanges {
  std::int64_t cursor = 0;             // The newest change in these; pass it back for the next ones.
  std::vector<domain::JobRecord> jobs; // Created or changed, each once and as it is now, in change order.
  std::vector<std::int64_t> removed;   // Removed from the store.
  bool complete = true;                // false: removals older than the kept ones may be missing (reload).
};

// A write refused because the job changed under the writer: a user cancelled, deleted or cleaned it, or it ended,
// since the writer last read it. The writer reads it again and decides anew.
class JobChangedError : public Error {
public:
  using Error::Error;
};

class Jobs : public StoreView {
public:
  using StoreView::StoreView;

  // Records new jobs in one transaction; returns their ids (ascending, never reused). `before_commit`, when given,
  // gets the ids while the jobs are still invisible to others; when it throws, nothing is recorded.
  std::vector<std::int64_t> create(const std::vector<domain::NewJob>& jobs,
                                   const std::function<void(const std::vector<std::int64_t>&)>& before_commit = {});

  // The job, or nullopt.
  [[nodiscard]] std::optional<domain::JobRecord> find(std::int64_t id, bool with_config = false) const;
  // The job; throws NoSuchJobError ("no job 000042") when absent.
  [[nodiscard]] domain::JobRecord get(std::int64_t id, bool with_config = false) const;
  // Calls `fn` for each matching job in id order, streaming from the database. `fn` may read the store but must not
  // write to it (the open read snapshot makes such writes fail once another process has written); to act on
  // jobs, collect them with list first.
  void for_each(const JobFilter& filter, const std::function<void(const domain::JobRecord&)>& fn) const;
  // Collects for_each.
  [[nodiscard]] std::vector<domain::JobRecord> list(const JobFilter& filter) const;
  // for_each in one read snapshot; returns that snapshot's change cursor, for changes_since to go on from.
  std::int64_t for_each_with_cursor(const JobFilter& filter,
                                    const std::function<void(const domain::JobRecord&)>& fn) const;
  // The number of the newest change to any job (0 before any).
  [[nodiscard]] std::int64_t change_cursor() const;
  // What changed after change `cursor`: one query over two indexes, however many jobs the store holds.
  [[nodiscard]] JobChanges changes_since(std::int64_t cursor) const;

  // Records what the user wants, with an event; returns the updated job.
  domain::JobRecord set_desired_state(std::int64_t id, domain::DesiredState desired, const std::string& reason);
  // Moves the job to `change.to` if it is in `expected` (any phase when nullopt), with an event.
  // Returns false, changing nothing, when the phase was not `expected`.
  bool transition(std::int64_t id, std::optional<domain::Phase> expected, const domain::PhaseChange& change);
  // Sets or clears JobRecord::cleanup_pending.
  void set_cleanup_pending(std::int64_t job_id, bool pending);

  // Removes the job with its attempts, events and lease (`clean`), keeping of its attempts what Attempts::since
  // reads (where, when, how each went), in the same transaction. Its id is never handed out again. Throws
  // NoSuchJobError when there is no such job.
  void remove(std::int64_t id);
  // remove for two removers racing (the clean command and a supervisor carrying out the same clean): false,
  // changing nothing, when the job is already gone.
  bool remove_if_present(std::int64_t id);

  // Every zone a job, an attempt or a rival names, sorted, without duplicates.
  [[nodiscard]] std::vector<std::string> zones_in_use() const;
  // Every user with a record in the store.
  [[nodiscard]] std::vector<std::string> users() const;
};

} // namespace jobman::store
