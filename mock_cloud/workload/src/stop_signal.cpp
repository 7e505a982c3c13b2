#include "systolic/stop_signal.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <poll.h>
#include <sys/signalfd.h>
#include <system_error>
#include <unistd.h>

namespace jobman::systolic {

namespace {

// SIGTERM and SIGINT read from a signalfd while they are blocked.
class SignalFdStopSignals : public StopSignals {
public:
  SignalFdStopSignals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (const int error = ::pthread_sigmask(SIG_BLOCK, &set, nullptr); error != 0) {
      throw std::system_error(error, std::generic_category(), "pthread_sigmask");
    }
    fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd_ < 0) {
      throw std::system_error(errno, std::generic_category(), "signalfd");
    }
  }
  ~SignalFdStopSignals() override { ::close(fd_); }
  SignalFdStopSignals(const SignalFdStopSignals&) = delete;
  SignalFdStopSignals& operator=(const SignalFdStopSignals&) = delete;

  int pending() override { return wait_for(std::chrono::milliseconds(0)); }

  [[nodiscard]] int descriptor() const override { return fd_; }

  int wait_for(std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (received_ == 0) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd fds{fd_, POLLIN, 0};
      const int ready = ::poll(&fds, 1, static_cast<int>(std::max<std::chrono::milliseconds::rep>(left.count(), 0)));
      if (ready > 0) {
        signalfd_siginfo info{};
        if (::read(fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
          received_ = static_cast<int>(info.ssi_signo);
        }
      } else if (ready < 0 && errno != EINTR) {
        throw std::system_error(errno, std::generic_category(), "poll");
      } else if (ready == 0 && left.count() <= 0) {
        break;
      }
    }
    return received_;
  }

private:
  int fd_ = -1;      // The signalfd.
  int received_ = 0; // The first stop signal read, or 0.
};

} // namespace

std::unique_ptr<StopSignals> make_process_stop_signals() {
  return std::make_unique<SignalFdStopSignals>();
}

} // namespace jobman::systolic
