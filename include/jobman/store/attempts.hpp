// The store's attempts: each job's tries at running, the slice each holds until it is released, and its progress.
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/domain/progress.hpp"
#include "jobman/store/job_store.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace jobman::store {

// A slice an attempt still holds (its release not confirmed): the names it gives its queued resource and node.
struct HeldSlice {
  std::int64_t job_id = 0;
  int attempt = 0;             // The attempt's number.
  std::string queued_resource; // Empty for a node created without one (tpu-vm mode).
  std::string node;            // The node's name.
  std::string zone;            // Where the attempt runs.
};

// One attempt as `jobman availability` reads it: where its slice was asked for, when, and how it went.
struct PlaceRecord {
  std::string zone;
  std::string accelerator;
  domain::Pricing pricing = domain::Pricing::spot;               // As AttemptRecord::pricing.
  domain::AttemptOutcome outcome = domain::AttemptOutcome::none; // As AttemptRecord::outcome.
  std::int64_t started_ms = 0;
  std::optional<std::int64_t> active_ms;
  std::optional<std::int64_t> ended_ms;
};

// The progress of one attempt, as a supervisor records it.
struct ProgressUpdate {
  std::int64_t job_id = 0;
  int attempt = 0;
  domain::ProgressSeries series;     // The attempt's whole series (it replaces what is stored).
  std::optional<std::int64_t> total; // The total steps, when the output gave one.
};

// What one attempt read through its gcsfuse mount of one bucket, as the workers' gcsfuse counted it (its metrics) when
// the attempt ended.
struct BucketTransfer {
  std::int64_t job_id = 0;
  int attempt = 0;
  std::string bucket;
  std::string zone;            // The attempt's zone: where what was read went.
  std::int64_t read_bytes = 0; // gcs_read_bytes_count, summed over the workers that answered.
  std::int64_t write_ops = 0;  // fs_ops_count{fs_op="WriteFile"}, summed likewise (gcsfuse counts no bytes written).
  int workers_read = 0;        // The workers whose metrics were read.
  int workers = 0;             // The workers the attempt ran on.
  std::int64_t recorded_ms = 0;
};

class Attempts : public StoreView {
public:
  using StoreView::StoreView;

  // Starts the job's next attempt (jobs.attempt + 1) with an event, clearing the last attempt's host0_ip and
  // exit_code; returns it. With `create_pending`, its queued resource is about to be requested (confirm_created()
  // records that the API accepted it), and a fair share set (Shares::set_policy) may refuse it: ShareExceededError,
  // changing nothing. Throws JobChangedError when the job ended or its desired state is no longer run.
  domain::AttemptRecord begin(std::int64_t job_id, const domain::Placement& where, bool create_pending = false);
  // begin on the job's accelerator and hosts.
  domain::AttemptRecord begin(std::int64_t job_id, const std::string& queued_resource, const std::string& node,
                              const std::string& zone, bool create_pending = false);
  // Records that the API accepted the request for attempt `number`'s queued resource. Repeating it changes nothing.
  void confirm_created(std::int64_t job_id, int number);
  // Closes an attempt with its outcome; a rolled-back attempt with the step its loss spiked at (`rollback_step`).
  void end(std::int64_t job_id, int number, domain::AttemptOutcome outcome, std::optional<int> exit_code,
           std::optional<std::int64_t> rollback_step = std::nullopt);
  // The job's attempts, oldest first.
  [[nodiscard]] std::vector<domain::AttemptRecord> of(std::int64_t job_id) const;
  // Calls `fn` with every attempt of the jobs whose ids are in [first, last], by job and number.
  void for_each(std::int64_t first, std::int64_t last,
                const std::function<void(const domain::AttemptRecord&)>& fn) const;
  // The attempts of tasks that borrowed `worker_id`'s slice, oldest first.
  [[nodiscard]] std::vector<domain::AttemptRecord> on_worker(std::int64_t worker_id) const;
  // The attempts that asked for a slice of their own (not tasks', which borrow one) started since `since_ms`, every
  // job's (removed jobs' too, as Jobs::remove kept them), in `zone` and of `accelerator` when given (empty: all).
  [[nodiscard]] std::vector<PlaceRecord> since(std::int64_t since_ms, const std::string& zone = {},
                                               const std::string& accelerator = {}) const;

  // Records that `slice` (a queued resource and its node, or a node without one in tpu-vm mode; see
  // AttemptRecord::slice_name) is gone, on every attempt that used it (or on the rival of that name), with an event
  // saying `how`. Repeating it changes nothing.
  void mark_released(std::int64_t job_id, const std::string& slice, const std::string& how);
  // Every slice an attempt or a rival holds: those whose released_ms is null, the names recorded before their request
  // left (one scan of a partial index each).
  [[nodiscard]] std::vector<HeldSlice> held_slices() const;
  // Attempt `number`'s slice came up: records when (the first time only), and the physical machine of each of its
  // worker hosts, by worker (empty entries, or none at all, when the cloud did not say).
  void record_slice_active(std::int64_t job_id, int number, const std::vector<std::string>& physical_hosts);
  // Records the progress of attempts in one transaction: each attempt's series, and on its job, when it is the job's
  // current attempt, the latest step, the total when given, and when.
  void record_progress(const std::vector<ProgressUpdate>& updates);
  // Records what an attempt read from a bucket, replacing what was recorded for it before. Throws jobman::Error when
  // the job is gone (its rows go with it).
  void record_transfer(const BucketTransfer& transfer);
  // What the job's attempts read, by attempt and bucket.
  [[nodiscard]] std::vector<BucketTransfer> transfers(std::int64_t job_id) const;
  // What every job's attempts read, by bucket, zone, job and attempt.
  [[nodiscard]] std::vector<BucketTransfer> all_transfers() const;
};

} // namespace jobman::store
