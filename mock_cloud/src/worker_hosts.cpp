#include "mock_cloud/worker_hosts.hpp"

#include "jobman/util/error.hpp"
#include "jobman/util/process.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/bucket_root.hpp"
#include "mock_cloud/host_filesystem.hpp"
#include "mock_cloud/host_sshd.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace jobman::mock {

namespace {

constexpr const char* kMarkerVariable = "MOCK_TPU_HOST";
// Where a host's step fault files live, under its .mock/: every account of the host may write there, since the
// workload consumes the files (removes or rewrites them) as whichever account runs it.
constexpr const char* kStepFaultsDir = "faults";
constexpr const char* kLossSpikeFile = "loss-spike";
constexpr const char* kHangFile = "hang";

// Makes `dir` (a host's .mock/faults) a directory every account of the host may write.
void ensure_step_faults_dir(const std::filesystem::path& dir) {
  util::ensure_directory(dir, 0755);
  std::error_code ec;
  std::filesystem::permissions(dir, std::filesystem::perms::all, ec);
}

// True when `path` is `dir` or lies under it (both absolute and normal).
bool is_within(const std::filesystem::path& path, const std::filesystem::path& dir) {
  const auto rel = path.lexically_normal().lexically_relative(dir.lexically_normal());
  return !rel.empty() && *rel.begin() != "..";
}

// The zone of a node, from its name "projects/P/locations/ZONE/nodes/ID"; empty for any other name.
std::string zone_of_node(const std::string& node_name) {
  constexpr std::string_view kLocations = "/locations/";
  const auto start = node_name.find(kLocations);
  if (start == std::string::npos) {
    return {};
  }
  const auto from = start + kLocations.size();
  return node_name.substr(from, node_name.find('/', from) - from);
}

} // namespace

const char* to_string(HomeMode mode) {
  return mode == HomeMode::namespace_ ? "namespace" : "sandbox";
}

