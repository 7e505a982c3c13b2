// Requests to stop a run early: SIGTERM and SIGINT in the program, something scripted in tests.
#pragma once

#include <chrono>
#include <memory>

namespace jobman::systolic {

// Where a stop request comes from. Once one has arrived, every later call reports it again.
class StopSignals {
public:
  virtual ~StopSignals() = default;
  // The signal number of a stop request that has arrived, or 0; never waits.
  virtual int pending() = 0;
  // Waits up to `timeout` for a stop request; returns its signal number, or 0 when the time passed without one.
  virtual int wait_for(std::chrono::milliseconds timeout) = 0;
  // A descriptor that becomes readable when a stop request may have arrived (then call pending()), so that a wait on
  // sockets can include it; -1 when there is none and waits must call pending() now and then instead.
  [[nodiscard]] virtual int descriptor() const { return -1; }
  // Waits for a stop request without a timeout, as a process stuck in a collective that never returns does, and
  // returns its signal number. This one calls wait_for until one arrives.
  virtual int block_until_stopped();
};

// Blocks SIGTERM and SIGINT in the calling thread (call it before starting threads) and receives them through a
// signalfd, so they are noticed between steps and end any wait at once. Throws std::system_error when it cannot.
// Its block_until_stopped() blocks in a read of an empty pipe (the kernel's wait channel pipe_read) with SIGTERM and
// SIGINT let through to a handler that ends the read.
std::unique_ptr<StopSignals> make_process_stop_signals();

} // namespace jobman::systolic
