// The supervisor's thread plumbing: a fixed set of threads for cloud and worker operations, the inbox through which
// every other thread hands its results to the loop, and the count of threads that may outlive the loop.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>

namespace jobman::core::supervision {

// Completed work, applied to the store by the loop's thread.
struct Completion {
  std::int64_t job_id = 0;
  std::function<void()> apply;
  bool ends_operation = false; // The result of the job's operation in flight (not news from a stream or a lease).
};

// Where threads hand their results to the loop.
class Inbox {
public:
  // Hands `completion` to the loop and wakes it.
  void post(Completion completion);
  // Waits until something arrives, `deadline` passes or `stop` is requested; returns what arrived.
  std::deque<Completion> wait(std::chrono::steady_clock::time_point deadline, const std::stop_token& stop);

private:
  std::mutex mutex_;
  std::condition_variable_any ready_;
  std::deque<Completion> items_;
};

// The threads a supervisor starts that may outlive it: operations in flight and log streams being stopped. They hold
// only shared state, so the supervisor may go while they run; but the process must not run its static destructors
// (logging, libcurl, OpenSSL) under them. Counting them lets shutdown wait a little and tell whether any is left.
class Outstanding {
public:
  // One counted thread, for as long as it lives.
  class Hold {
  public:
    // Counts one more thread of `of`.
    explicit Hold(std::shared_ptr<Outstanding> of);
    ~Hold();
    Hold(Hold&& other) noexcept = default;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    Hold& operator=(Hold&&) = delete;

  private:
    std::shared_ptr<Outstanding> of_;
  };

  // Waits until none is left or `limit` passes; returns how many are left.
  int wait_for_none(std::chrono::milliseconds limit);

private:
  std::mutex mutex_;
  std::condition_variable none_;
  int count_ = 0;
};

// A fixed set of threads running cloud and worker operations. Its threads hold only shared state, so that they may
// outlive the supervisor at shutdown (an operation in flight is bounded by its own timeout).
class ActionThreads {
public:
  // Starts `threads` threads, each counted in `outstanding` while it runs an operation.
  ActionThreads(int threads, const std::shared_ptr<Outstanding>& outstanding);
  ~ActionThreads();
  ActionThreads(const ActionThreads&) = delete;
  ActionThreads& operator=(const ActionThreads&) = delete;

  // Queues `task` for the next free thread.
  void submit(std::function<void()> task);

  // Drops the operations not yet started and lets the threads end once their current one is done.
  void close();

private:
  struct State {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<std::function<void()>> tasks;
    bool closed = false;
  };
  std::shared_ptr<State> state_;
};

} // namespace jobman::core::supervision
