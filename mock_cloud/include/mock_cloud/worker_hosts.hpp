// The mock cloud's data plane: one sandbox per TPU worker host, the processes started there, and their end.
#pragma once

#include "mock_cloud/config.hpp"
#include "mock_cloud/gcs_meter.hpp"
#include "mock_cloud/host_sshd.hpp"
#include "mock_cloud/world.hpp"

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

namespace jobman::mock {

// How a worker host's files appear to the commands started there.
enum class HomeMode {
  sandbox,   // HOME is the sandbox's home/ directory itself, and every other path is this machine's.
  namespace_ // The host's own filesystem (host_filesystem.hpp): / is the sandbox's root/, /home its homes/.
};

// "namespace" or "sandbox", as the worker-host answer names the mode.
const char* to_string(HomeMode mode);

// Where a worker host lives and what a command started there sees.
struct WorkerHost {
  int worker = 0;                          // Its index in the slice.
  std::filesystem::path dir;               // The sandbox: homes/, root/, tmp/ and .mock/ inside.
  std::filesystem::path home;              // HOME, as the host's commands see it (/home/USER in namespace mode).
  std::filesystem::path sandbox_home;      // The directory of this machine that holds the home: dir/homes/USER.
  std::filesystem::path root;              // The directory of this machine that is / in namespace mode: dir/root.
  HomeMode home_mode = HomeMode::sandbox;  // How the host's files appear.
  std::string home_mode_reason;            // Why the mode is sandbox; empty in namespace mode.
  std::vector<std::filesystem::path> keep; // The mock's directories the host writes to (sandbox, buckets).
  std::map<std::string, std::string> env;  // The whole environment of a command started there.
  std::string marker;                      // MOCK_TPU_HOST's value: every process there carries it.
  std::string physical_host;               // The id of the machine it runs on (MOCK_TPU_PHYSICAL_HOST).
  // The directories the host only reads (the mock's tools, and those of WorkerHostsOptions::visible). In namespace
  // mode these and `keep` are bound back at their own paths.
  std::vector<std::filesystem::path> keep_read_only;
};

// Whether this machine can give each host a filesystem of its own: runs `tools`/jobman-mock-host-login --probe once.
// nullopt when it can, else why not (the probe's own words).
std::optional<std::string> probe_home_namespaces(const std::filesystem::path& tools);

// Which marked processes to find.
enum class Marked {
  every,    // Everything on the host, its sshd (one per connection) included: what preemption ends.
  workload, // What sessions started: every marked process but the hosts' sshd, which stays while a connection is
            // shared (ControlMaster) after its commands ended.
};

// The live (not zombie) processes whose environment has MOCK_TPU_HOST starting with `prefix`: a host's marker, or a
// slice's ("TAG/NUMERIC_ID/"), read from the process table.
std::vector<pid_t> find_marked_processes(const std::string& prefix, Marked which = Marked::every);

// How the data plane is set up.
struct WorkerHostsOptions {
  std::filesystem::path root;    // Sandboxes go to root/<node id>-<numeric id>/worker-<n>.
  std::filesystem::path buckets; // The mock's Cloud Storage: buckets/<name>; survives everything.
  // What the hosts read the buckets through, each its own directory of it (MOCK_GCS_ROOT); null: `buckets` itself.
  const GcsMeter* meter = nullptr;
  std::filesystem::path tools;             // The mock's tools (gcloud, gcsfuse, systolic-train): first on PATH.
  std::string api_endpoint;                // http://HOST:PORT/, so `gcloud` on a worker reaches the mock too.
  std::chrono::milliseconds grace{30'000}; // SIGTERM to SIGKILL when a slice goes away.
  HomeMode home_mode = HomeMode::sandbox;  // Per-host filesystems (when the probe allowed them) or the sandbox path.
  std::string home_mode_reason;            // Why the mode is sandbox (the probe's answer, or an option).
  // Directories of this machine that hosts with filesystems of their own see read-only, at their own paths.
  std::vector<std::filesystem::path> visible;
  // The OpenSSH server each host runs (Debian's /usr/sbin/sshd), on its own filesystem; empty for none. Needs
  // namespace mode.
  std::filesystem::path sshd;
  std::filesystem::path ssh_keygen = "/usr/bin/ssh-keygen"; // What makes each host's host key.
  int ssh_port = 22; // The port every host's sshd listens on: 22 as root, a high one for any other user.
  // The world's network between slices, told to every host's commands as MOCK_DCN_LATENCY_US and
  // MOCK_DCN_BANDWIDTH_BPS; nothing when the world does not describe one.
  std::optional<DcnConfig> dcn;
};

// Worker hosts of every READY slice. A command started on a worker (by the mock's gcloud) carries the host's marker
// in its environment, and so do all its descendants, however they detach; that is how a slice's processes are
// found in the process table and ended when the slice is preempted or deleted. Thread-safe.
class WorkerHosts : public SliceListener {
public:
  // Creates the root and bucket directories (mode 0700); the paths it hands out are canonical.
  explicit WorkerHosts(WorkerHostsOptions options);
  // Waits for lost slices to be ended, then ends every process on every slice (SIGTERM, then SIGKILL after the
  // grace period); the sandboxes of live slices stay for a restarted mock.
  ~WorkerHosts() override;
  WorkerHosts(const WorkerHosts&) = delete;
  WorkerHosts& operator=(const WorkerHosts&) = delete;

