// The mock cloud's Cloud Storage FUSE, for worker hosts: `gcsfuse [flags] BUCKET DIR` mounts the mock bucket
// $MOCK_GCS_ROOT/BUCKET at DIR (an empty directory, as gcsfuse requires), `fusermount -u DIR` unmounts it and
// `mountpoint [-q] DIR` tells whether DIR is mounted. One program under three names. A mount is a symbolic link
// in place of the empty directory, on the host's own filesystem: the mount point is the host's and goes with it, and
// the bucket's files are the same files on every worker and survive the slice. On a host without a filesystem of its
// own (the mock runs without namespaces) DIR must lie in the host's sandbox: anywhere else is this machine's. The first
// mount of a bucket records the host's zone beside the buckets (bucket_root.hpp): the mock's Cloud Storage API places a
// bucket the world config does not by it. The link leads into the host's own directory of the mock's metered Cloud
// Storage (gcs_meter.hpp), which counts every byte the host reads and writes; with --prometheus-port PORT the mount's
// share of those counters since it was made is served at http://ADDRESS:PORT/metrics on the host's addresses, under
// gcsfuse's metric names (gcs_read_bytes_count, fs_ops_count{fs_op}, gcs_request_count{gcs_method}, ...).
#include "mock_cloud/bucket_root.hpp"
#include "mock_cloud/host_filesystem.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <set>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace {

// The mock's buckets, from the worker's environment.
fs::path bucket_root() {
  const char* root = std::getenv("MOCK_GCS_ROOT");
  if (root == nullptr || *root == '\0') {
    std::cerr << "gcsfuse: MOCK_GCS_ROOT is not set: this gcsfuse only runs on the mock cloud's worker hosts\n";
    std::exit(1);
  }
  return root;
}

// Exits with 1, saying why, unless `dir` is the host's own to change: every path is on a host with a filesystem of its
// own; without one only what lies in the host's sandbox ($MOCK_TPU_WORKER_DIR) is, the rest being this machine's.
void require_host_path(const std::string& tool, const fs::path& dir) {
  const char* own = std::getenv(jobman::mock::kOwnFilesystemVariable);
  if (own != nullptr && std::string(own) == "1") {
    return;
  }
  const char* sandbox = std::getenv("MOCK_TPU_WORKER_DIR");
  if (sandbox == nullptr || *sandbox == '\0') {
    std::cerr << tool << ": MOCK_TPU_WORKER_DIR is not set: this " << tool
              << " only runs on the mock cloud's worker hosts\n";
    std::exit(1);
  }
  // The mount point itself may be a mount (a link into the buckets): only the directory it is in is resolved.
  std::error_code ec;
  const auto absolute = fs::absolute(dir, ec).lexically_normal();
  const auto path = absolute.filename().empty()
                        ? fs::weakly_canonical(absolute, ec)
                        : fs::weakly_canonical(absolute.parent_path(), ec) / absolute.filename();
  const auto rel = path.lexically_relative(fs::weakly_canonical(sandbox, ec));
  if (!rel.empty() && *rel.begin() != "..") {
    return;
  }
  std::cerr << tool << ": mountpoint " << dir.string() << " is outside this worker host's sandbox " << sandbox
            << ": the mock cloud gives its hosts no filesystem of their own here (no namespaces), so its " << tool
            << " mounts only inside the sandbox (under ~, for one), never on this machine\n";
  std::exit(1);
}

// True when `dir` is a mount of a mock bucket.
bool is_mounted(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_symlink(dir, ec)) {
    return false;
  }
  const auto target = fs::read_symlink(dir, ec);
  const auto root = fs::weakly_canonical(bucket_root(), ec);
  return !ec && target.parent_path() == root;
}

