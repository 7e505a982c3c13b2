#include "systolic/dcn.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <map>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sstream>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

namespace jobman::systolic {

namespace {

using Clock = std::chrono::steady_clock;

// Every frame starts with these bytes, then its type (4 bytes) and its payload's size (8 bytes), little-endian.
constexpr std::string_view kFrameMagic = "SDCN";
constexpr std::size_t kFrameHeaderSize = 16;
// A frame's payload is never larger: the sums of the widest model (1024) are about 86 MB.
constexpr std::uint64_t kMaxPayload = std::uint64_t{1} << 31;
// The version of the frames below; a process speaking another is refused.
constexpr std::uint32_t kProtocolVersion = 1;
// A process other than the coordinator waits this much longer than the timeout for a step's result, so that the
// coordinator's own diagnosis of a silent process reaches it first.
constexpr auto kResultGrace = std::chrono::seconds(1);
// How long a departing process tries to deliver its last word.
constexpr auto kLeaveBound = std::chrono::seconds(1);
// Between connection attempts while nothing listens yet.
constexpr auto kConnectRetry = std::chrono::milliseconds(100);

enum class FrameType : std::uint32_t {
  hello = 1,   // Peer to coordinator: who it is and what it runs (DcnIdentity).
  welcome = 2, // Coordinator to peer: every process has joined; step one may start.
  refused = 3, // Coordinator to peer: the run cannot start, and why (text).
  partial = 4, // Peer to coordinator: step (8 bytes), then its slice's partial.
  result = 5,  // Coordinator to peer: step (8 bytes), then the reduction.
  leave = 6,   // Either way: worker (8 bytes) that left the run, then why (text).
};

void put32(std::string& out, std::uint32_t value) {
  for (int byte = 0; byte < 4; ++byte) {
    out.push_back(static_cast<char>((value >> (8 * byte)) & 0xFFU));
  }
}

void put64(std::string& out, std::uint64_t value) {
  for (int byte = 0; byte < 8; ++byte) {
    out.push_back(static_cast<char>((value >> (8 * byte)) & 0xFFU));
  }
}

// Reads little-endian integers off the front of a payload; `ok` turns false when one is cut short.
class PayloadReader {
public:
  explicit PayloadReader(std::string_view bytes) : bytes_(bytes) {}
  std::uint64_t u64() { return take(8); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(take(4)); }
  double f64() { return std::bit_cast<double>(take(8)); }
  [[nodiscard]] std::string_view rest() const { return bytes_; }
  [[nodiscard]] bool ok() const { return ok_; }

private:
  std::uint64_t take(std::size_t size) {
    if (bytes_.size() < size) {
      ok_ = false;
      bytes_ = {};
      return 0;
    }
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < size; ++i) {
      value |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes_[i])) << (8 * i);
    }
    bytes_.remove_prefix(size);
    return value;
  }

  std::string_view bytes_;
  bool ok_ = true;
};

std::string encode_frame(FrameType type, std::string_view payload) {
  std::string frame(kFrameMagic);
  put32(frame, static_cast<std::uint32_t>(type));
  put64(frame, payload.size());
  frame.append(payload);
  return frame;
}

// A frame received.
struct Frame {
  FrameType type = FrameType::hello; // What it is.
  std::string payload;               // What it carries.
};

// The identity and position a peer presents in its hello.
struct Hello {
  std::uint32_t version = 0;
  std::uint32_t slice_id = 0;
  std::uint32_t num_slices = 0;
  std::uint64_t worker_id = 0;
  std::uint64_t num_workers = 0;
  DcnIdentity identity;
};

std::string encode_hello(const DcnSettings& settings, const DcnIdentity& identity) {
  std::string out;
  put32(out, kProtocolVersion);
  put32(out, settings.slice_id);
  put32(out, settings.num_slices);
  put32(out, 0);
  put64(out, settings.worker_id);
  put64(out, settings.num_workers);
  put32(out, identity.model.dim);
  put32(out, identity.model.batch);
  put64(out, identity.model.seed);
  put64(out, std::bit_cast<std::uint64_t>(identity.model.learning_rate));
  put64(out, std::bit_cast<std::uint64_t>(identity.model.momentum));
  put64(out, identity.steps);
  put64(out, identity.start_step);
  return out;
}