std::optional<std::string> probe_home_namespaces(const std::filesystem::path& tools) {
  const auto helper = tools / "jobman-mock-host-login";
  std::error_code ec;
  if (!std::filesystem::exists(helper, ec)) {
    return helper.string() + " is missing";
  }
  util::ProcessBuilder probe({helper.string(), "--probe"});
  probe.input(util::Stream::null()).output(util::Stream::null()).error(util::Stream::pipe());
  auto child = probe.spawn();
  std::string said;
  std::array<char, 512> buffer{};
  for (;;) {
    const auto n = ::read(child.err_fd, buffer.data(), buffer.size());
    if (n > 0) {
      said.append(buffer.data(), static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  util::close_fd(child.err_fd);
  const int status = util::wait_exit(child.pid);
  if (status == 0) {
    return std::nullopt;
  }
  while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) {
    said.pop_back();
  }
  return said.empty() ? "the probe exited with " + std::to_string(status) : said;
}

std::vector<pid_t> find_marked_processes(const std::string& prefix, Marked which) {
  const std::string wanted = std::string(kMarkerVariable) + "=" + prefix;
  const pid_t self = ::getpid();
  std::vector<pid_t> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    const auto pid = static_cast<pid_t>(std::stol(name));
    if (pid == self) {
      continue;
    }
    // A zombie has finished: it holds no resources and cannot be signalled away, so it does not count.
    std::ifstream stat(entry.path() / "stat");
    std::string stat_line;
    std::getline(stat, stat_line);
    const auto close_paren = stat_line.rfind(')');
    if (close_paren == std::string::npos || close_paren + 2 >= stat_line.size() || stat_line[close_paren + 2] == 'Z') {
      continue;
    }
    if (which == Marked::workload && stat_line.compare(stat_line.find('(') + 1, 5, "sshd)") == 0) {
      continue;
    }
    std::ifstream environ(entry.path() / "environ", std::ios::binary);
    std::string variable;
    while (std::getline(environ, variable, '\0')) {
      if (variable.compare(0, wanted.size(), wanted) == 0) {
        found.push_back(pid);
        break;
      }
    }
  }
  return found;
}

namespace {

// Sends `signal` to every process carrying the prefix; returns how many there were.
std::size_t signal_all(const std::string& prefix, int signal) {
  const auto pids = find_marked_processes(prefix);
  for (pid_t pid : pids) {
    ::kill(pid, signal);
  }
  return pids.size();
}

// Polls the process table until no process carries the prefix or `limit` passes; true when none is left.
bool await_none(const std::string& prefix, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (find_marked_processes(prefix).empty()) {
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A short stable tag of the root directory: the markers of two mocks with different roots never collide, and a
// restarted mock with the same root finds what its predecessor started.
std::string root_tag(const std::filesystem::path& root) {
  std::ostringstream out;
  out << std::hex << std::hash<std::string>{}(std::filesystem::absolute(root).lexically_normal().string());
  return out.str();
}

} // namespace

WorkerHosts::WorkerHosts(WorkerHostsOptions options) : options_(std::move(options)) {
  util::ensure_directory(options_.root, 0700);
  util::ensure_directory(options_.buckets, 0700);
  // Every account of every host may make and write buckets, as every user with the project's credentials may in
  // Cloud Storage. This machine's other users are kept out by the mock's own directory (mode 0700) around it.
  std::filesystem::permissions(options_.buckets, std::filesystem::perms::all);
  // A host sees the mock's directories at these paths, and a path through a symbolic link of this machine (/lib ->
  // usr/lib) could not be bound there. The marker keeps the root's tag as given, so markers stay as they were.
  tag_ = root_tag(options_.root);
  options_.root = std::filesystem::canonical(options_.root);
  options_.buckets = std::filesystem::canonical(options_.buckets);
  std::error_code ec;
  if (auto tools = std::filesystem::weakly_canonical(options_.tools, ec); !ec && !options_.tools.empty()) {
    options_.tools = tools;
  }
  for (auto& dir : options_.visible) {
    dir = std::filesystem::weakly_canonical(std::filesystem::absolute(dir), ec);
  }
  if (!options_.sshd.empty()) {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd_ < 0 || wake_fd_ < 0) {
      throw Error(std::string("cannot watch the hosts' SSH ports: ") + std::strerror(errno));
    }
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = wake_fd_;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event);
    agent_ = std::thread([this] { agent_loop(); });
  }
}

WorkerHosts::~WorkerHosts() {
  if (agent_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_agent();
    agent_.join();
    for (const auto& door : doors_) {
      ::close(door.first);
    }
    doors_.clear();
    ::close(epoll_fd_);
    ::close(wake_fd_);
    // Every open connection drops with the hosts.
    for (const auto& sshd : sshd_pids_) {
      ::kill(-sshd.first, SIGKILL);
      ::waitpid(sshd.first, nullptr, 0);
    }
    sshd_pids_.clear();
  }
  wait_idle();
  // Every process any slice of this mock started: SIGTERM, the grace period, then SIGKILL. Sandboxes stay, so a
  // mock restarted on the same state directory finds its slices' disks as a rebooted VM would.
  const auto prefix = marker_prefix();
  if (signal_all(prefix, SIGTERM) > 0 && !await_none(prefix, options_.grace)) {
    signal_all(prefix, SIGKILL);
    await_none(prefix, std::chrono::seconds(5));
  }
}

std::filesystem::path WorkerHosts::slice_dir(const SliceHosts& slice) const {
  const auto id = slice.node_name.substr(slice.node_name.rfind('/') + 1);
  return options_.root / (id + "-" + slice.numeric_id);
}

void WorkerHosts::slice_ready(const SliceHosts& slice) {
  std::lock_guard lock(mutex_);
  auto& known = slices_[slice.node_name];
  if (known.hosts.numeric_id == slice.numeric_id) {
    return;
  }
  known = Slice{slice, slice_dir(slice), false, {}};
  known.published.resize(static_cast<std::size_t>(slice.hosts()));
  for (int w = 0; w < slice.hosts(); ++w) {
    const auto dir = known.dir / ("worker-" + std::to_string(w));
    util::ensure_directory(dir / "homes", 0755);
    util::ensure_directory(dir / "root", 0755);
    util::ensure_directory(dir / "tmp", 0700);
    util::ensure_directory(dir / ".mock", 0755);
    // The mock's docker keeps the host's images and containers here, whichever account runs it.
    util::ensure_directory(dir / ".mock" / "docker", 0700);
    std::filesystem::permissions(dir / ".mock" / "docker", std::filesystem::perms::all);
    ensure_step_faults_dir(dir / ".mock" / kStepFaultsDir);
    // A host placed on a machine that is faulty already sees the fault from the start.
    if (slice.machines[static_cast<std::size_t>(w)].faulty) {
      util::write_file_atomic(dir / ".mock" / "faulty", "", 0600);
    }
  }
  if (agent_.joinable()) {
    pending_.insert(slice.node_name);
    wake_agent();
  }
}

void WorkerHosts::slice_keys(const std::string& node_name, const std::vector<SshKey>& keys) {
  std::lock_guard lock(mutex_);
  auto it = slices_.find(node_name);
  if (it == slices_.end() || it->second.hosts.ssh_keys == keys) {
    return;
  }
  it->second.hosts.ssh_keys = keys;
  if (agent_.joinable()) {
    pending_.insert(node_name);
    wake_agent();
  }
}

std::optional<std::map<std::string, std::string>> WorkerHosts::ssh_attributes(const std::string& node_name,
                                                                              int worker) {
  if (options_.sshd.empty()) {
    return std::nullopt;
  }
  std::lock_guard lock(mutex_);
  auto it = slices_.find(node_name);
  if (it == slices_.end() || worker < 0 || worker >= static_cast<int>(it->second.published.size())) {
    return std::map<std::string, std::string>{};
  }
  return it->second.published[static_cast<std::size_t>(worker)];
}

bool WorkerHosts::address_free(const std::string& address) {
  return options_.sshd.empty() || host_sshd::port_free(address, options_.ssh_port);
}

std::filesystem::path WorkerHosts::gcs_root(const SliceHosts& slice, int worker) const {
  if (options_.meter == nullptr) {
    return options_.buckets;
  }
  return options_.meter->host_root(slice.numeric_id + "-" + std::to_string(worker));
}

std::string WorkerHosts::host_addresses(const SliceHosts& slice, int worker) {
  const auto& [internal, external] = slice.addresses.at(static_cast<std::size_t>(worker));
  return external == internal || external.empty() ? internal : internal + "," + external;
}

std::string WorkerHosts::host_marker(const SliceHosts& slice, int worker) const {
  return marker_prefix() + slice.numeric_id + "/" + std::to_string(worker);
}

void WorkerHosts::wake_agent() {
  const std::uint64_t one = 1;
  static_cast<void>(::write(wake_fd_, &one, sizeof one));
}

void WorkerHosts::agent_loop() {
  constexpr int kEvents = 64;
  std::array<epoll_event, kEvents> events{};
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    const int ready = ::epoll_wait(epoll_fd_, events.data(), kEvents, 200);
    lock.lock();
    // The sshd processes whose connection ended: nobody's zombies.
    std::erase_if(sshd_pids_, [](const auto& sshd) { return ::waitpid(sshd.first, nullptr, WNOHANG) != 0; });
    for (int i = 0; i < ready; ++i) {
      const int fd = events.at(static_cast<std::size_t>(i)).data.fd;
      if (fd == wake_fd_) {
        std::uint64_t count = 0;
        static_cast<void>(::read(wake_fd_, &count, sizeof count));
        continue;
      }
      accept_connections_locked(fd);
    }
    while (!stopping_ && !pending_.empty()) {
      const auto name = *pending_.begin();
      pending_.erase(pending_.begin());
      try {
        serve_slice(lock, name);
      } catch (const std::exception& e) {
        std::cerr << "jobman-mock-cloud: the hosts of " << name << " cannot serve SSH: " << e.what() << "\n";
      }
    }
  }
}

