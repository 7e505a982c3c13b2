#include "drop_proxy.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdexcept>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace jobman::chaos {

namespace {

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -1;
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Writes all of `data`; false when the peer is gone.
bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const auto n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

} // namespace

DropProxy::DropProxy(int upstream_port, std::uint64_t seed) : upstream_port_(upstream_port), rng_(seed) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener_ < 0 || ::pipe2(wake_, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("drop proxy: ") + std::strerror(errno));
  }
  const int one = 1;
  ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener_, 1024) != 0 || ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error(std::string("drop proxy: cannot listen: ") + std::strerror(errno));
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

DropProxy::~DropProxy() {
  stopping_ = true;
  const char byte = 0;
  [[maybe_unused]] const auto ignored = ::write(wake_[1], &byte, 1);
  acceptor_.join();
  {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return active_ == 0; });
  }
  ::close(listener_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

bool DropProxy::should_drop() {
  const double rate = drop_rate_;
  if (rate <= 0) {
    return false;
  }
  std::lock_guard lock(mutex_);
  return std::uniform_real_distribution<double>(0, 1)(rng_) < rate;
}

void DropProxy::accept_loop() {
  while (!stopping_) {
    pollfd fds[2] = {{listener_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      return;
    }
    if (fds[1].revents != 0) {
      return;
    }
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      continue;
    }
    ++connections_;
    const int upstream = connect_loopback(upstream_port_);
    if (upstream < 0) {
      ::close(client);
      continue;
    }
    {
      std::lock_guard lock(mutex_);
      ++active_;
    }
    std::thread([this, client, upstream] {
      pump(client, upstream);
      std::lock_guard lock(mutex_);
      --active_;
      idle_.notify_all();
    }).detach();
  }
}

// Copies bytes both ways until either side closes; a reply chunk may be cut off instead of forwarded.
void DropProxy::pump(int client, int upstream) {
  char buffer[65536];
  bool open = true;
  while (open && !stopping_) {
    pollfd fds[3] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    if (fds[2].revents != 0) {
      break;
    }
    for (int i = 0; i < 2 && open; ++i) {
      if (fds[i].revents == 0) {
        continue;
      }
      const int from = i == 0 ? client : upstream;
      const int to = i == 0 ? upstream : client;
      const auto n = ::recv(from, buffer, sizeof buffer, 0);
      if (n <= 0) {
        open = n < 0 && errno == EINTR;
        continue;
      }
      if (from == upstream && should_drop()) {
        ++dropped_;
        // Part of the reply, then nothing: the client sees a connection reset mid-answer.
        write_all(to, buffer, static_cast<std::size_t>(n) / 3);
        linger hard{1, 0};
        ::setsockopt(client, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
        open = false;
        continue;
      }
      open = write_all(to, buffer, static_cast<std::size_t>(n));
    }
  }
  ::close(client);
  ::close(upstream);
}

} // namespace jobman::chaos