std::optional<Hello> decode_hello(std::string_view payload) {
  PayloadReader in(payload);
  Hello hello;
  hello.version = in.u32();
  hello.slice_id = in.u32();
  hello.num_slices = in.u32();
  static_cast<void>(in.u32());
  hello.worker_id = in.u64();
  hello.num_workers = in.u64();
  hello.identity.model.dim = in.u32();
  hello.identity.model.batch = in.u32();
  hello.identity.model.seed = in.u64();
  hello.identity.model.learning_rate = in.f64();
  hello.identity.model.momentum = in.f64();
  hello.identity.steps = in.u64();
  hello.identity.start_step = in.u64();
  if (!in.ok() || (hello.version == kProtocolVersion && !in.rest().empty())) {
    return std::nullopt;
  }
  return hello;
}

std::string encode_step(std::uint64_t step, std::string_view bytes) {
  std::string out;
  out.reserve(8 + bytes.size());
  put64(out, step);
  out.append(bytes);
  return out;
}

std::string encode_leave(std::uint64_t worker, std::string_view reason) {
  std::string out;
  put64(out, worker);
  out.append(reason);
  return out;
}

std::string seconds_text(std::chrono::milliseconds duration) {
  std::ostringstream text;
  text << static_cast<double>(duration.count()) / 1000.0 << " s";
  return text.str();
}

std::string system_error_text(int error) {
  return std::strerror(error);
}

// A socket descriptor, closed with its owner.
class Socket {
public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { reset(); }
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] bool open() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

private:
  int fd_ = -1;
};

// Makes a connected socket send small frames at once.
void set_no_delay(int fd) {
  int one = 1;
  static_cast<void>(::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one));
}

// The IPv4 addresses of `address`, or why there are none.
std::vector<sockaddr_in> resolve(const DcnAddress& address, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  if (const int status = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found); status != 0) {
    error = "cannot resolve " + address.host + ": " + ::gai_strerror(status);
    return {};
  }
  std::vector<sockaddr_in> addresses;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_family == AF_INET && entry->ai_addrlen == sizeof(sockaddr_in)) {
      sockaddr_in in{};
      std::memcpy(&in, entry->ai_addr, sizeof in);
      addresses.push_back(in);
    }
  }
  ::freeaddrinfo(found);
  if (addresses.empty()) {
    error = "cannot resolve " + address.host + " to an IPv4 address";
  }
  return addresses;
}

// One TCP connection: frames waiting to go out (each at its due time), bytes received and not yet parsed.
struct Connection {
  Socket socket;            // The connection.
  std::uint64_t worker = 0; // The process at the other end, once known.
  bool identified = false;  // The coordinator has its hello (a peer's only connection: always).
  std::string input;        // Received bytes not yet parsed into frames.
  std::deque<Frame> frames; // Received frames not yet handled.
  std::deque<std::pair<Clock::time_point, std::string>> output; // Frames to send and when they may leave.
  std::size_t written = 0;                                      // Bytes of output.front() sent so far.
  bool closed = false;                                          // The other end closed the connection, or it failed.
  bool undelivered = false;                                     // Frames were still waiting to go out when it closed.
  std::string close_reason;                                     // Why, when closed.

  void close(std::string reason) {
    if (!closed) {
      closed = true;
      undelivered = !output.empty();
      close_reason = std::move(reason);
      output.clear();
      written = 0;
      socket.reset();
    }
  }
};

// What one turn of the event loop found.
enum class Pumped { progress, stopped, timed_out };

// The sockets of one process, driven by poll together with the stop requests.
class Network {
public:
  Network(const DcnSettings& settings, StopSignals& stop) : settings_(settings), stop_(stop) {}

  std::vector<std::unique_ptr<Connection>>& connections() { return connections_; }
  Socket& listener() { return listener_; }
  StopSignals& stop() { return stop_; }
  [[nodiscard]] int signal() const { return signal_; }

