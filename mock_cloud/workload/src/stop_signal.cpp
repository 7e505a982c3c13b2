#include "systolic/stop_signal.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <system_error>
#include <unistd.h>

namespace jobman::systolic {

int StopSignals::block_until_stopped() {
  int signal = 0;
  while (signal == 0) {
    signal = wait_for(std::chrono::hours(1));
  }
  return signal;
}

namespace {

// The write end of the pipe block_until_stopped() reads, for the signal handler; -1 outside it.
volatile std::sig_atomic_t wake_fd = -1;

// Wakes the blocked read with the signal's number.
extern "C" void wake_blocked_read(int signal) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(signal);
  static_cast<void>(::write(wake_fd, &byte, 1));
  errno = saved;
}

// SIGTERM and SIGINT read from a signalfd while they are blocked.
class SignalFdStopSignals : public StopSignals {
public:
  SignalFdStopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    if (const int error = ::pthread_sigmask(SIG_BLOCK, &set_, nullptr); error != 0) {
      throw std::system_error(error, std::generic_category(), "pthread_sigmask");
    }
    fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
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

  int block_until_stopped() override {
    if (received_ != 0) {
      return received_;
    }
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
      throw std::system_error(errno, std::generic_category(), "pipe2");
    }
    wake_fd = pipe_fds[1];
    struct sigaction action {};
    action.sa_handler = wake_blocked_read;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGTERM, &action, nullptr);
    ::sigaction(SIGINT, &action, nullptr);
    // A request that arrived meanwhile is still pending: it reaches the handler as soon as the mask lets it.
    ::pthread_sigmask(SIG_UNBLOCK, &set_, nullptr);
    unsigned char byte = 0;
    ssize_t got = 0;
    while ((got = ::read(pipe_fds[0], &byte, 1)) != 1) {
      if (got < 0 && errno != EINTR) {
        throw std::system_error(errno, std::generic_category(), "read");
      }
    }
    ::pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    wake_fd = -1;
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    received_ = byte;
    return received_;
  }

private:
  sigset_t set_{};   // SIGTERM and SIGINT.
  int fd_ = -1;      // The signalfd.
  int received_ = 0; // The first stop signal read, or 0.
};

} // namespace

std::unique_ptr<StopSignals> make_process_stop_signals() {
  return std::make_unique<SignalFdStopSignals>();
}

} // namespace jobman::systolic