// Records the zone of this host ($MOCK_TPU_ZONE) as where `bucket` was first mounted, unless a mount before this one
// did: the record is written whole under a private name, then linked to its own, which fails when it exists (an
// exclusive create, like O_EXCL, that no reader sees half-written). Only warns when it cannot: the mount goes on.
void record_first_mount(const fs::path& root, const std::string& bucket) {
  const char* zone = std::getenv(jobman::mock::kHostZoneVariable);
  const auto record = jobman::mock::first_mount_file(root, bucket);
  std::error_code ec;
  if (zone == nullptr || *zone == '\0' || fs::exists(record, ec)) {
    return;
  }
  // Every account of every host may record a first mount; the sticky bit keeps each from removing another's record.
  if (fs::create_directories(record.parent_path(), ec)) {
    fs::permissions(record.parent_path(), fs::perms::all | fs::perms::sticky_bit, ec);
  }
  const auto draft = record.parent_path() / ("." + bucket + "." + std::to_string(::getpid()));
  const std::string line = std::string(zone) + "\n";
  const int fd = ::open(draft.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  bool recorded = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  int error = errno;
  if (fd >= 0) {
    ::close(fd);
  }
  if (recorded && ::link(draft.c_str(), record.c_str()) != 0 && errno != EEXIST) {
    recorded = false;
    error = errno;
  }
  if (!recorded) {
    std::cerr << "gcsfuse: warning: cannot record where bucket " << bucket
              << " was first mounted: " << std::strerror(error) << "\n";
  }
  fs::remove(draft, ec);
}

// One bucket's counters, as the meter keeps them for this host: "read_bytes", "fs_op/ReadFile", ... -> value.
using Counters = std::map<std::string, std::uint64_t>;

// This host's counters for `bucket` now, from the meter's file; nullopt when the mock's Cloud Storage is unmetered.
std::optional<Counters> read_counters(const std::string& bucket) {
  std::ifstream in(bucket_root() / jobman::mock::kMeterFile);
  if (!in) {
    return std::nullopt;
  }
  Counters counters;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    std::string key;
    std::uint64_t value = 0;
    if (std::getline(fields, name, '\t') && std::getline(fields, key, '\t') && fields >> value && name == bucket) {
      counters[key] = value;
    }
  }
  return counters;
}

// The metrics text for `bucket`: what the host moved since `baseline` (the mount), under gcsfuse's metric names.
std::string metrics_text(const std::string& bucket, const Counters& baseline) {
  auto now = read_counters(bucket).value_or(Counters{});
  const auto since = [&](const std::string& key) {
    const auto base = baseline.count(key) > 0 ? baseline.at(key) : 0;
    return now[key] >= base ? now[key] - base : 0;
  };
  std::ostringstream out;
  const auto labelled = [&](const char* metric, const char* help, const std::string& prefix, const char* label) {
    out << "# HELP " << metric << " " << help << "\n# TYPE " << metric << " counter\n";
    for (const auto& [key, value] : now) {
      if (key.starts_with(prefix)) {
        out << metric << "{" << label << "=\"" << key.substr(prefix.size()) << "\"} " << since(key) << "\n";
      }
    }
  };
  labelled("fs_ops_count", "The cumulative number of ops processed by the file system.", "fs_op/", "fs_op");
  out << "# HELP gcs_read_bytes_count The cumulative number of bytes read from GCS objects.\n"
      << "# TYPE gcs_read_bytes_count counter\ngcs_read_bytes_count " << since("read_bytes") << "\n";
  labelled("gcs_reader_count", "The cumulative number of GCS object readers opened or closed.", "reader/", "io_method");
  labelled("gcs_request_count", "The cumulative number of GCS requests processed.", "gcs_method/", "gcs_method");
  return out.str();
}

// Where the metrics server of the mount at `dir` records its pid: in the host's sandbox, by the mount point.
fs::path metrics_pid_file(const fs::path& dir) {
  const char* sandbox = std::getenv("MOCK_TPU_WORKER_DIR");
  std::error_code ec;
  const auto absolute = fs::absolute(dir, ec).lexically_normal().string();
  std::ostringstream name;
  name << std::hex << std::hash<std::string>{}(absolute) << ".pid";
  return fs::path(sandbox != nullptr ? sandbox : "/tmp") / ".mock" / "gcsfuse-metrics" / name.str();
}

// Answers each connection on `listeners` with the metrics of `bucket`, until a signal ends it.
[[noreturn]] void serve_metrics(const std::vector<int>& listeners, const std::string& bucket,
                                const Counters& baseline) {
  std::vector<pollfd> waits;
  waits.reserve(listeners.size());
  for (const int fd : listeners) {
    waits.push_back({fd, POLLIN, 0});
  }
  for (;;) {
    if (::poll(waits.data(), waits.size(), -1) < 0) {
      continue;
    }
    for (const auto& wait : waits) {
      if ((wait.revents & POLLIN) == 0) {
        continue;
      }
      const int fd = ::accept4(wait.fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        continue;
      }
      // The request is read until its blank line (or 8 KiB, or 5 s): only GET /metrics is served.
      std::string request;
      pollfd readable{fd, POLLIN, 0};
      char buf[1024];
      while (request.find("\r\n\r\n") == std::string::npos && request.size() < 8192 && ::poll(&readable, 1, 5000) > 0) {
        const auto n = ::read(fd, buf, sizeof buf);
        if (n <= 0) {
          break;
        }
        request.append(buf, static_cast<std::size_t>(n));
      }
      const bool metrics = request.starts_with("GET /metrics ") || request.starts_with("GET /metrics?");
      const std::string body = metrics ? metrics_text(bucket, baseline) : "404 page not found\n";
      const std::string response =
          std::string(metrics ? "HTTP/1.1 200 OK\r\n" : "HTTP/1.1 404 Not Found\r\n") +
          "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\nConnection: close\r\n\r\n" + body;
      std::size_t sent = 0;
      while (sent < response.size()) {
        const auto n = ::write(fd, response.data() + sent, response.size() - sent);
        if (n <= 0) {
          break;
        }
        sent += static_cast<std::size_t>(n);
      }
      ::close(fd);
    }
  }
}