  // Queues `type` with `payload` to `to`, whose process is in slice `to_slice`. A frame to another slice leaves
  // after the frames this process sent to other slices before it have gone over the emulated link (their size over
  // the bandwidth), plus the latency; one within the slice leaves at once.
  void send(Connection& to, std::uint32_t to_slice, FrameType type, std::string_view payload) {
    if (to.closed) {
      return;
    }
    std::string frame = encode_frame(type, payload);
    auto due = Clock::now();
    if (to_slice != settings_.slice_id && type != FrameType::leave) {
      std::chrono::nanoseconds transfer{0};
      if (settings_.bandwidth_bits_per_second > 0) {
        const long double nanoseconds = static_cast<long double>(frame.size()) * 8.0L * 1e9L /
                                        static_cast<long double>(settings_.bandwidth_bits_per_second);
        transfer = std::chrono::nanoseconds(static_cast<std::int64_t>(nanoseconds));
      }
      link_free_ = std::max(link_free_, due) + transfer;
      due = link_free_ + settings_.latency;
    }
    to.output.emplace_back(due, std::move(frame));
  }

  // One turn: waits until a socket is ready, an output frame falls due, a stop request arrives, or `deadline`;
  // then reads, writes and accepts what it can.
  Pumped pump(Clock::time_point deadline, bool accepting) {
    if ((signal_ = stop_.pending()) != 0) {
      return Pumped::stopped;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return Pumped::timed_out;
    }
    auto wake = deadline;
    std::vector<pollfd> fds;
    std::vector<Connection*> polled;
    const int stop_fd = stop_.descriptor();
    if (stop_fd >= 0) {
      fds.push_back({stop_fd, POLLIN, 0});
    } else {
      wake = std::min(wake, now + std::chrono::milliseconds(50));
    }
    const std::size_t first_connection = fds.size();
    for (auto& connection : connections_) {
      if (connection->closed) {
        continue;
      }
      short events = POLLIN;
      if (!connection->output.empty()) {
        if (connection->output.front().first <= now) {
          events |= POLLOUT;
        } else {
          wake = std::min(wake, connection->output.front().first);
        }
      }
      fds.push_back({connection->socket.fd(), events, 0});
      polled.push_back(connection.get());
    }
    const bool listening = accepting && listener_.open();
    if (listening) {
      fds.push_back({listener_.fd(), POLLIN, 0});
    }
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - now);
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<std::int64_t>(wait.count(), 0)));
    if (ready < 0) {
      return Pumped::progress; // EINTR and the like: the caller turns again.
    }
    for (std::size_t i = 0; i < polled.size(); ++i) {
      const short revents = fds[first_connection + i].revents;
      Connection& connection = *polled[i];
      if ((revents & POLLOUT) != 0) {
        write_some(connection);
      }
      if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        read_some(connection);
      }
    }
    if (listening && (fds.back().revents & POLLIN) != 0) {
      const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        set_no_delay(fd);
        auto connection = std::make_unique<Connection>();
        connection->socket = Socket(fd);
        connections_.push_back(std::move(connection));
      }
    }
    return Pumped::progress;
  }

  // Turns until every queued frame has been written (true), or a stop request or `deadline` comes first.
  Pumped flush(Clock::time_point deadline) {
    while (std::any_of(connections_.begin(), connections_.end(),
                       [](const auto& connection) { return !connection->closed && !connection->output.empty(); })) {
      if (const Pumped pumped = pump(deadline, false); pumped != Pumped::progress) {
        return pumped;
      }
    }
    return Pumped::progress;
  }

  // Sends what is queued, ignoring the emulated delays, for at most `bound`; for a process on its way out.
  void drain(std::chrono::milliseconds bound) {
    for (auto& connection : connections_) {
      for (auto& pending : connection->output) {
        pending.first = Clock::now();
      }
    }
    const auto deadline = Clock::now() + bound;
    while (Clock::now() < deadline && std::any_of(connections_.begin(), connections_.end(), [](const auto& connection) {
             return !connection->closed && !connection->output.empty();
           })) {
      std::vector<pollfd> fds;
      std::vector<Connection*> polled;
      for (auto& connection : connections_) {
        if (!connection->closed && !connection->output.empty()) {
          fds.push_back({connection->socket.fd(), POLLOUT, 0});
          polled.push_back(connection.get());
        }
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<std::int64_t>(left.count(), 0))) <= 0) {
        continue;
      }
      for (std::size_t i = 0; i < polled.size(); ++i) {
        if (fds[i].revents != 0) {
          write_some(*polled[i]);
        }
      }
    }
  }

