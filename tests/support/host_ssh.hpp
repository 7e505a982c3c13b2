// A running mock's worker hosts, reached as a user of the cloud reaches TPU VMs: Debian's ssh and scp to the
// addresses the API gives, with a key of the test's own in the project's ssh-keys metadata, host keys from the
// guest attributes and host key checking on.
#pragma once

#include "jobman/remote/gcloud.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace jobman::test {

class MockHostSsh {
public:
  // Makes a key in dir/ssh and authorizes it for each of `users` on every host of project `project` (its common
  // instance metadata, set through the Compute API). Check error() before use.
  MockHostSsh(const TempDir& dir, const MockCloudProcess& mock, const std::vector<std::string>& users = {"root"},
              std::string project = "p");

  // Empty when the key was made and authorized; else what went wrong.
  [[nodiscard]] const std::string& error() const { return error_; }
  // The private key.
  [[nodiscard]] const std::filesystem::path& key() const { return key_; }
  // The "USER:KEY USER" line of the ssh-keys metadata for `user`.
  [[nodiscard]] std::string ssh_keys_entry(const std::string& user) const;

  // Where commands for `node` in `zone` go as `user`: waits (at most `patience`) until the node is READY and each of
  // its hosts has published its host key (a node its queued resource has yet to make is waited for too), then writes
  // their keys to a known_hosts file of the node's own. nullopt at once when the node has no hosts and will not get
  // them (stopped, preempted, being deleted), and when no hosts came up in time.
  std::optional<remote::SliceTarget> target(const std::string& zone, const std::string& node,
                                            const std::string& user = "root",
                                            std::chrono::milliseconds patience = std::chrono::seconds(20));

  // Runs `command` on the workers `selection` names ("all", "2", "1,3", "1-3"), in parallel: their stdout and stderr
  // each concatenated in worker order, and the first nonzero exit status in worker order (0 when every one
  // succeeded; 255 when ssh could not reach a host, as gcloud and ssh say). A node that is not up gives 255 and says
  // so in `err`.
  RunResult ssh(const std::string& zone, const std::string& node, const std::string& selection,
                const std::string& command, const std::string& user = "root");
  // Copies local `sources` to `remote_path` on the selected workers (scp -r when `recursive`).
  RunResult scp_to(const std::string& zone, const std::string& node, const std::string& selection,
                   const std::vector<std::string>& sources, const std::string& remote_path,
                   const std::string& user = "root", bool recursive = false);
  // Copies `remote_path` on one worker to local `local_path`.
  RunResult scp_from(const std::string& zone, const std::string& node, int worker, const std::string& remote_path,
                     const std::string& local_path, const std::string& user = "root");

private:
  // Runs `argv` of each selected worker of the node's target at once (ssh and scp_to).
  RunResult on_workers(const std::string& zone, const std::string& node, const std::string& selection,
                       const std::string& user,
                       const std::function<std::vector<std::string>(const remote::SliceTarget&, int)>& argv);
  // The workers `selection` names among `count`; empty when it is malformed or out of range.
  static std::vector<int> workers_of(const std::string& selection, int count);

  std::filesystem::path dir_;
  std::filesystem::path key_;
  std::string project_;
  int port_ = 0;
  std::string error_;
};

} // namespace jobman::test
