#include "jobman/remote/gcloud.hpp"

#include "child.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
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

// --zone, --project, --worker, --ssh-key-file and --quiet, common to ssh and scp.
void add_common_flags(std::vector<std::string>& argv, const SliceTarget& target, int worker) {
  argv.push_back("--zone=" + target.zone);
  if (!target.project.empty()) {
    argv.push_back("--project=" + target.project);
  }
  argv.push_back("--worker=" + std::to_string(worker));
  if (!target.ssh_key_file.empty()) {
    argv.push_back("--ssh-key-file=" + target.ssh_key_file);
  }
  argv.emplace_back("--quiet");
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

std::string gcloud_program(const config::Settings& settings, const std::filesystem::path& exe_dir) {
  const bool user_set = std::any_of(settings.sources.begin(), settings.sources.end(), [](const auto& source) {
    return source.key == "gcloud" && source.origin != "default";
  });
  if (user_set || settings.cloud == config::CloudKind::google) {
    return settings.gcloud;
  }
  const auto built = exe_dir / "mock_cloud" / "tools" / "gcloud";
  const auto installed = exe_dir.parent_path() / "lib" / "jobman" / "mock-tools" / "gcloud";
  for (const auto& candidate : {built, installed}) {
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate.string();
    }
  }
  throw Error("the mock cloud's gcloud stand-in is missing: looked for " + built.string() + " and " +
              installed.string() + " (set gcloud in the settings to use another program)");
}

SliceTarget slice_target(const config::Settings& settings, const config::JobConfig& config, const std::string& node) {
  SliceTarget target;
  target.gcloud = gcloud_program(settings);
  target.project = settings.project;
  target.zone = config.tpu.zone;
  target.node = node;
  target.user = config.job.remote_user;
  if (config.ssh && !config.ssh->private_key.empty()) {
    target.ssh_key_file = util::expand_user(config.ssh->private_key).string();
  }
  return target;
}

std::vector<std::string> shell_argv(const SliceTarget& target, int worker) {
  std::vector<std::string> argv = {target.gcloud, "compute",
                                   "tpus",        "tpu-vm",
                                   "ssh",         target.user.empty() ? target.node : target.user + "@" + target.node};
  add_common_flags(argv, target, worker);
  return argv;
}

std::vector<std::string> ssh_argv(const SliceTarget& target, int worker, const std::string& command) {
  auto argv = shell_argv(target, worker);
  argv.push_back("--command=" + command);
  return argv;
}

std::vector<std::string> scp_argv(const SliceTarget& target, int worker, const std::vector<std::string>& sources,
                                  const std::string& remote_path) {
  std::vector<std::string> argv = {target.gcloud, "compute", "tpus", "tpu-vm", "scp"};
  argv.insert(argv.end(), sources.begin(), sources.end());
  argv.push_back((target.user.empty() ? target.node : target.user + "@" + target.node) + ":" + remote_path);
  add_common_flags(argv, target, worker);
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
  return collect(workers, detail::run_all(argvs, target.environment, timeout, inputs));
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
  return collect(workers, detail::run_all(argvs, target.environment, timeout));
}

} // namespace jobman::remote
