// The supervisor as a process: `jobman daemon` announces itself with a shared lock on its store's lock file in
// $JOBMAN_HOME, and the commands that need a supervisor start one in the background when none holds it. Each store
// has its own: a home whose jobs are in its SQLite file and in a lab's PostgreSQL store runs one supervisor for each.
#pragma once

#include "jobman/store/job_store.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace jobman::core {

// This process as a lease owner: "host:pid:start-time:machine", unique even when pids are reused. `machine` is a
// digest of the kernel's boot id and the pid namespace, so that a process of this machine can tell for sure whether
// an owner is one of its neighbours (lease_owner_dead_here).
std::string lease_owner_id();

// Whether `owner` (a lease_owner_id()) names a process of this machine, this boot and this pid namespace that no
// longer runs: its pid is gone, a zombie, or now another process's. Reads /proc only: microseconds. Owners of other
// machines, or ids not in that form, are never judged dead: false.
bool lease_owner_dead_here(const std::string& owner);

// Ends the live leases of the supervisors of this machine that are dead (lease_owner_dead_here), so that their jobs
// are driven again at once rather than when the leases run out; returns the dead owners whose leases it ended.
std::vector<std::string> end_leases_of_dead_supervisors(store::JobStore& store, std::int64_t now_ms);

// The files of the supervisors of the store the settings name: $JOBMAN_HOME/daemon.lock and daemon.log for the home's
// own SQLite store, daemon-<key>.lock and daemon-<key>.log for any other store (<key> a digest of its location, its
// password left out). Every `jobman daemon` holds a shared lock on the lock file while it runs; it holds the pid of
// the newest one.
std::filesystem::path daemon_lock_path();
std::filesystem::path daemon_log_path();

// Moves `log` to `log`.1 (and .1 to .2, ..., keeping `keep` old files) once it is larger than `max_bytes`, and points
// this process's stdout and stderr at a new `log`. Also reopens `log` when another process rotated it. For a daemon
// started in the background, whose stderr is that log; nothing happens when stderr is not a file.
void rotate_log(const std::filesystem::path& log, std::uintmax_t max_bytes, int keep);

// Holds the shared daemon lock for its lifetime, so that daemon_running() sees this process.
class DaemonPresence {
public:
  DaemonPresence();
  ~DaemonPresence();
  DaemonPresence(const DaemonPresence&) = delete;
  DaemonPresence& operator=(const DaemonPresence&) = delete;

private:
  int fd_ = -1;
};

// Some `jobman daemon` of this $JOBMAN_HOME and store is running.
bool daemon_running();

// The processes that hold the store's daemon lock open: its running supervisors in this home (of this user; as root,
// anyone's).
std::vector<int> daemon_pids();

// What stop_daemons did.
struct DaemonStop {
  std::vector<int> asked;   // The supervisors sent SIGTERM.
  std::vector<int> running; // Those still running when the time was up.
};

// Asks each supervisor of the store in this home to stop (SIGTERM: it lets its leases go and leaves the workloads
// running, for the next one to re-attach) and waits up to `timeout` for them to end.
DaemonStop stop_daemons(std::chrono::milliseconds timeout);

// Starts `jobman daemon` in the background (its log: daemon_log_path()) unless one is running; says so on `notice`
// when it starts one. `before_start`, when given, runs just before, once no daemon runs (under the lock that lets one
// caller at a time start one): a caller that looked a moment earlier may have seen a daemon that has died since.
// Returns true when it started one.
bool ensure_daemon(std::ostream& notice, const std::function<void()>& before_start = {});

} // namespace jobman::core