void WorkerHosts::accept_connections_locked(int listener) {
  const auto door = doors_.find(listener);
  for (;;) {
    const int connection = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) {
      return; // None waiting (or the socket is gone).
    }
    if (door == doors_.end()) {
      ::close(connection);
      continue;
    }
    try {
      sshd_pids_.emplace_back(host_sshd::serve_connection(options_.sshd, options_.tools / "jobman-mock-host-login",
                                                          door->second.host, connection),
                              door->second.node_name);
    } catch (const std::exception& e) {
      std::cerr << "jobman-mock-cloud: cannot serve an SSH connection to " << door->second.host.hostname << ": "
                << e.what() << "\n";
    }
    ::close(connection);
  }
}

void WorkerHosts::close_doors_locked(const std::string& node_name) {
  std::erase_if(doors_, [&node_name](const auto& door) {
    if (door.second.node_name != node_name) {
      return false;
    }
    ::close(door.first); // Also takes it out of the epoll set.
    return true;
  });
}

void WorkerHosts::serve_slice(std::unique_lock<std::mutex>& lock, const std::string& node_name) {
  auto it = slices_.find(node_name);
  if (it == slices_.end()) {
    return;
  }
  const SliceHosts slice = it->second.hosts;
  const auto slice_path = it->second.dir;
  const bool start = !it->second.started;
  it->second.started = true;
  lock.unlock();
  // Each host's accounts and keys, its host key and its sshd's configuration, before it takes a connection.
  std::vector<host_sshd::SshHost> hosts;
  std::vector<std::string> host_keys;
  try {
    for (int w = 0; w < slice.hosts(); ++w) {
      host_sshd::SshHost host;
      host.dir = slice_path / ("worker-" + std::to_string(w));
      host.hostname = slice.hostnames.at(static_cast<std::size_t>(w));
      const auto& [internal, external] = slice.addresses.at(static_cast<std::size_t>(w));
      host.addresses = {internal};
      if (external != internal) {
        host.addresses.push_back(external);
      }
      host.port = options_.ssh_port;
      const auto described = host_description(slice, slice_path, w, "root");
      host.env = described.env;
      host.keep = described.keep;
      host.keep_read_only = described.keep_read_only;
      for (const auto& [variable, value] : described.env) {
        if (variable != "HOME" && variable != "USER" && variable != "LOGNAME" && variable != "SHELL" &&
            variable != "TMPDIR" && variable != "CLOUDSDK_CONFIG") {
          host.session_env[variable] = value;
        }
      }
      host.session_env["PATH"] =
          options_.tools.string() + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
      host.session_env[kOwnFilesystemVariable] = "1";
      host.gcs = gcs_root(slice, w);
      host.session_env["MOCK_GCS_ROOT"] = host_sshd::kHostGcsPath;
      host.session_env["MOCK_TPU_WORKER_DIR"] = host_sshd::kHostSandboxPath;
      host.session_env["MOCK_TPU_FAULT_FILE"] = std::string(host_sshd::kHostSandboxPath) + "/.mock/faulty";
      const auto faults = std::filesystem::path(host_sshd::kHostSandboxPath) / ".mock" / kStepFaultsDir;
      host.session_env["MOCK_TPU_LOSS_SPIKE_FILE"] = (faults / kLossSpikeFile).string();
      host.session_env["MOCK_TPU_HANG_FILE"] = (faults / kHangFile).string();
      host_sshd::sync_accounts(host, slice.ssh_keys);
      if (start) {
        host_keys.push_back(host_sshd::ensure_host_key(options_.ssh_keygen, host));
        host_sshd::write_config(host);
      }
      hosts.push_back(std::move(host));
    }
  } catch (...) {
    lock.lock();
    throw;
  }
  lock.lock();
  it = slices_.find(node_name);
  if (!start || it == slices_.end() || it->second.hosts.numeric_id != slice.numeric_id) {
    return; // Keys only, or the slice went meanwhile.
  }
  // The hosts answer on their addresses from now on and publish their keys, as a booted VM's guest agent does.
  for (std::size_t w = 0; w < hosts.size(); ++w) {
    std::vector<int> sockets;
    try {
      sockets = host_sshd::listen_on(hosts[w]);
    } catch (const std::exception& e) {
      std::cerr << "jobman-mock-cloud: worker " << w << " of " << node_name << " is unreachable: " << e.what() << "\n";
      continue;
    }
    for (const int fd : sockets) {
      epoll_event event{};
      event.events = EPOLLIN;
      event.data.fd = fd;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
      doors_[fd] = Door{node_name, hosts[w]};
    }
    auto& published = it->second.published.at(w);
    published["hostkeys/ssh-ed25519"] = host_keys.at(w);
    if (options_.ssh_port != 22) {
      published["mock/ssh-port"] = std::to_string(options_.ssh_port);
    }
  }
}