private:
  void write_some(Connection& connection) {
    while (!connection.output.empty() && connection.output.front().first <= Clock::now()) {
      const std::string& frame = connection.output.front().second;
      const ssize_t sent = ::send(connection.socket.fd(), frame.data() + connection.written,
                                  frame.size() - connection.written, MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
          return;
        }
        connection.close(errno == EPIPE || errno == ECONNRESET ? "its connection closed"
                                                               : "sending failed: " + system_error_text(errno));
        return;
      }
      connection.written += static_cast<std::size_t>(sent);
      if (connection.written == frame.size()) {
        connection.output.pop_front();
        connection.written = 0;
      }
    }
  }

  void read_some(Connection& connection) {
    char buffer[65536];
    for (;;) {
      const ssize_t got = ::recv(connection.socket.fd(), buffer, sizeof buffer, 0);
      if (got > 0) {
        connection.input.append(buffer, static_cast<std::size_t>(got));
        continue;
      }
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        break;
      }
      parse_frames(connection);
      connection.close(got == 0 || errno == ECONNRESET ? "its connection closed"
                                                       : "receiving failed: " + system_error_text(errno));
      return;
    }
    parse_frames(connection);
  }

  static void parse_frames(Connection& connection) {
    std::size_t at = 0;
    while (connection.input.size() - at >= kFrameHeaderSize) {
      const std::string_view header(connection.input.data() + at, kFrameHeaderSize);
      PayloadReader in(header.substr(kFrameMagic.size()));
      const auto type = in.u32();
      const auto size = in.u64();
      if (!header.starts_with(kFrameMagic) || size > kMaxPayload || type < 1 || type > 6) {
        connection.input.clear();
        connection.close("it sent something that is not a frame of this protocol");
        return;
      }
      if (connection.input.size() - at - kFrameHeaderSize < size) {
        break;
      }
      connection.frames.push_back({static_cast<FrameType>(type),
                                   connection.input.substr(at + kFrameHeaderSize, static_cast<std::size_t>(size))});
      at += kFrameHeaderSize + static_cast<std::size_t>(size);
    }
    connection.input.erase(0, at);
  }

  const DcnSettings& settings_;
  StopSignals& stop_;
  std::vector<std::unique_ptr<Connection>> connections_;
  Socket listener_;
  Clock::time_point link_free_{}; // When this process's emulated link to other slices is free again.
  int signal_ = 0;                // The stop request that ended the last turn.
};

DcnOutcome stopped(int signal) {
  return {DcnStatus::stopped, signal, {}};
}

DcnOutcome outcome(DcnStatus status, std::string message) {
  return {status, 0, std::move(message)};
}

// Global worker 0: listens, admits every other process, and reduces.
class CoordinatorLink : public DcnLink {
public:
  CoordinatorLink(const DcnSettings& settings, StopSignals& stop, PartialReducer reducer)
      : settings_(settings), network_(settings_, stop), reducer_(std::move(reducer)) {}

