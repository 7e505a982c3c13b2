// The supervisor's two seams: what it asks of the cloud about slices (SliceOps) and of the workers of a slice
// (WorkerOps). The daemon uses the TPU API client and gcloud/ssh (make_slice_ops, make_worker_ops); the in-process
// tests use fakes, so that the phase machine runs with no server, no child process and no wait.
#pragma once

#include "jobman/cloud/tpu_client.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/remote/gcloud.hpp"
#include "jobman/remote/setup.hpp"
#include "jobman/remote/workload.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace jobman::core::supervision {

// Queued resources and nodes in the project's zones. Thread-safe: called from the action threads's threads. Each call
// throws cloud::ApiError for an answer the API gave, jobman::Error for one it could not give.
class SliceOps {
public:
  virtual ~SliceOps() = default;

  // queuedResources.create; a 409 returns the existing resource.
  virtual cloud::CreateResult create_queued_resource(const std::string& zone, const std::string& id,
                                                     const nlohmann::json& body) = 0;
  // queuedResources.get; nullopt when it does not exist.
  virtual std::optional<cloud::QueuedResource> get_queued_resource(const std::string& zone, const std::string& id) = 0;
  // queuedResources.list, every page, through `version` (v2alpha1 tells a flex-start slice's termination time).
  virtual std::vector<cloud::QueuedResource> list_queued_resources(const std::string& zone,
                                                                   cloud::ApiVersion version) = 0;
  // queuedResources.delete with force (an ACTIVE one holds a node); nullopt when it was already gone.
  virtual std::optional<cloud::Operation> delete_queued_resource(const std::string& zone, const std::string& id) = 0;

  // nodes.create (tpu-vm mode); a 409 returns the existing node.
  virtual cloud::NodeCreateResult create_node(const std::string& zone, const std::string& id,
                                              const nlohmann::json& body) = 0;
  // nodes.get; nullopt when it does not exist.
  virtual std::optional<cloud::Node> get_node(const std::string& zone, const std::string& id) = 0;
  // nodes.list, every page.
  virtual std::vector<cloud::Node> list_nodes(const std::string& zone) = 0;
  // nodes.delete; nullopt when it was already gone.
  virtual std::optional<cloud::Operation> delete_node(const std::string& zone, const std::string& id) = 0;
  // nodes.getGuestAttributes: every worker's attributes by "NAMESPACE/KEY", in worker order.
  virtual std::vector<std::map<std::string, std::string>> guest_attributes(const std::string& zone,
                                                                           const std::string& id) = 0;
  // nodes.patch of the node's metadata: `metadata` becomes the whole of it. Its operation.
  virtual cloud::Operation set_node_metadata(const std::string& zone, const std::string& id,
                                             const std::map<std::string, std::string>& metadata) = 0;
  // operations.get by full name.
  virtual cloud::Operation get_operation(const std::string& name) = 0;

  // The project's common instance metadata (the Compute API's projects.get), read at most once a minute.
  virtual std::map<std::string, std::string> project_metadata() = 0;
  // Registers `public_key` ("TYPE BASE64") with OS Login for the account jobman's tokens belong to, at most once in ten
  // minutes per key; the POSIX username OS Login gives that account in the project.
  virtual std::string os_login_user(const std::string& public_key) = 0;

protected:
  SliceOps() = default;
  SliceOps(const SliceOps&) = default;
  SliceOps& operator=(const SliceOps&) = default;
};

// The workers of a slice: setting them up, running the workload, following its output. Thread-safe. Each call
// reports a worker it cannot reach in its result (exit code 255, WorkloadState::unreachable), not by throwing.
class WorkerOps {
public:
  virtual ~WorkerOps() = default;

  // Runs the setup plan on `workers`, writing each worker's log to dir/setup-W.log.
  virtual std::vector<remote::WorkerSetup> set_up(const remote::SliceTarget& target, const std::vector<int>& workers,
                                                  const remote::SetupPlan& plan, const std::filesystem::path& dir,
                                                  std::chrono::milliseconds timeout) = 0;
  // Runs `command` on `workers` and waits for it (tpu.preflight).
  virtual std::vector<remote::WorkerRun> run(const remote::SliceTarget& target, const std::vector<int>& workers,
                                             const std::string& command, std::chrono::milliseconds timeout) = 0;
  // Starts the workload on `workers` (a second launch of the same id finds it running).
  virtual std::vector<remote::WorkerStatus> launch(const remote::SliceTarget& target, const std::vector<int>& workers,
                                                   const remote::LaunchSpec& spec,
                                                   std::chrono::milliseconds timeout) = 0;
  // How the workload stands on each of `workers`.
  virtual std::vector<remote::WorkerStatus> query(const remote::SliceTarget& target, const std::vector<int>& workers,
                                                  const remote::WorkloadId& id, std::chrono::milliseconds timeout) = 0;
  // Stops the workload on `workers`: SIGTERM, then SIGKILL after `grace`.
  virtual std::vector<remote::WorkerStatus> stop(const remote::SliceTarget& target, const std::vector<int>& workers,
                                                 const remote::WorkloadId& id, std::chrono::milliseconds grace,
                                                 std::chrono::milliseconds timeout) = 0;
  // What the workload's processes on `workers` are doing (remote::stacks): each worker's report.
  virtual std::vector<remote::WorkerRun> stacks(const remote::SliceTarget& target, const std::vector<int>& workers,
                                                const remote::WorkloadId& id, std::chrono::milliseconds timeout) = 0;
  // Streams the workload's output home into dir/worker-W.log (and to `sink`) until it ends on every worker or `stop`
  // is requested; how each worker's stream ended.
  virtual std::vector<remote::StreamEnd> stream(const remote::SliceTarget& target, const std::vector<int>& workers,
                                                const remote::WorkloadId& id, const std::filesystem::path& dir,
                                                std::stop_token stop, const remote::LineSink& sink) = 0;

protected:
  WorkerOps() = default;
  WorkerOps(const WorkerOps&) = default;
  WorkerOps& operator=(const WorkerOps&) = default;
};

// The TPU API client of `access`, in its project.
std::shared_ptr<SliceOps> make_slice_ops(const CloudAccess& access);
// gcloud (or ssh) and the workers' helper, through remote::.
std::shared_ptr<WorkerOps> make_worker_ops();

} // namespace jobman::core::supervision
