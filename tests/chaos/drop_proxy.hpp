// A TCP proxy in front of the mock cloud that drops connections on request: the request reaches the server, the
// connection is closed before the client has the whole reply. This is the fault a client must survive without
// repeating a mutation (the server did the work; the client never heard).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <random>
#include <thread>

namespace jobman::chaos {

class DropProxy {
public:
  // Listens on 127.0.0.1 (a free port) and forwards every connection to 127.0.0.1:`upstream_port`.
  DropProxy(int upstream_port, std::uint64_t seed);
  ~DropProxy();
  DropProxy(const DropProxy&) = delete;
  DropProxy& operator=(const DropProxy&) = delete;

  [[nodiscard]] int port() const { return port_; }
  // From now on, each chunk of a reply is cut off (both sides closed) with this probability; 0 stops dropping.
  void set_drop_rate(double rate) { drop_rate_ = rate; }
  // Connections cut so far.
  [[nodiscard]] std::int64_t dropped() const { return dropped_; }
  // Connections accepted so far.
  [[nodiscard]] std::int64_t connections() const { return connections_; }

private:
  void accept_loop();
  void pump(int client, int upstream);
  bool should_drop();

  int upstream_port_;
  int listener_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::atomic<double> drop_rate_{0};
  std::atomic<std::int64_t> dropped_{0};
  std::atomic<std::int64_t> connections_{0};
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::mt19937_64 rng_;
  std::condition_variable idle_;
  int active_ = 0; // Pump threads still running (detached; the destructor waits for them).
  std::thread acceptor_;
};

} // namespace jobman::chaos