  DcnOutcome join(const DcnIdentity& identity) override {
    identity_ = identity;
    phase_ = "before step one";
    if (auto failure = listen()) {
      return *failure;
    }
    const std::uint64_t expected = settings_.num_workers - 1;
    const auto deadline = Clock::now() + settings_.timeout;
    std::map<std::uint64_t, Connection*> joined;
    while (joined.size() < expected) {
      const Pumped pumped = network_.pump(deadline, true);
      if (pumped == Pumped::stopped) {
        return stopped(network_.signal());
      }
      if (pumped == Pumped::timed_out) {
        std::string missing;
        int named = 0;
        for (std::uint64_t worker = 1; worker < settings_.num_workers; ++worker) {
          if (!joined.contains(worker) && named++ < 4) {
            missing += (missing.empty() ? "" : ", ") + settings_.describe(worker);
          }
        }
        const std::string message = "only " + std::to_string(joined.size()) + " of the " + std::to_string(expected) +
                                    " other processes joined within the " + seconds_text(settings_.timeout) +
                                    " --dcn-timeout; missing: " + missing +
                                    (expected - joined.size() > 4 ? ", ..." : "");
        leave_all(0, message);
        return outcome(DcnStatus::lost, message);
      }
      auto& connections = network_.connections();
      for (std::size_t i = 0; i < connections.size(); ++i) {
        Connection& connection = *connections[i];
        while (!connection.frames.empty()) {
          Frame frame = std::move(connection.frames.front());
          connection.frames.pop_front();
          if (connection.identified) {
            if (frame.type == FrameType::leave) {
              return lost(connection, leave_reason(frame.payload));
            }
            return protocol_error(connection, frame);
          }
          if (frame.type != FrameType::hello) {
            connection.close("it did not introduce itself");
            break;
          }
          const auto hello = decode_hello(frame.payload);
          const std::string problem = hello ? check(*hello, joined) : "it sent a malformed hello";
          if (!problem.empty()) {
            const std::string who = hello ? settings_.describe(hello->worker_id) : "a process";
            std::string message = "refused ";
            message.append(who).append(": ").append(problem);
            network_.send(connection, 0, FrameType::refused, message);
            for (auto& [worker, other] : joined) {
              network_.send(*other, settings_.slice_of(worker), FrameType::refused, message);
            }
            network_.drain(kLeaveBound);
            return outcome(DcnStatus::refused, message);
          }
          connection.identified = true;
          connection.worker = hello->worker_id;
          joined[hello->worker_id] = &connection;
        }
        if (connection.closed && connection.identified) {
          return lost(connection, connection.close_reason);
        }
      }
      // Connections that closed before they introduced themselves (a port probe, a refused process) are dropped.
      std::erase_if(connections, [](const auto& connection) { return connection->closed && !connection->identified; });
    }
    network_.listener().reset();
    // Peers in slice order, so that a slice's results leave together.
    std::sort(network_.connections().begin(), network_.connections().end(),
              [](const auto& a, const auto& b) { return a->worker < b->worker; });
    for (auto& connection : network_.connections()) {
      network_.send(*connection, settings_.slice_of(connection->worker), FrameType::welcome, {});
    }
    return finish_sending(deadline);
  }

  DcnOutcome all_reduce(std::uint64_t step, const std::string& partial, std::string& result) override {
    phase_ = "during the reduction of step=" + std::to_string(step);
    const auto deadline = Clock::now() + settings_.timeout;
    std::map<std::uint64_t, std::string> partials;
    partials[0] = partial;
    while (partials.size() < settings_.num_workers) {
      const Pumped pumped = network_.pump(deadline, false);
      if (pumped == Pumped::stopped) {
        return stopped(network_.signal());
      }
      for (auto& connection : network_.connections()) {
        while (!connection->frames.empty()) {
          Frame frame = std::move(connection->frames.front());
          connection->frames.pop_front();
          if (frame.type == FrameType::leave) {
            return lost(*connection, leave_reason(frame.payload));
          }
          PayloadReader in(frame.payload);
          const std::uint64_t their_step = in.u64();
          if (frame.type != FrameType::partial || !in.ok() || their_step != step ||
              partials.contains(connection->worker)) {
            return protocol_error(*connection, frame);
          }
          partials[connection->worker] = std::string(in.rest());
        }
        if (connection->closed) {
          return lost(*connection, connection->close_reason);
        }
      }
      if (pumped == Pumped::timed_out) {
        for (auto& connection : network_.connections()) {
          if (!partials.contains(connection->worker)) {
            return lost(*connection, "no partial within the " + seconds_text(settings_.timeout) + " --dcn-timeout");
          }
        }
      }
    }
    // One partial per slice, in slice order; every process of a slice must have computed the same.
    std::vector<std::string> by_slice(settings_.num_slices);
    for (const auto& [worker, bytes] : partials) {
      const std::uint64_t first = settings_.slice_of(worker) * settings_.hosts_per_slice();
      if (worker == first) {
        by_slice[settings_.slice_of(worker)] = bytes;
      } else if (bytes != partials.at(first)) {
        const std::string message = "the processes of slice " + std::to_string(settings_.slice_of(worker)) +
                                    " disagree " + phase_ + ": worker " + std::to_string(worker) +
                                    "'s partial differs from worker " + std::to_string(first) + "'s";
        leave_all(worker, message);
        return outcome(DcnStatus::failed, message);
      }
    }
    result = reducer_(by_slice);
    const std::string payload = encode_step(step, result);
    for (auto& connection : network_.connections()) {
      network_.send(*connection, settings_.slice_of(connection->worker), FrameType::result, payload);
    }
    return finish_sending(Clock::now() + settings_.timeout);
  }

