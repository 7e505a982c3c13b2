// The data-center network (DCN) between the slices of a multislice run: every process connects over TCP to the
// coordinator (global worker 0), which checks that all of them run the same thing before step one and then
// all-reduces each step's partial results, in slice order. Messages between different slices are held back by an
// emulated latency and bandwidth. See docs/SYSTOLIC.md, "Multislice".
#pragma once

#include "systolic/model.hpp"
#include "systolic/stop_signal.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace jobman::systolic {

// Where a process sits in a multislice run and how the network between slices behaves.
struct DcnSettings {
  std::uint32_t num_slices = 1;                // N: slices in the run.
  std::uint32_t slice_id = 0;                  // This process's slice, 0..N-1.
  std::uint64_t num_workers = 1;               // Processes in the run, all slices together (N x hosts per slice).
  std::uint64_t worker_id = 0;                 // This process's global index; slice s has s*H .. s*H+H-1.
  std::string coordinator_host;                // The coordinator's address (global worker 0 listens there).
  std::uint16_t port = 8081;                   // The coordinator's TCP port.
  std::chrono::milliseconds timeout{60'000};   // Bounds every wait on the network.
  std::chrono::microseconds latency{0};        // Added to every message between different slices.
  std::uint64_t bandwidth_bits_per_second = 0; // Each such message also takes its size over this; 0: unlimited.

  // H: processes per slice.
  [[nodiscard]] std::uint64_t hosts_per_slice() const { return num_workers / num_slices; }
  // The slice of global worker `worker`.
  [[nodiscard]] std::uint32_t slice_of(std::uint64_t worker) const {
    return static_cast<std::uint32_t>(worker / hosts_per_slice());
  }
  // True for the process every other one connects to.
  [[nodiscard]] bool coordinator() const { return worker_id == 0; }
  // "slice 1 (worker 3)", or "slice 0 (worker 0, the coordinator)".
  [[nodiscard]] std::string describe(std::uint64_t worker) const;
};

// What every process presents before step one; the coordinator refuses a process whose run differs from its own.
struct DcnIdentity {
  ModelConfig model;            // The run's identity, as in a checkpoint.
  std::uint64_t steps = 0;      // --steps: every process must stop at the same step.
  std::uint64_t start_step = 0; // The step it resumes from (its newest checkpoint's), 0 without one.
};

// How a network operation ended.
enum class DcnStatus {
  ok,      // Done.
  stopped, // A stop request (SIGTERM, SIGINT) arrived during the wait; `signal` says which.
  lost,    // A process of the run closed its connection, stopped, or fell silent past the timeout.
  refused, // The coordinator refused a process whose run differs (or the coordinator's own run was refused).
  failed   // Anything else: an address that cannot be listened on or resolved, a protocol error.
};

// The outcome of a network operation.
struct DcnOutcome {
  DcnStatus status = DcnStatus::ok; // How it ended.
  int signal = 0;                   // With `stopped`: the signal number.
  std::string message;              // Otherwise what happened, for an "error: " line.
};

// The coordinator's reduction: the result of a step from the partials of every slice, given in slice order.
using PartialReducer = std::function<std::string(const std::vector<std::string>& partials_by_slice)>;

// One process's connection to the run's network.
class DcnLink {
public:
  virtual ~DcnLink() = default;
  // Before step one: the coordinator listens, then waits until all N x H - 1 others have connected and presented an
  // identity equal to its own; the others connect (retrying while nothing listens yet) and wait to be accepted.
  virtual DcnOutcome join(const DcnIdentity& identity) = 0;
  // Contributes this process's `partial` of step `step` and receives the step's `result`: the reduction of one
  // partial per slice (the processes of a slice compute identical ones; the coordinator checks that they do).
  virtual DcnOutcome all_reduce(std::uint64_t step, const std::string& partial, std::string& result) = 0;
  // Tells the others, as far as it can without waiting long, that this process leaves the run because of
  // `reason` (e.g. "stopped by SIGTERM after step=5"), so that they end at once rather than at the timeout.
  virtual void leave(const std::string& reason) = 0;
};

// The link of the process `settings` describes: the coordinator's (worker 0) or another's. `stop` ends any wait;
// `reducer` combines the partials (used by the coordinator only). Does not touch the network before join().
std::unique_ptr<DcnLink> make_dcn_link(const DcnSettings& settings, StopSignals& stop, PartialReducer reducer);

// A host and a TCP port.
struct DcnAddress {
  std::string host;       // A name or an IPv4 address.
  std::uint16_t port = 0; // The TCP port.
};

// "host" or "host:port" split into its parts, the port being `default_port` when absent; nothing when the host is
// empty or the port is not a number from 1 to 65535.
std::optional<DcnAddress> parse_dcn_address(const std::string& text, std::uint16_t default_port);

} // namespace jobman::systolic
