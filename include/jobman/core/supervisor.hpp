// The supervisor: the reconcile loop that makes the cloud match what users asked of their jobs. It drives every job
// whose lease it holds: requests slices, sets up workers, launches and watches the workload, recovers from
// preemptions, and carries out cancel, delete and clean. docs/ARCHITECTURE.md, "The supervisor", describes its parts.
#pragma once

#include "jobman/core/cloud.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <stop_token>
#include <string>
#include <vector>

namespace jobman::core {

// How a supervisor runs.
struct SupervisorOptions {
  std::string owner;                 // The lease owner; lease_owner_id() when empty.
  std::vector<std::int64_t> only;    // Drive just these jobs; every job when empty.
  std::chrono::milliseconds tick{0}; // How often the cloud is observed; 0: the smallest of the settings' and the
                                     // jobs' poll intervals, divided by the cloud's time scale (at least 20 ms).
  std::chrono::milliseconds lease_ttl{15'000};         // A lease not renewed for this long may be taken over.
  std::optional<std::chrono::milliseconds> idle_exit;  // run() returns once no job was left to drive for this long.
  int action_threads = 16;                             // Cloud and worker operations in flight at once.
  std::chrono::milliseconds sweep_interval{3'600'000}; // How often orphaned resources are swept (the first sweep at
                                                       // start; real time); 0: never.
  std::chrono::milliseconds orphan_grace{3'600'000};   // A sweep deletes only orphans created longer ago than this.
};

// What a supervisor has done so far.
struct SupervisorStats {
  std::uint64_t ticks = 0;       // Observation rounds.
  std::uint64_t list_calls = 0;  // queuedResources.list and nodes.list calls (one per zone in use per tick).
  std::uint64_t get_calls = 0;   // Per-job GETs (around transitions).
  std::uint64_t mutations = 0;   // Creates and deletes.
  std::uint64_t transitions = 0; // Phase changes it made.
  std::size_t jobs_driven = 0;   // Jobs it holds the lease of now.
  std::size_t streams = 0;       // Workload output streams open now.
};

// One reconcile loop over the store at `store_location` (a SQLite file or a postgresql:// URL; src/core/supervisor/:
// the loop, the job driver, their threads).
class Supervisor {
public:
  Supervisor(const CloudAccess& access, std::string store_location, SupervisorOptions options = {});
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Runs until `stop` is requested (or, with idle_exit, nothing was left to drive for that long); then stops watching,
  // releases its leases and returns. Workloads keep running on the workers.
  void run(const std::stop_token& stop);

  // A snapshot of the counters; callable from any thread.
  [[nodiscard]] SupervisorStats stats() const;

  // After run(): whether every operation and log stream it started had ended. When not, their threads still run on
  // shared state, and a process that is about to exit must end without running static destructors under them
  // (std::_Exit after flushing its logs).
  [[nodiscard]] bool settled() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace jobman::core
