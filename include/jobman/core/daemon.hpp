// The supervisor as a process: `jobman daemon` announces itself with a shared lock on $JOBMAN_HOME/daemon.lock, and
// the commands that need a supervisor start one in the background when none holds it.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>

namespace jobman::core {

// This process as a lease owner: "host:pid:start-time", unique even when pids are reused.
std::string lease_owner_id();

// $JOBMAN_HOME/daemon.lock: every `jobman daemon` holds a shared lock on it while it runs; it holds the pid of the
// newest one.
std::filesystem::path daemon_lock_path();

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

// Some `jobman daemon` of this $JOBMAN_HOME is running.
bool daemon_running();

// Starts `jobman daemon` in the background (log in $JOBMAN_HOME/daemon.log) unless one is running; says so on
// `notice` when it starts one. Returns true when it started one.
bool ensure_daemon(std::ostream& notice);

} // namespace jobman::core