void WorkerHosts::slice_lost(const std::string& node_name) {
  {
    std::lock_guard lock(mutex_);
    auto it = slices_.find(node_name);
    if (it == slices_.end()) {
      return;
    }
    // No new connection: the host is gone for whoever dials it; and every open one drops, as the VM's network goes.
    close_doors_locked(node_name);
    for (const auto& [pid, node] : sshd_pids_) {
      if (node == node_name) {
        ::kill(-pid, SIGKILL); // Not reaped yet (only the agent reaps, under this lock): the group is still its.
      }
    }
    const auto prefix = marker_prefix() + it->second.hosts.numeric_id + "/";
    // One thread per slice: a mass preemption ends every slice within one grace period, not one after another.
    // The thread shares only the counter (kept alive by its own reference) and copies of what it needs.
    {
      std::lock_guard count(ending_->mutex);
      ++ending_->count;
    }
    // The disks move out of the way at once: a node started again (its id unchanged) gets fresh ones at the same
    // place while these are still being wiped.
    static std::atomic<unsigned> ended{0};
    auto dir = it->second.dir;
    const auto away = dir.parent_path() / (dir.filename().string() + ".ended-" + std::to_string(++ended));
    std::error_code ec;
    std::filesystem::rename(dir, away, ec);
    if (!ec) {
      dir = away;
    }
    std::thread([ending = ending_, prefix, dir, grace = options_.grace] {
      end_slice(prefix, dir, grace);
      std::lock_guard done(ending->mutex);
      if (--ending->count == 0) {
        ending->idle.notify_all();
      }
    }).detach();
    slices_.erase(it);
  }
}