// gcsfuse --prometheus-port: serves the mount's metrics at http://ADDRESS:PORT/metrics on each of the host's
// addresses, from a process of its own that outlives this command (as gcsfuse's daemon does) and that fusermount -u
// ends. Listening before this returns, so a scrape right after the mount finds it. Warns and serves nothing when the
// mock meters nothing or the port is taken: the mount stands.
void start_metrics(const std::string& bucket, const fs::path& dir, int port) {
  const auto baseline = read_counters(bucket);
  if (!baseline) {
    std::cerr << "gcsfuse: warning: this mock cloud does not meter its Cloud Storage (no FUSE on its machine): "
                 "--prometheus-port serves nothing\n";
    return;
  }
  const char* addresses = std::getenv(jobman::mock::kHostAddressVariable);
  std::vector<int> listeners;
  std::istringstream list(addresses != nullptr ? addresses : "");
  std::string address;
  while (std::getline(list, address, ',')) {
    sockaddr_in where{};
    where.sin_family = AF_INET;
    where.sin_port = htons(static_cast<std::uint16_t>(port));
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    if (fd < 0 || ::inet_pton(AF_INET, address.c_str(), &where.sin_addr) != 1 ||
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::bind(fd, reinterpret_cast<const sockaddr*>(&where), sizeof where) != 0 || ::listen(fd, 64) != 0) {
      std::cerr << "gcsfuse: warning: cannot serve metrics on " << address << ":" << port << ": "
                << std::strerror(errno) << "\n";
      if (fd >= 0) {
        ::close(fd);
      }
      continue;
    }
    listeners.push_back(fd);
  }
  if (listeners.empty()) {
    return;
  }
  const auto pid_file = metrics_pid_file(dir);
  std::error_code ec;
  fs::create_directories(pid_file.parent_path(), ec);
  const pid_t first = ::fork();
  if (first == 0) {
    ::setsid();
    const pid_t server = ::fork();
    if (server == 0) {
      const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
      ::dup2(null, STDIN_FILENO);
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
      serve_metrics(listeners, bucket, *baseline);
    }
    std::ofstream(pid_file) << server << "\n";
    ::_exit(server > 0 ? 0 : 1);
  }
  for (const int fd : listeners) {
    ::close(fd);
  }
  int status = 0;
  ::waitpid(first, &status, 0);
}

// Ends the metrics server of the mount at `dir`, if it has one.
void stop_metrics(const fs::path& dir) {
  const auto pid_file = metrics_pid_file(dir);
  pid_t pid = 0;
  if (std::ifstream in(pid_file); in >> pid && pid > 0) {
    ::kill(pid, SIGTERM);
  }
  std::error_code ec;
  fs::remove(pid_file, ec);
}

