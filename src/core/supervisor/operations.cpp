// The supervisor's seams as the daemon fills them: the TPU API client for slices, remote:: (gcloud or ssh, and the
// workers' helper) for workers.
#include "operations.hpp"

#include <chrono>
#include <mutex>
#include <utility>

namespace jobman::core::supervision {

namespace {

class ApiSliceOps final : public SliceOps {
public:
  ApiSliceOps(std::shared_ptr<cloud::TpuClient> client, std::string project)
      : client_(std::move(client)), project_(std::move(project)) {}

  cloud::CreateResult create_queued_resource(const std::string& zone, const std::string& id,
                                             const nlohmann::json& body) override {
    return client_->create_queued_resource(at(zone), id, body);
  }
  std::optional<cloud::QueuedResource> get_queued_resource(const std::string& zone, const std::string& id) override {
    return client_->get_queued_resource(at(zone), id);
  }
  std::vector<cloud::QueuedResource> list_queued_resources(const std::string& zone,
                                                           cloud::ApiVersion version) override {
    return client_->list_queued_resources(at(zone), kListPageSize, version);
  }
  std::optional<cloud::Operation> delete_queued_resource(const std::string& zone, const std::string& id) override {
    return client_->delete_queued_resource(at(zone), id, cloud::DeleteMode::force);
  }
  cloud::NodeCreateResult create_node(const std::string& zone, const std::string& id,
                                      const nlohmann::json& body) override {
    return client_->create_node(at(zone), id, body);
  }
  std::optional<cloud::Node> get_node(const std::string& zone, const std::string& id) override {
    return client_->get_node(at(zone), id);
  }
  std::vector<cloud::Node> list_nodes(const std::string& zone) override {
    return client_->list_nodes(at(zone), kListPageSize);
  }
  std::optional<cloud::Operation> delete_node(const std::string& zone, const std::string& id) override {
    return client_->delete_node(at(zone), id);
  }
  std::vector<std::map<std::string, std::string>> guest_attributes(const std::string& zone,
                                                                   const std::string& id) override {
    return client_->guest_attributes(at(zone), id);
  }
  cloud::Operation set_node_metadata(const std::string& zone, const std::string& id,
                                     const std::map<std::string, std::string>& metadata) override {
    return client_->patch_node(at(zone), id, {{"metadata", metadata}}, "metadata");
  }
  cloud::Operation get_operation(const std::string& name) override { return client_->get_operation(name); }

  std::map<std::string, std::string> project_metadata() override {
    const std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (!project_read_ || now - project_read_at_ >= kProjectMetadataAge) {
      project_metadata_ = client_->project_metadata(project_);
      project_read_ = true;
      project_read_at_ = now;
    }
    return project_metadata_;
  }

  std::string os_login_user(const std::string& public_key) override {
    const std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (const auto known = os_login_users_.find(public_key);
        known != os_login_users_.end() && now - known->second.second < kOsLoginAge) {
      return known->second.first;
    }
    auto user = client_->import_ssh_public_key(client_->account(), project_, public_key);
    os_login_users_[public_key] = {user, now};
    return user;
  }

private:
  // How long what the project's metadata and OS Login said is believed: the calls grow with time, not with jobs.
  static constexpr std::chrono::minutes kProjectMetadataAge{1};
  static constexpr std::chrono::minutes kOsLoginAge{10};

  [[nodiscard]] cloud::Location at(const std::string& zone) const { return {project_, zone}; }

  std::shared_ptr<cloud::TpuClient> client_;
  std::string project_;
  std::mutex mutex_; // Guards what follows. Held across the call that refreshes it: one call where many jobs ask.
  bool project_read_ = false;
  std::chrono::steady_clock::time_point project_read_at_;
  std::map<std::string, std::string> project_metadata_;
  std::map<std::string, std::pair<std::string, std::chrono::steady_clock::time_point>> os_login_users_;
};

class RemoteWorkerOps final : public WorkerOps {
public:
  std::vector<remote::WorkerSetup> set_up(const remote::SliceTarget& target, const std::vector<int>& workers,
                                          const remote::SetupPlan& plan, const std::filesystem::path& dir,
                                          std::chrono::milliseconds timeout) override {
    return remote::run_setup(target, workers, plan, dir, timeout);
  }
  std::vector<remote::WorkerRun> run(const remote::SliceTarget& target, const std::vector<int>& workers,
                                     const std::string& command, std::chrono::milliseconds timeout) override {
    return remote::run_on_workers(target, workers, command, timeout);
  }
  std::vector<remote::WorkerStatus> launch(const remote::SliceTarget& target, const std::vector<int>& workers,
                                           const remote::LaunchSpec& spec, std::chrono::milliseconds timeout) override {
    return remote::launch(target, workers, spec, timeout);
  }
  std::vector<remote::WorkerRun> stacks(const remote::SliceTarget& target, const std::vector<int>& workers,
                                        const remote::WorkloadId& id, std::chrono::milliseconds timeout) override {
    return remote::stacks(target, workers, id, timeout);
  }
  std::vector<remote::WorkerStatus> query(const remote::SliceTarget& target, const std::vector<int>& workers,
                                          const remote::WorkloadId& id, std::chrono::milliseconds timeout) override {
    return remote::query(target, workers, id, timeout);
  }
  std::vector<remote::WorkerStatus> stop(const remote::SliceTarget& target, const std::vector<int>& workers,
                                         const remote::WorkloadId& id, std::chrono::milliseconds grace,
                                         std::chrono::milliseconds timeout) override {
    return remote::stop(target, workers, id, grace, timeout);
  }
  std::vector<remote::StreamEnd> stream(const remote::SliceTarget& target, const std::vector<int>& workers,
                                        const remote::WorkloadId& id, const std::filesystem::path& dir,
                                        std::stop_token stop, const remote::LineSink& sink) override {
    return remote::attach(target, workers, id, dir, stop, sink);
  }
};

} // namespace

std::shared_ptr<SliceOps> make_slice_ops(const CloudAccess& access) {
  return std::make_shared<ApiSliceOps>(access.client, access.project);
}

std::shared_ptr<WorkerOps> make_worker_ops() {
  return std::make_shared<RemoteWorkerOps>();
}

} // namespace jobman::core::supervision
