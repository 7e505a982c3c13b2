#include "jobman/remote/gcloud.hpp"

#include "child.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <thread>
#include <unistd.h>

namespace jobman::remote {

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

namespace {

// The node gcloud reaches worker `worker` of the target through, as USER@NODE when the target names a user: the host's
// own node where the target spans several.
std::string gcloud_node(const SliceTarget& target, int worker) {
  const auto& node = worker >= 0 && worker < static_cast<int>(target.hosts.size()) &&
                             !target.hosts[static_cast<std::size_t>(worker)].node.empty()
                         ? target.hosts[static_cast<std::size_t>(worker)].node
                         : target.node;
  return target.user.empty() ? node : target.user + "@" + node;
}

// Which gcloud command a flag list is for.
enum class GcloudCommand { ssh, scp };

// The flags of `gcloud compute tpus tpu-vm ssh` and `scp` for one worker: --zone, --project, --worker, --ssh-key-file,
// strict host key checking when the hosts' keys are known, the host's SSH port when it is not 22 (ssh's -p, scp's
// -P), and --quiet.
void add_common_flags(std::vector<std::string>& argv, const SliceTarget& target, int worker, GcloudCommand command) {
  argv.push_back("--zone=" + target.zone);
  if (!target.project.empty()) {
    argv.push_back("--project=" + target.project);
  }
  const SshHost* host = worker >= 0 && worker < static_cast<int>(target.hosts.size())
                            ? &target.hosts[static_cast<std::size_t>(worker)]
                            : nullptr;
  argv.push_back("--worker=" + std::to_string(host != nullptr && host->node_worker >= 0 ? host->node_worker : worker));
  if (!target.ssh_key_file.empty()) {
    argv.push_back("--ssh-key-file=" + target.ssh_key_file);
  }
  if (target.internal_ip) {
    argv.emplace_back("--internal-ip");
  }
  if (target.host_keys_known) {
    argv.emplace_back("--strict-host-key-checking=yes");
  }
  if (worker >= 0 && worker < static_cast<int>(target.hosts.size())) {
    const int port = target.hosts[static_cast<std::size_t>(worker)].port;
    if (port != 22) {
      // gcloud splits an --ssh-flag at spaces and passes each --scp-flag whole.
      if (command == GcloudCommand::ssh) {
        argv.push_back("--ssh-flag=-p " + std::to_string(port));
      } else {
        argv.insert(argv.end(), {"--scp-flag=-P", "--scp-flag=" + std::to_string(port)});
      }
    }
  }
  argv.emplace_back("--quiet");
}

// The OpenSSH options every ssh and scp of a target shares, for worker `worker`: no prompt, the host key checked
// against the target's known_hosts under the host's alias, one shared connection per host kept two minutes after
// its last use, a dead connection noticed within a minute, and the target's key when it names one.
std::vector<std::string> openssh_options(const SliceTarget& target, int worker) {
  if (worker < 0 || worker >= static_cast<int>(target.hosts.size())) {
    throw Error("no address is known for worker " + std::to_string(worker) + " of " + target.node + " (it has " +
                std::to_string(target.hosts.size()) + " known host(s))");
  }
  const auto& host = target.hosts[static_cast<std::size_t>(worker)];
  std::vector<std::string> options = {"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"};
  const auto option = [&options](const std::string& setting) {
    options.emplace_back("-o");
    options.push_back(setting);
  };
  if (!target.known_hosts.empty()) {
    option("UserKnownHostsFile=" + target.known_hosts);
  }
  if (!host.host_key_alias.empty()) {
    option("HostKeyAlias=" + host.host_key_alias);
  }
  if (!target.control_dir.empty()) {
    option("ControlMaster=auto");
    option("ControlPath=" + target.control_dir + "/%C");
    option("ControlPersist=120");
  }
  option("ServerAliveInterval=15");
  option("ServerAliveCountMax=4");
  option("ConnectTimeout=30");
  option("LogLevel=ERROR");
  if (!target.ssh_key_file.empty()) {
    options.insert(options.end(), {"-i", target.ssh_key_file});
    option("IdentitiesOnly=yes");
  }
  if (!target.user.empty()) {
    option("User=" + target.user);
  }
  return options;
}

// The worker's address as ssh and scp name it.
const std::string& openssh_address(const SliceTarget& target, int worker) {
  return target.hosts.at(static_cast<std::size_t>(worker)).address;
}

// How many of a target's clients run at once (0: all). Each gcloud costs about half a second of CPU and 65 MB before
// it does anything: a slice's worth started together on a small machine share its cores until every one of them has
// run out of time, where a few at a time each finish in theirs. ssh clients start in milliseconds.
std::size_t clients_at_once(const SliceTarget& target) {
  if (target.transport == config::Transport::ssh) {
    return 0;
  }
  return std::max<std::size_t>(4, 2 * static_cast<std::size_t>(std::thread::hardware_concurrency()));
}

// Pairs each worker with its child's run.
std::vector<WorkerRun> collect(const std::vector<int>& workers, std::vector<detail::ChildRun> runs) {
  std::vector<WorkerRun> out;
  out.reserve(workers.size());
  for (std::size_t i = 0; i < workers.size(); ++i) {
    out.push_back({workers[i], runs[i].exit_code, runs[i].timed_out, std::move(runs[i].output)});
  }
  return out;
}

} // namespace

SliceTarget slice_target(const config::Settings& settings, const config::JobConfig& config, const std::string& node) {
  SliceTarget target;
  target.gcloud = settings.gcloud;
  target.project = settings.project;
  target.zone = config.tpu.zone;
  target.node = node;
  target.transport = settings.transport;
  target.user = config.job.remote_user;
  target.internal_ip = config.remote && config.remote->internal_ip;
  if (config.ssh && !config.ssh->private_key.empty()) {
    target.ssh_key_file = util::expand_user(config.ssh->private_key).string();
  }
  return target;
}

std::vector<std::string> shell_argv(const SliceTarget& target, int worker, const std::string& command, bool terminal) {
  if (target.transport == config::Transport::ssh) {
    std::vector<std::string> argv = {"ssh"};
    if (terminal) {
      argv.emplace_back("-t");
    }
    const auto options = openssh_options(target, worker);
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"-p", std::to_string(target.hosts[static_cast<std::size_t>(worker)].port), "--",
                             openssh_address(target, worker)});
    if (!command.empty()) {
      argv.push_back(command);
    }
    return argv;
  }
  std::vector<std::string> argv = {target.gcloud, "compute", "tpus", "tpu-vm", "ssh", gcloud_node(target, worker)};
  add_common_flags(argv, target, worker, GcloudCommand::ssh);
  if (terminal && !command.empty()) {
    argv.emplace_back("--ssh-flag=-t");
  }
  if (!command.empty()) {
    argv.push_back("--command=" + command);
  }
  return argv;
}

