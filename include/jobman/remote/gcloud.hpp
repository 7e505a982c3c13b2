// Running commands on a slice's worker hosts through `gcloud compute tpus tpu-vm ssh`, every worker in parallel.
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/util/system.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jobman::remote {

// Quotes `text` for a POSIX shell: the shell reads it back as exactly one word equal to `text`, whatever it holds
// (quotes, $, backticks, newlines, any bytes).
std::string shell_quote(std::string_view text);

// One worker host as OpenSSH reaches it.
struct SshHost {
  std::string address;        // Where ssh connects: the external address, or the internal one (remote.internal_ip).
  int port = 22;              // Its SSH port.
  std::string host_key_alias; // The name its host key is filed under in the target's known_hosts (HostKeyAlias).
  // Where the target spans several nodes (the slices of a multislice job): the node the host belongs to and its worker
  // index there, which gcloud is told. Empty and -1: the target's node, and the host's index in the target.
  std::string node{};
  int node_worker = -1;
};

// Where commands go: the transport, the TPU node and how to reach its hosts.
struct SliceTarget {
  std::string gcloud = "gcloud"; // Google's gcloud: the settings' `gcloud`.
  std::string project;           // --project.
  std::string zone;              // --zone.
  std::string node;              // The TPU node's name.
  std::string user;              // Remote user; empty for gcloud's default.
  std::string ssh_key_file;      // --ssh-key-file: the private key gcloud connects with; empty for gcloud's own.
  // Variables every gcloud process for this target gets on top of this process's environment (on the mock: its
  // address and a configuration directory of its own). They travel with the target rather than through this
  // process's environment, which a multi-threaded process must not change (setenv races with getenv).
  std::vector<std::pair<std::string, std::string>> environment;
  config::Transport transport = config::Transport::gcloud; // OpenSSH straight to the hosts, or gcloud.
  // Each worker host, by index: OpenSSH connects to its address and port; gcloud finds the address itself and is told
  // the port when it is not 22. May be empty for gcloud.
  std::vector<SshHost> hosts{};
  // OpenSSH only: the known_hosts file holding the hosts' keys (under their aliases); the directory of the shared
  // connections' sockets (ControlPath), short enough for a socket's path.
  std::string known_hosts{};
  std::string control_dir{};
  bool internal_ip{false}; // gcloud's --internal-ip (remote.internal_ip); OpenSSH's hosts carry their address.
  // gcloud only: every host's key is in gcloud's known-hosts file, so gcloud checks them strictly from the first
  // connection (--strict-host-key-checking=yes); otherwise gcloud's own default applies.
  bool host_keys_known = false;
};

// The target for a job's node: the settings' gcloud and project, the config's zone, its
// job.remote_user, and its ssh.private_key (with "~" expanded) as the key gcloud connects with.
SliceTarget slice_target(const config::Settings& settings, const config::JobConfig& config, const std::string& node);

// The argv of `ssh` (or `gcloud compute tpus tpu-vm ssh`) running `command` on one worker. The command travels as
// one argv element: no local shell ever sees it. OpenSSH checks the host's key against the target's known_hosts and
// shares one connection per host (ControlMaster) among every command, copy and shell. Throws jobman::Error when the
// target has no address for the worker.
std::vector<std::string> ssh_argv(const SliceTarget& target, int worker, const std::string& command);

// The argv of an interactive session on one worker: the user's login shell without `command`; with it, `command`
// with a terminal of its own when `terminal` (ssh -t), as a shell started by a command needs one.
std::vector<std::string> shell_argv(const SliceTarget& target, int worker, const std::string& command = "",
                                    bool terminal = false);

// The argv of `scp` (or `gcloud compute tpus tpu-vm scp`) copying local `sources` to `remote_path` on one worker (a
// path relative to the remote user's home, or absolute).
std::vector<std::string> scp_argv(const SliceTarget& target, int worker, const std::vector<std::string>& sources,
                                  const std::string& remote_path);

// What one worker's run of a command left.
struct WorkerRun {
  int worker = 0;         // The worker's index.
  int exit_code = -1;     // gcloud's status: the command's own, 255 when the host was unreachable or lost.
  bool timed_out = false; // The step's time ran out and the run was stopped.
  std::string output;     // Its stdout and stderr, interleaved as written.
};

// Runs `command` on each of `workers` in parallel, one client process (ssh or gcloud) per worker with its output kept
// apart, and waits for all of them. ssh clients all start at once; gcloud's, which cost far more each, a few at a
// time (twice the machine's cores, at least four). A run still going `timeout` after it started gets SIGTERM, then
// SIGKILL, and is marked timed out.
std::vector<WorkerRun> run_on_workers(const SliceTarget& target, const std::vector<int>& workers,
                                      const std::string& command, std::chrono::milliseconds timeout);

// The same with a command of its own for each worker, `command(worker)`, and, when `input` is given, `input(worker)`
// written to that command's stdin (text that must not appear in any process's arguments).
std::vector<WorkerRun> run_on_workers(const SliceTarget& target, const std::vector<int>& workers,
                                      const std::function<std::string(int)>& command, std::chrono::milliseconds timeout,
                                      const std::function<std::string(int)>& input = {});

// Files for one worker: local paths copied into one remote directory.
struct Upload {
  int worker = 0;
  std::vector<std::string> sources; // Local files; each keeps its file name.
};

// Copies each worker's files into `remote_dir` (relative to the remote user's home), all workers in parallel with
// one scp each; the directory must exist. Workers with no files are skipped. Same timeout rule as run_on_workers.
std::vector<WorkerRun> copy_to_workers(const SliceTarget& target, const std::vector<Upload>& uploads,
                                       const std::string& remote_dir, std::chrono::milliseconds timeout);

} // namespace jobman::remote
