// What a supervisor knows of each job it drives, beyond the store: the open slice as the last listing saw it, the
// operation in flight, the backoff, the workload's output stream.
#pragma once

#include "jobman/cloud/tpu_client.hpp"
#include "jobman/config/job_config.hpp"
#include "jobman/core/loss_watch.hpp"
#include "jobman/core/recovery.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/remote/workload.hpp"
#include "jobman/store/job_store.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace jobman::core::supervision {

// A sign of bad hardware on one worker of an attempt.
struct HardwareFinding {
  int attempt = 0;
  int worker = 0;
  std::string signal; // "output" (a line matched recovery.bad_hardware), "preflight" (tpu.preflight failed), "health".
  std::string detail; // The line, the preflight's last line, the node's health.
};

// What a node listing said of a node's health.
struct NodeHealthView {
  cloud::NodeHealth health = cloud::NodeHealth::health_unspecified;
  std::string description;
  std::optional<cloud::UpcomingMaintenance> maintenance; // Node.upcomingMaintenance, when it announces one.
  bool maintenance_due = false; // That maintenance is under way or opens within recovery.maintenance_lead.
};

// What the zone listings said of one slice (an attempt's own, or a first-ready rival's), and its delete.
struct SliceSeen {
  bool valid = false;              // A listing newer than the last news about it came in.
  std::optional<SliceView> view;   // nullopt: absent from that listing.
  bool once = false;               // It has appeared in a listing at least once.
  std::string state;               // Its state at the last event, to record changes only.
  std::int64_t delete_sent_ms = 0; // When its delete was last sent (0: not since it was last seen).

  // Takes in what a new listing says of the slice (nullptr: absent from it). Sets `dirty` when the job has something
  // new to act on: the first listing since its last news, or a new state. Returns whether the state changed (an
  // event to record).
  bool take(const SliceView* listed, bool& dirty) {
    if (!valid) {
      dirty = true;
    }
    valid = true;
    if (listed == nullptr) {
      view.reset();
    } else {
      view = *listed;
      once = true;
    }
    std::string now = view ? view->state : "gone";
    if (now == state) {
      return false;
    }
    state = std::move(now);
    dirty = true;
    return true;
  }
};

// The training progress an attempt's output stream reads (job.progress), shared by the stream's thread, which adds
// readings, and the loop, which writes them to the store every few seconds in one transaction for all jobs.
struct ProgressTracker {
  ProgressTracker(int attempt_number, domain::ProgressSeries seed) : attempt(attempt_number), series(std::move(seed)) {}
  const int attempt;
  std::mutex mutex;
  domain::ProgressSeries series;     // Guarded by mutex.
  std::optional<std::int64_t> total; // Guarded by mutex.
  bool dirty = false;                // Guarded by mutex: read since the store last heard.
};

// The loss spike check of a job (recovery.loss_spike), fed on the stream's thread from the worker whose progress is
// read, kept across the job's attempts.
struct LossTracker {
  explicit LossTracker(LossWatch w) : watch(std::move(w)) {}
  std::mutex mutex;
  LossWatch watch; // Guarded by mutex.
};

// One attach() running on its own thread.
struct Stream {
  std::stop_source stop;
  std::atomic<bool> bad_hardware{false}; // A line matched recovery.bad_hardware; the loop was told once.
  std::atomic<bool> spiked{false};       // The loss spiked (recovery.loss_spike); the loop was told once.
  int attempt = 0;
  bool ended = false;
  std::vector<remote::StreamEnd> ends;
  std::string error;
};