std::vector<std::string> ssh_argv(const SliceTarget& target, int worker, const std::string& command) {
  return shell_argv(target, worker, command, false);
}

std::vector<std::string> scp_argv(const SliceTarget& target, int worker, const std::vector<std::string>& sources,
                                  const std::string& remote_path) {
  if (target.transport == config::Transport::ssh) {
    std::vector<std::string> argv = {"scp"};
    const auto options = openssh_options(target, worker);
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"-P", std::to_string(target.hosts[static_cast<std::size_t>(worker)].port), "--"});
    argv.insert(argv.end(), sources.begin(), sources.end());
    argv.push_back(openssh_address(target, worker) + ":" + remote_path);
    return argv;
  }
  std::vector<std::string> argv = {target.gcloud, "compute", "tpus", "tpu-vm", "scp"};
  argv.insert(argv.end(), sources.begin(), sources.end());
  argv.push_back(gcloud_node(target, worker) + ":" + remote_path);
  add_common_flags(argv, target, worker, GcloudCommand::scp);
  return argv;
}

std::vector<WorkerRun> run_on_workers(const SliceTarget& target, const std::vector<int>& workers,
                                      const std::string& command, std::chrono::milliseconds timeout) {
  return run_on_workers(
      target, workers, [&](int) { return command; }, timeout);
}

std::vector<WorkerRun> run_on_workers(const SliceTarget& target, const std::vector<int>& workers,
                                      const std::function<std::string(int)>& command, std::chrono::milliseconds timeout,
                                      const std::function<std::string(int)>& input) {
  std::vector<std::vector<std::string>> argvs;
  std::vector<std::string> inputs;
  argvs.reserve(workers.size());
  for (int worker : workers) {
    argvs.push_back(ssh_argv(target, worker, command(worker)));
    if (input) {
      inputs.push_back(input(worker));
    }
  }
  return collect(workers, detail::run_all(argvs, target.environment, timeout, inputs, clients_at_once(target)));
}

std::vector<WorkerRun> copy_to_workers(const SliceTarget& target, const std::vector<Upload>& uploads,
                                       const std::string& remote_dir, std::chrono::milliseconds timeout) {
  std::vector<int> workers;
  std::vector<std::vector<std::string>> argvs;
  for (const auto& upload : uploads) {
    if (!upload.sources.empty()) {
      workers.push_back(upload.worker);
      argvs.push_back(scp_argv(target, upload.worker, upload.sources, remote_dir));
    }
  }
  return collect(workers, detail::run_all(argvs, target.environment, timeout, {}, clients_at_once(target)));
}

} // namespace jobman::remote