  void leave(const std::string& reason) override { leave_all(0, reason); }

private:
  // Listens on the coordinator's address; nothing when it does, else the failure.
  std::optional<DcnOutcome> listen() {
    const DcnAddress address{settings_.coordinator_host, settings_.port};
    const std::string where = address.host + ":" + std::to_string(address.port);
    std::string error;
    const auto addresses = resolve(address, error);
    if (addresses.empty()) {
      return outcome(DcnStatus::failed, "cannot listen on " + where + ": " + error);
    }
    Socket listener(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!listener.open()) {
      return outcome(DcnStatus::failed, "cannot listen on " + where + ": socket: " + system_error_text(errno));
    }
    int one = 1;
    static_cast<void>(::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
    const auto& bound = addresses.front();
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API takes a generic address.
    if (::bind(listener.fd(), reinterpret_cast<const sockaddr*>(&bound), sizeof bound) != 0 ||
        ::listen(listener.fd(), 128) != 0) {
      return outcome(DcnStatus::failed, "cannot listen on " + where + ": " + system_error_text(errno));
    }
    network_.listener() = std::move(listener);
    return std::nullopt;
  }

  // Why `hello` cannot join the run; empty when it can.
  std::string check(const Hello& hello, const std::map<std::uint64_t, Connection*>& joined) const {
    if (hello.version != kProtocolVersion) {
      return "it speaks version " + std::to_string(hello.version) + " of the protocol, the coordinator " +
             std::to_string(kProtocolVersion);
    }
    if (hello.num_slices != settings_.num_slices || hello.num_workers != settings_.num_workers) {
      return "it counts " + std::to_string(hello.num_slices) + " slices and " + std::to_string(hello.num_workers) +
             " processes, the coordinator " + std::to_string(settings_.num_slices) + " and " +
             std::to_string(settings_.num_workers);
    }
    if (hello.worker_id == 0 || hello.worker_id >= settings_.num_workers) {
      return "worker " + std::to_string(hello.worker_id) + " is not one of the run's workers 1.." +
             std::to_string(settings_.num_workers - 1);
    }
    if (hello.slice_id != settings_.slice_of(hello.worker_id)) {
      return "it says it is in slice " + std::to_string(hello.slice_id) + ", but with " +
             std::to_string(settings_.hosts_per_slice()) + " processes per slice worker " +
             std::to_string(hello.worker_id) + " is in slice " + std::to_string(settings_.slice_of(hello.worker_id));
    }
    if (joined.contains(hello.worker_id)) {
      return "worker " + std::to_string(hello.worker_id) + " has already joined";
    }
    const std::string there = "at worker " + std::to_string(hello.worker_id);
    if (!(hello.identity.model == identity_.model)) {
      return "its run differs: " +
             describe_config_differences(hello.identity.model, identity_.model, there, "at the coordinator");
    }
    if (hello.identity.steps != identity_.steps) {
      return "its run differs: --steps " + std::to_string(hello.identity.steps) + " " + there + ", " +
             std::to_string(identity_.steps) + " at the coordinator";
    }
    if (hello.identity.start_step != identity_.start_step) {
      return "it starts from step=" + std::to_string(hello.identity.start_step) +
             ", the coordinator from step=" + std::to_string(identity_.start_step) +
             " (they read different checkpoints)";
    }
    return "";
  }

  // Writes the queued frames before `deadline`.
  DcnOutcome finish_sending(Clock::time_point deadline) {
    const Pumped pumped = network_.flush(deadline);
    if (pumped == Pumped::stopped) {
      return stopped(network_.signal());
    }
    for (auto& connection : network_.connections()) {
      // A process that took everything and then ended is not lost yet: it may have finished the run.
      if (connection->closed && connection->undelivered) {
        return lost(*connection, connection->close_reason);
      }
      if (pumped == Pumped::timed_out && !connection->output.empty()) {
        return lost(*connection, "it took nothing within the " + seconds_text(settings_.timeout) + " --dcn-timeout");
      }
    }
    return {};
  }

  // `connection`'s process is gone: tells the others and says so.
  DcnOutcome lost(const Connection& connection, const std::string& reason) {
    const std::string message = "lost " + settings_.describe(connection.worker) + " " + phase_ + ": " + reason;
    leave_all(connection.worker, reason);
    return outcome(DcnStatus::lost, message);
  }

  DcnOutcome protocol_error(Connection& connection, const Frame& frame) {
    const std::string reason =
        "it sent an unexpected message (type " + std::to_string(static_cast<std::uint32_t>(frame.type)) + ")";
    connection.close(reason);
    const std::string message = settings_.describe(connection.worker) + " broke the protocol " + phase_ + ": " + reason;
    leave_all(connection.worker, reason);
    return outcome(DcnStatus::failed, message);
  }

  // Tells every connected process that `worker` left the run because of `reason`.
  void leave_all(std::uint64_t worker, const std::string& reason) {
    for (auto& connection : network_.connections()) {
      if (connection->identified && connection->worker != worker) {
        network_.send(*connection, settings_.slice_of(connection->worker), FrameType::leave,
                      encode_leave(worker, reason));
      }
    }
    network_.drain(kLeaveBound);
  }

  static std::string leave_reason(std::string_view payload) {
    PayloadReader in(payload);
    static_cast<void>(in.u64());
    return std::string(in.rest());
  }

  DcnSettings settings_;
  Network network_;
  PartialReducer reducer_;
  DcnIdentity identity_;
  std::string phase_; // "before step one" or "during the reduction of step=K", for messages.
};

// Every process but global worker 0: connects to the coordinator.
class PeerLink : public DcnLink {
public:
  PeerLink(const DcnSettings& settings, StopSignals& stop) : settings_(settings), network_(settings_, stop) {}