// A job this supervisor holds the lease of.
struct Driven {
  domain::JobRecord job;
  std::shared_ptr<const config::JobConfig> config;
  std::vector<domain::AttemptRecord> attempts;
  bool busy = false;            // An operation is in flight.
  bool dirty = true;            // Something new is known: step it.
  bool lost = false;            // The lease was lost while busy: drop it when the operation returns.
  std::int64_t retry_at_ms = 0; // Backoff after a failed operation.
  int retry_step = 0;
  // The open slice (its queued resource, or its node in tpu-vm mode) as the zone listings saw it.
  SliceSeen seen;
  // The open slice's node's health (Node.health, healthDescription) as the last node listing saw it, while the job
  // runs; nullopt when no listing told.
  std::optional<NodeHealthView> node_health;
  // tpu-vm mode: the operation of the node's create, until it is known to have succeeded (it may fail for capacity).
  std::string create_operation;
  bool create_again = false; // tpu-vm mode: the create failed for capacity; ask again once the backoff passes.
  // First-ready: the queued resources raced alongside the current attempt's that are not yet released, in the
  // candidates' order, and what the listings said of each (by name).
  std::vector<domain::RivalRecord> rivals;
  std::map<std::string, SliceSeen> rival_seen;
  std::shared_ptr<Stream> stream;
  // The current attempt's progress, kept past its stream until the store has it.
  std::shared_ptr<ProgressTracker> progress;
  // recovery.loss_spike's check, made when the job first streams with it on.
  std::shared_ptr<LossTracker> loss;
  // The stall watchdog (recovery.stall_timeout), in the loop's time: the attempt it watches, since when no output
  // has come home, and whether any has (the first line may wait for recovery.stall_first_line). Kept in memory only:
  // a supervisor that takes the job over counts from when it streams.
  int quiet_attempt = 0;
  std::int64_t quiet_since_ms = 0;
  bool heard_output = false;
  // Chunks of output that came home from any worker, counted by the job's streams (each in turn; a stream may end
  // before the loop looks), and the count when the loop last looked.
  std::shared_ptr<std::atomic<std::uint64_t>> output_chunks = std::make_shared<std::atomic<std::uint64_t>>(0);
  std::uint64_t output_counted = 0;
  int unreachable = 0;
  // When the run of the open slice's attempt (`run_ends_attempt`) ends, for a flex-start slice, as a listing through
  // v2alpha1 last told it; kept after the slice is gone.
  std::optional<std::int64_t> run_ends_ms;
  int run_ends_attempt = 0;
  // Since when the open slice's node has been READY with hosts that have not all published their SSH host keys (0:
  // it is not waiting for them). Kept in memory only: a supervisor that takes the job over counts from when it does.
  std::int64_t host_keys_since_ms = 0;
  // A task: its own config, before its worker lent it the connection and the environment (config); its setup
  // modules are the ones it runs on the worker's slice.
  std::shared_ptr<const config::JobConfig> own_config;
  // A serving worker: since when it has held no task (0: it holds one, or has not looked yet). Kept in memory only: a
  // supervisor that takes the worker over counts from when it does, so the slice is never released early.
  std::int64_t idle_since_ms = 0;

  // The attempt that holds a slice (a queued resource, or a node in tpu-vm mode) not yet released, if any (the
  // newest). A task's attempts borrow their worker's slice and hold none.
  [[nodiscard]] const domain::AttemptRecord* open_slice() const {
    for (auto it = attempts.rbegin(); it != attempts.rend(); ++it) {
      if (!it->released_ms && it->holds_slice()) {
        return &*it;
      }
    }
    return nullptr;
  }
  // The current attempt's record, when it has one.
  [[nodiscard]] const domain::AttemptRecord* current() const {
    if (attempts.empty() || attempts.back().number != job.attempt) {
      return nullptr;
    }
    return &attempts.back();
  }
};

// What a supervisor has done, counted from the loop, the action threads and the streams alike.
struct Counters {
  std::atomic<std::uint64_t> ticks{0};       // Observation rounds.
  std::atomic<std::uint64_t> list_calls{0};  // queuedResources.list and nodes.list calls.
  std::atomic<std::uint64_t> get_calls{0};   // Per-job GETs.
  std::atomic<std::uint64_t> mutations{0};   // Creates and deletes.
  std::atomic<std::uint64_t> transitions{0}; // Phase changes.
  std::atomic<std::int64_t> streams{0};      // Output streams open now.
};

} // namespace jobman::core::supervision
