#include "threads.hpp"

#include <thread>
#include <utility>

namespace jobman::core::supervision {

void Inbox::post(Completion completion) {
  {
    const std::lock_guard lock(mutex_);
    items_.push_back(std::move(completion));
  }
  ready_.notify_one();
}

std::deque<Completion> Inbox::wait(std::chrono::steady_clock::time_point deadline, const std::stop_token& stop) {
  std::unique_lock lock(mutex_);
  ready_.wait_until(lock, stop, deadline, [&] { return !items_.empty(); });
  return std::exchange(items_, {});
}

Outstanding::Hold::Hold(std::shared_ptr<Outstanding> of) : of_(std::move(of)) {
  const std::lock_guard lock(of_->mutex_);
  ++of_->count_;
}

Outstanding::Hold::~Hold() {
  if (!of_) {
    return;
  }
  {
    const std::lock_guard lock(of_->mutex_);
    --of_->count_;
  }
  of_->none_.notify_all();
}

int Outstanding::wait_for_none(std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  none_.wait_for(lock, limit, [this] { return count_ == 0; });
  return count_;
}

ActionThreads::ActionThreads(int threads, const std::shared_ptr<Outstanding>& outstanding)
    : state_(std::make_shared<State>()) {
  for (int i = 0; i < threads; ++i) {
    std::thread([state = state_, outstanding] {
      for (;;) {
        std::function<void()> task;
        {
          std::unique_lock lock(state->mutex);
          state->ready.wait(lock, [&] { return state->closed || !state->tasks.empty(); });
          if (state->tasks.empty()) {
            return;
          }
          task = std::move(state->tasks.front());
          state->tasks.pop_front();
        }
        const Outstanding::Hold running(outstanding);
        task();
      }
    }).detach();
  }
}

ActionThreads::~ActionThreads() {
  close();
}

void ActionThreads::submit(std::function<void()> task) {
  {
    const std::lock_guard lock(state_->mutex);
    state_->tasks.push_back(std::move(task));
  }
  state_->ready.notify_one();
}

void ActionThreads::close() {
  {
    const std::lock_guard lock(state_->mutex);
    state_->closed = true;
    state_->tasks.clear();
  }
  state_->ready.notify_all();
}

} // namespace jobman::core::supervision