  DcnOutcome join(const DcnIdentity& identity) override {
    phase_ = "before step one";
    const auto deadline = Clock::now() + settings_.timeout;
    if (auto failure = connect(deadline)) {
      return *failure;
    }
    network_.send(coordinator(), 0, FrameType::hello, encode_hello(settings_, identity));
    Frame frame;
    if (auto failure = receive(deadline, frame)) {
      return *failure;
    }
    if (frame.type == FrameType::refused) {
      return outcome(DcnStatus::refused, "the coordinator " + frame.payload);
    }
    if (frame.type != FrameType::welcome) {
      return unexpected(frame);
    }
    return {};
  }

  DcnOutcome all_reduce(std::uint64_t step, const std::string& partial, std::string& result) override {
    phase_ = "during the reduction of step=" + std::to_string(step);
    network_.send(coordinator(), 0, FrameType::partial, encode_step(step, partial));
    Frame frame;
    if (auto failure = receive(Clock::now() + settings_.timeout + kResultGrace, frame)) {
      return *failure;
    }
    PayloadReader in(frame.payload);
    if (frame.type != FrameType::result || in.u64() != step || !in.ok()) {
      return unexpected(frame);
    }
    result = std::string(in.rest());
    return {};
  }

  void leave(const std::string& reason) override {
    if (!network_.connections().empty()) {
      network_.send(coordinator(), 0, FrameType::leave, encode_leave(settings_.worker_id, reason));
      network_.drain(kLeaveBound);
    }
  }

private:
  Connection& coordinator() { return *network_.connections().front(); }