  // Creates the slice's worker sandboxes; a slice already known keeps its directories. Quick: safe under a lock.
  void slice_ready(const SliceHosts& slice) override;
  // The slice is gone (preempted, terminated or deleted): no new command may start there, every process on it gets
  // SIGTERM now and SIGKILL after the grace period, then its sandboxes are wiped. Returns at once; repeats are no-ops.
  void slice_lost(const std::string& node_name) override;
  // Makes the MXUs of the slice's worker `worker` faulty: the workload there sees MOCK_TPU_FAULT_FILE appear.
  void slice_faulty(const std::string& node_name, int worker) override;
  // Writes the step fault file of the slice's worker `worker` (MOCK_TPU_LOSS_SPIKE_FILE or MOCK_TPU_HANG_FILE),
  // replacing one the workload has not consumed yet.
  void slice_step_fault(const std::string& node_name, int worker, const StepFault& fault) override;
  // The slice's hosts authorize `keys` from now on (within moments: the agent thread writes them).
  void slice_keys(const std::string& node_name, const std::vector<SshKey>& keys) override;
  // With SSH servers: the guest attributes worker `worker` publishes once its sshd listens ("hostkeys/ssh-ed25519",
  // and "mock/ssh-port" when the port is not 22), empty before; nullopt without SSH servers.
  std::optional<std::map<std::string, std::string>> ssh_attributes(const std::string& node_name, int worker) override;
  // With SSH servers: whether nothing listens on address:ssh_port; always true without.
  bool address_free(const std::string& address) override;
  // Removes sandboxes under the root that belong to no READY slice, and kills what still runs there (both left by
  // a mock that was killed).
  void prune();

  // Worker `worker` of a READY slice, or nullopt when the slice is not (or no longer) up or has no such worker.
  std::optional<WorkerHost> host(const std::string& node_name, int worker, const std::string& user);
  // The number of live (not zombie) processes that sessions started on all slices (their sshd aside).
  int processes_running() const;
  // The start of the marker of every host of this mock (and of a mock restarted on the same root): what to look for
  // to find all their processes.
  [[nodiscard]] std::string marker_prefix() const;
  // The directory of a slice's sandboxes (whether or not it still exists).
  std::filesystem::path slice_dir(const SliceHosts& slice) const;
  // Blocks until every lost slice has been ended and wiped.
  void wait_idle();

private:
  // A READY slice.
  struct Slice {
    SliceHosts hosts;          // As given to slice_ready, with the keys slice_keys gave since.
    std::filesystem::path dir; // Its sandboxes' parent.
    bool started = false;      // The agent has started its hosts' sshd.
    // What each host publishes once its sshd listens, by worker (empty before).
    std::vector<std::map<std::string, std::string>> published;
  };