void WorkerHosts::prune() {
  std::lock_guard lock(mutex_);
  std::error_code ec;
  std::vector<std::filesystem::path> stale;
  for (const auto& entry : std::filesystem::directory_iterator(options_.root, ec)) {
    const bool owned = std::any_of(slices_.begin(), slices_.end(),
                                   [&](const auto& slice) { return slice.second.dir == entry.path(); });
    if (!owned) {
      stale.push_back(entry.path());
    }
  }
  for (const auto& dir : stale) {
    // The slice died with an earlier mock that was killed before it could end it: end what still runs there.
    auto name = dir.filename().string();
    name = name.substr(0, name.find(".ended-")); // Disks a lost slice left being wiped.
    const auto numeric_id = name.substr(name.rfind('-') + 1);
    signal_all(marker_prefix() + numeric_id + "/", SIGKILL);
    std::filesystem::remove_all(dir, ec);
  }
}

void WorkerHosts::slice_faulty(const std::string& node_name, int worker) {
  std::lock_guard lock(mutex_);
  auto it = slices_.find(node_name);
  if (it == slices_.end() || worker < 0 || worker >= it->second.hosts.hosts()) {
    return;
  }
  it->second.hosts.machines[static_cast<std::size_t>(worker)].faulty = true;
  // The host may write its sandbox: a .mock it replaced with a link to elsewhere gets no file from the mock.
  const auto mock_dir = it->second.dir / ("worker-" + std::to_string(worker)) / ".mock";
  std::error_code ec;
  if (std::filesystem::is_directory(std::filesystem::symlink_status(mock_dir, ec))) {
    util::write_file_atomic(mock_dir / "faulty", "", 0600);
  }
}