  // Connects to the coordinator, retrying while nothing listens there yet, until `deadline`.
  std::optional<DcnOutcome> connect(Clock::time_point deadline) {
    const DcnAddress address{settings_.coordinator_host, settings_.port};
    const std::string where = address.host + ":" + std::to_string(address.port);
    std::string error;
    const auto addresses = resolve(address, error);
    if (addresses.empty()) {
      return outcome(DcnStatus::failed, "cannot reach the coordinator: " + error);
    }
    std::string last_error = "nothing answered";
    for (;;) {
      Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!socket.open()) {
        return outcome(DcnStatus::failed, "cannot reach the coordinator: socket: " + system_error_text(errno));
      }
      const auto& target = addresses.front();
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API takes a generic address.
      int status = ::connect(socket.fd(), reinterpret_cast<const sockaddr*>(&target), sizeof target);
      int error_number = status == 0 ? 0 : errno;
      if (error_number == EINPROGRESS) {
        // Wait for the connection with the stop requests.
        for (;;) {
          std::vector<pollfd> fds{{socket.fd(), POLLOUT, 0}};
          StopSignals& stop = stop_signals();
          if (stop.descriptor() >= 0) {
            fds.push_back({stop.descriptor(), POLLIN, 0});
          }
          if (const int signal = stop.pending(); signal != 0) {
            return stopped(signal);
          }
          const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
          if (left.count() <= 0) {
            error_number = ETIMEDOUT;
            break;
          }
          const int wait =
              static_cast<int>(std::min<std::int64_t>(left.count(), stop.descriptor() >= 0 ? left.count() : 50));
          if (::poll(fds.data(), fds.size(), wait) > 0 && fds[0].revents != 0) {
            socklen_t size = sizeof error_number;
            static_cast<void>(::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &error_number, &size));
            break;
          }
        }
      }
      if (error_number == 0) {
        set_no_delay(socket.fd());
        auto connection = std::make_unique<Connection>();
        connection->socket = std::move(socket);
        connection->identified = true;
        network_.connections().push_back(std::move(connection));
        return std::nullopt;
      }
      last_error = system_error_text(error_number);
      if (error_number != ECONNREFUSED && error_number != ETIMEDOUT && error_number != ENETUNREACH &&
          error_number != EHOSTUNREACH && error_number != ECONNRESET && error_number != EADDRNOTAVAIL) {
        std::string message = "cannot reach the coordinator at ";
        message.append(where).append(": ").append(last_error);
        return outcome(DcnStatus::failed, message);
      }
      if (Clock::now() + kConnectRetry >= deadline) {
        std::string message = "the coordinator at ";
        message.append(where)
            .append(" did not answer within the ")
            .append(seconds_text(settings_.timeout))
            .append(" --dcn-timeout (")
            .append(last_error)
            .append(")");
        return outcome(DcnStatus::lost, message);
      }
      if (const int signal = stop_signals().wait_for(kConnectRetry); signal != 0) {
        return stopped(signal);
      }
    }
  }

  // Waits for the coordinator's next frame until `deadline`; nothing when it came, else the failure.
  std::optional<DcnOutcome> receive(Clock::time_point deadline, Frame& frame) {
    Connection& from = coordinator();
    for (;;) {
      if (!from.frames.empty()) {
        frame = std::move(from.frames.front());
        from.frames.pop_front();
        if (frame.type == FrameType::leave) {
          PayloadReader in(frame.payload);
          const std::uint64_t worker = in.u64();
          return outcome(DcnStatus::lost,
                         "lost " + settings_.describe(worker) + " " + phase_ + ": " + std::string(in.rest()));
        }
        return std::nullopt;
      }
      if (from.closed) {
        return outcome(DcnStatus::lost, "lost " + settings_.describe(0) + " " + phase_ + ": " + from.close_reason);
      }
      const Pumped pumped = network_.pump(deadline, false);
      if (pumped == Pumped::stopped) {
        return stopped(network_.signal());
      }
      if (pumped == Pumped::timed_out && from.frames.empty()) {
        return outcome(DcnStatus::lost, "lost " + settings_.describe(0) + " " + phase_ + ": no answer within the " +
                                            seconds_text(settings_.timeout) + " --dcn-timeout");
      }
    }
  }

  DcnOutcome unexpected(const Frame& frame) {
    return outcome(DcnStatus::failed, "the coordinator broke the protocol " + phase_ +
                                          ": it sent an unexpected message (type " +
                                          std::to_string(static_cast<std::uint32_t>(frame.type)) + ")");
  }

  StopSignals& stop_signals() { return network_.stop(); }

  DcnSettings settings_;
  Network network_;
  std::string phase_; // "before step one" or "during the reduction of step=K", for messages.
};

} // namespace

std::string DcnSettings::describe(std::uint64_t worker) const {
  return "slice " + std::to_string(slice_of(worker)) + " (worker " + std::to_string(worker) +
         (worker == 0 ? ", the coordinator)" : ")");
}

std::unique_ptr<DcnLink> make_dcn_link(const DcnSettings& settings, StopSignals& stop, PartialReducer reducer) {
  if (settings.coordinator()) {
    return std::make_unique<CoordinatorLink>(settings, stop, std::move(reducer));
  }
  return std::make_unique<PeerLink>(settings, stop);
}

std::optional<DcnAddress> parse_dcn_address(const std::string& text, std::uint16_t default_port) {
  DcnAddress address{text, default_port};
  if (const auto colon = text.rfind(':'); colon != std::string::npos) {
    address.host = text.substr(0, colon);
    const std::string port = text.substr(colon + 1);
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return std::nullopt;
    }
    address.port = static_cast<std::uint16_t>(value);
  }
  if (address.host.empty() || address.host.find(':') != std::string::npos) {
    return std::nullopt;
  }
  return address;
}

} // namespace jobman::systolic