int mount(const std::vector<std::string>& args) {
  // Flags gcsfuse takes with a value; the rest of the flags take none.
  static const std::set<std::string> with_value = {"-o",
                                                   "--dir-mode",
                                                   "--file-mode",
                                                   "--uid",
                                                   "--gid",
                                                   "--only-dir",
                                                   "--key-file",
                                                   "--token-url",
                                                   "--limit-bytes-per-sec",
                                                   "--limit-ops-per-sec",
                                                   "--stat-cache-ttl",
                                                   "--type-cache-ttl",
                                                   "--log-file",
                                                   "--log-format",
                                                   "--temp-dir",
                                                   "--max-conns-per-host",
                                                   "--stat-cache-capacity",
                                                   "--billing-project",
                                                   "--config-file",
                                                   "--app-name",
                                                   "--rename-dir-limit",
                                                   "--kernel-list-cache-ttl-secs",
                                                   "--metadata-cache-ttl-secs"};
  std::vector<std::string> operands;
  std::string prometheus_port;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: gcsfuse [flags] BUCKET MOUNTPOINT  (the mock cloud's stand-in)\n";
      return 0;
    }
    if (arg == "--prometheus-port" && i + 1 < args.size()) {
      prometheus_port = args[++i];
      continue;
    }
    if (arg.starts_with("--prometheus-port=")) {
      prometheus_port = arg.substr(std::string("--prometheus-port=").size());
      continue;
    }
    if (arg.rfind('-', 0) == 0) {
      if (with_value.count(arg) > 0) {
        ++i;
      }
      continue;
    }
    operands.push_back(arg);
  }
  if (operands.size() != 2) {
    std::cerr << "gcsfuse: expected BUCKET MOUNTPOINT, got " << operands.size() << " operands\n";
    return 1;
  }
  const auto& bucket = operands[0];
  const fs::path dir = operands[1];
  // No bucket name starts with '.': the bucket root keeps its records under such a name.
  if (bucket.empty() || bucket.find('/') != std::string::npos || bucket.front() == '.') {
    std::cerr << "gcsfuse: invalid bucket name '" << bucket << "'\n";
    return 1;
  }
  require_host_path("gcsfuse", dir);
  std::error_code ec;
  if (is_mounted(dir)) {
    std::cerr << "gcsfuse: Error while mounting gcsfuse: mountpoint " << dir.string() << " is not empty\n";
    return 1;
  }
  if (!fs::is_directory(dir, ec)) {
    std::cerr << "gcsfuse: Error while mounting gcsfuse: mountpoint " << dir.string() << " is not a directory\n";
    return 1;
  }
  if (!fs::is_empty(dir, ec)) {
    std::cerr << "gcsfuse: Error while mounting gcsfuse: mountpoint " << dir.string() << " is not empty\n";
    return 1;
  }
  // Every bucket exists in the mock's Cloud Storage; the first mount creates it, writable by every host's accounts
  // (a bucket has no owner among them).
  const auto root = fs::weakly_canonical(bucket_root(), ec);
  if (fs::create_directories(root / bucket, ec)) {
    fs::permissions(root / bucket, fs::perms::all, ec);
  }
  if (ec) {
    std::cerr << "gcsfuse: cannot create bucket " << bucket << ": " << ec.message() << "\n";
    return 1;
  }
  int port = 0;
  if (!prometheus_port.empty()) {
    char* end = nullptr;
    const long value = std::strtol(prometheus_port.c_str(), &end, 10);
    if (end == prometheus_port.c_str() || *end != '\0' || value < 0 || value > 65535) {
      std::cerr << "gcsfuse: invalid value \"" << prometheus_port << "\" for flag --prometheus-port\n";
      return 1;
    }
    port = static_cast<int>(value);
  }
  record_first_mount(root, bucket);
  fs::remove(dir, ec);
  fs::create_directory_symlink(root / bucket, dir, ec);
  if (ec) {
    std::cerr << "gcsfuse: cannot mount " << bucket << " at " << dir.string() << ": " << ec.message() << "\n";
    return 1;
  }
  if (port > 0) {
    start_metrics(bucket, dir, port);
  }
  std::cerr << "File system has been successfully mounted.\n";
  return 0;
}

int unmount(const std::vector<std::string>& args) {
  std::vector<std::string> operands;
  bool unmount_flag = false;
  for (const auto& arg : args) {
    if (arg == "-u" || arg == "-uz" || arg == "-zu") {
      unmount_flag = true;
    } else if (arg.rfind('-', 0) != 0) {
      operands.push_back(arg);
    }
  }
  if (!unmount_flag || operands.size() != 1) {
    std::cerr << "fusermount: expected -u MOUNTPOINT\n";
    return 1;
  }
  const fs::path dir = operands[0];
  require_host_path("fusermount", dir);
  if (!is_mounted(dir)) {
    std::cerr << "fusermount: entry for " << dir.string() << " not found in /etc/mtab\n";
    return 1;
  }
  stop_metrics(dir);
  std::error_code ec;
  fs::remove(dir, ec);
  fs::create_directory(dir, ec);
  return ec ? 1 : 0;
}

int mountpoint(const std::vector<std::string>& args) {
  bool quiet = false;
  std::vector<std::string> operands;
  for (const auto& arg : args) {
    if (arg == "-q" || arg == "--quiet") {
      quiet = true;
    } else if (arg.rfind('-', 0) != 0) {
      operands.push_back(arg);
    }
  }
  if (operands.size() != 1) {
    std::cerr << "mountpoint: bad usage\n";
    return 1;
  }
  const bool mounted = is_mounted(operands[0]);
  if (!quiet) {
    std::cout << operands[0] << (mounted ? " is a mountpoint\n" : " is not a mountpoint\n");
  }
  return mounted ? 0 : 32; // util-linux's status for "not a mountpoint".
}

} // namespace

int main(int argc, char** argv) {
  const std::string name = fs::path(argv[0]).filename().string();
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (name == "fusermount" || name == "fusermount3") {
    return unmount(args);
  }
  if (name == "mountpoint") {
    return mountpoint(args);
  }
  return mount(args);
}