void WorkerHosts::slice_step_fault(const std::string& node_name, int worker, const StepFault& fault) {
  std::lock_guard lock(mutex_);
  auto it = slices_.find(node_name);
  if (it == slices_.end() || worker < 0 || worker >= it->second.hosts.hosts()) {
    return;
  }
  // As for slice_faulty: no file through a .mock (or faults) the host replaced with a link to elsewhere.
  const auto mock_dir = it->second.dir / ("worker-" + std::to_string(worker)) / ".mock";
  const auto faults_dir = mock_dir / kStepFaultsDir;
  std::error_code ec;
  if (!std::filesystem::is_directory(std::filesystem::symlink_status(mock_dir, ec)) ||
      std::filesystem::is_symlink(std::filesystem::symlink_status(faults_dir, ec))) {
    return;
  }
  ensure_step_faults_dir(faults_dir);
  if (fault.kind == StepFault::Kind::hang) {
    util::write_file_atomic(faults_dir / kHangFile, "", 0644);
  } else {
    // "FACTOR STEPS", which systolic-train counts down as it computes the steps.
    util::write_file_atomic(faults_dir / kLossSpikeFile,
                            nlohmann::json(fault.factor).dump() + " " + std::to_string(fault.steps) + "\n", 0644);
  }
}

std::optional<WorkerHost> WorkerHosts::host(const std::string& node_name, int worker, const std::string& user) {
  std::lock_guard lock(mutex_);
  auto it = slices_.find(node_name);
  if (it == slices_.end() || worker < 0 || worker >= it->second.hosts.hosts()) {
    return std::nullopt;
  }
  return host_description(it->second.hosts, it->second.dir, worker, user);
}