  // Lost slices being ended right now, shared with the threads that end them.
  struct Ending {
    std::mutex mutex;             // Guards count.
    std::condition_variable idle; // Signalled when count drops to 0.
    int count = 0;                // Threads still ending a slice.
  };

  // SIGTERM, the grace period, SIGKILL and the wipe for one lost slice; runs on a thread of its own.
  static void end_slice(const std::string& prefix, const std::filesystem::path& dir, std::chrono::milliseconds grace);
  // One host's SSH port, as the agent thread listens on it.
  struct Door {
    std::string node_name;   // The slice.
    host_sshd::SshHost host; // What a connection there is served with.
  };

  // The agent thread: what each host's guest agent and inetd do. For every slice in pending_ it makes accounts and
  // writes keys (and, the first time, the host key and sshd's configuration, then listens on the host's addresses);
  // each connection to a host is served by an `sshd -i` of its own on the host's filesystem; and it reaps those.
  void agent_loop();
  // Wakes the agent thread (pending_ grew, or it must stop).
  void wake_agent();
  // Serves every connection waiting on the listening socket `listener`.
  void accept_connections_locked(int listener);
  // Stops listening on the slice's hosts' addresses.
  void close_doors_locked(const std::string& node_name);
  // One pass of the agent over the slice `node_name`, with `lock` (of mutex_) held on entry and exit.
  void serve_slice(std::unique_lock<std::mutex>& lock, const std::string& node_name);
  // Worker `worker` of `slice` (whose sandboxes are under `slice_path`) as `user` finds it.
  [[nodiscard]] WorkerHost host_description(const SliceHosts& slice, const std::filesystem::path& slice_path,
                                            int worker, const std::string& user) const;
  // Where worker `worker` of `slice` finds the buckets (MOCK_GCS_ROOT): its own directory of the meter, or the bucket
  // root itself when unmetered.
  [[nodiscard]] std::filesystem::path gcs_root(const SliceHosts& slice, int worker) const;
  // The addresses of worker `worker` of `slice`, internal first, comma-separated (MOCK_TPU_HOST_ADDRESSES).
  [[nodiscard]] static std::string host_addresses(const SliceHosts& slice, int worker);
  // MOCK_TPU_HOST of worker `worker` of `slice`.
  [[nodiscard]] std::string host_marker(const SliceHosts& slice, int worker) const;

  WorkerHostsOptions options_;                                  // As constructed, with canonical paths.
  std::string tag_;                                             // The root's tag, the first part of every marker.
  mutable std::mutex mutex_;                                    // Guards slices_.
  std::map<std::string, Slice> slices_;                         // READY slices; key: node name.
  std::shared_ptr<Ending> ending_ = std::make_shared<Ending>(); // Slices being ended.
  std::set<std::string> pending_;                               // Slices the agent has work for; guarded by mutex_.
  bool stopping_ = false;                                       // The agent must end; guarded by mutex_.
  std::map<int, Door> doors_;                                   // Listening sockets; guarded by mutex_.
  // The agent's sshd children (each leads a process group of its own), to reap, with the node each serves: its
  // hosts' sshd are ended with it, since sshd's process titles overwrite the environment that carries the marker.
  std::vector<std::pair<pid_t, std::string>> sshd_pids_;
  int epoll_fd_ = -1; // The agent's epoll set: doors_ and wake_fd_.
  int wake_fd_ = -1;  // An eventfd that wakes the agent.
  std::thread agent_; // The agent thread (only with SSH servers).
};

} // namespace jobman::mock