WorkerHost WorkerHosts::host_description(const SliceHosts& slice, const std::filesystem::path& slice_path, int worker,
                                         const std::string& user) const {
  WorkerHost host;
  host.worker = worker;
  host.physical_host = slice.machines[static_cast<std::size_t>(worker)].physical_host;
  host.dir = slice_path / ("worker-" + std::to_string(worker));
  const std::string name = user.empty() ? "root" : user;
  // Each user's home is homes/USER, /home/USER on the host, as the host's sshd makes it when the user's key appears.
  host.sandbox_home = host.dir / "homes" / (valid_host_user(name) ? name : "root");
  host.home = host.sandbox_home;
  host.marker = host_marker(slice, worker);
  host.root = host.dir / "root";
  const auto gcs = gcs_root(slice, worker);
  host.keep = {host.dir, gcs};
  host.keep_read_only = {options_.tools};
  host.keep_read_only.insert(host.keep_read_only.end(), options_.visible.begin(), options_.visible.end());
  host.home_mode = options_.home_mode;
  host.home_mode_reason = options_.home_mode_reason;
  if (host.home_mode == HomeMode::namespace_) {
    const auto home = std::filesystem::path("/home") / name;
    std::vector<std::filesystem::path> kept = host.keep;
    kept.insert(kept.end(), host.keep_read_only.begin(), host.keep_read_only.end());
    const auto hidden =
        std::find_if(kept.begin(), kept.end(), [&](const std::filesystem::path& dir) { return is_within(dir, home); });
    if (!valid_host_user(name)) {
      host.home_mode = HomeMode::sandbox;
      host.home_mode_reason = "'" + name + "' cannot be a directory under /home";
    } else if (hidden != kept.end()) {
      // /home/USER over the mock's own directory would hide it from the host: the sandbox path it is.
      host.home_mode = HomeMode::sandbox;
      host.home_mode_reason = "the mock's directory " + hidden->string() + " is under " + home.string();
    } else {
      host.home = home;
      host.home_mode_reason.clear();
    }
  }
  host.env = {
      {"HOME", host.home.string()},
      {"USER", name},
      {"LOGNAME", name},
      {"SHELL", "/bin/bash"},
      {"LANG", "C.UTF-8"},
      {"TMPDIR", (host.dir / "tmp").string()},
      {"PATH", options_.tools.string() + ":" + (host.home / ".local" / "bin").string() +
                   ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {kMarkerVariable, host.marker},
      {"MOCK_TPU_WORKER_DIR", host.dir.string()},
      {"MOCK_TPU_FAULT_FILE", (host.dir / ".mock" / "faulty").string()},
      {"MOCK_TPU_LOSS_SPIKE_FILE", (host.dir / ".mock" / kStepFaultsDir / kLossSpikeFile).string()},
      {"MOCK_TPU_HANG_FILE", (host.dir / ".mock" / kStepFaultsDir / kHangFile).string()},
      {"MOCK_TPU_PHYSICAL_HOST", host.physical_host},
      {kHostZoneVariable, zone_of_node(slice.node_name)},
      {"MOCK_GCS_ROOT", gcs.string()},
      {kHostAddressVariable, host_addresses(slice, worker)},
      {"CLOUDSDK_CONFIG", (host.home / ".config" / "gcloud").string()},
  };
  if (options_.dcn) {
    // Also every session's (serve_slice copies this environment): systolic-train delays its messages to other
    // slices by these.
    host.env["MOCK_DCN_LATENCY_US"] = std::to_string(options_.dcn->latency_us);
    host.env["MOCK_DCN_BANDWIDTH_BPS"] = std::to_string(options_.dcn->bandwidth_bps);
  }
  if (!options_.api_endpoint.empty()) {
    // Google's gcloud and client libraries on the host reach the mock as they reach Google from a TPU VM: the VM's
    // service account through the metadata server, the APIs at their (overridden) endpoints. Nothing else is asked
    // of the network: no metadata server by name, no update check, no usage report.
    const auto authority = options_.api_endpoint.substr(options_.api_endpoint.find("://") + 3);
    const auto host_port = authority.substr(0, authority.find('/'));
    host.env["CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU"] = options_.api_endpoint;
    host.env["CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE"] = options_.api_endpoint + "compute/v1/";
    host.env["CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN"] = options_.api_endpoint + "oslogin/";
    host.env["CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDRESOURCEMANAGER"] = options_.api_endpoint + "cloudresourcemanager/";
    host.env["GCE_METADATA_ROOT"] = host_port;
    host.env["GCE_METADATA_HOST"] = host_port;
    host.env["CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK"] = "true";
    host.env["CLOUDSDK_CORE_DISABLE_USAGE_REPORTING"] = "true";
  }
  return host;
}

int WorkerHosts::processes_running() const {
  return static_cast<int>(find_marked_processes(marker_prefix(), Marked::workload).size());
}

std::string WorkerHosts::marker_prefix() const {
  return tag_ + "/";
}

void WorkerHosts::wait_idle() {
  std::unique_lock lock(ending_->mutex);
  ending_->idle.wait(lock, [this] { return ending_->count == 0; });
}

void WorkerHosts::end_slice(const std::string& prefix, const std::filesystem::path& dir,
                            std::chrono::milliseconds grace) {
  if (signal_all(prefix, SIGTERM) > 0 && !await_none(prefix, grace)) {
    signal_all(prefix, SIGKILL);
    await_none(prefix, std::chrono::seconds(5));
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  // A command that started in the last moment before the slice was marked lost is caught here.
  signal_all(prefix, SIGKILL);
}

} // namespace jobman::mock
