// The Compute Engine and OS Login routes gcloud calls around a TPU VM: the project with its common instance metadata,
// setCommonInstanceMetadata and the global operations it returns (/compute/v1/...), and the user's login profile and
// SSH keys (/oslogin/v1/...).
#include "jobman/util/json_text.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/server.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace jobman::mock {

namespace {

constexpr const char* kComputeProjectRoute = "/compute/v1/projects/([^/]+)";
// How long globalOperations.wait waits at most before it answers with the operation as it is, as Google's does.
constexpr std::int64_t kWaitDeadlineMs = 120'000;

std::string compute_match(const httplib::Request& req, int i) {
  return req.matches[i].str();
}

} // namespace

void MockServer::register_compute_routes() {
  auto api = [this](const std::string& method) {
    return [this, method](const Handler& handler) { return api_route(method, handler); };
  };
  const std::string project = kComputeProjectRoute;
  const std::string operation = project + "/global/operations/([^/]+)";
  http_.Get(project, api("compute.projects.get")([this](const httplib::Request& req) {
              return world_->get_compute_project(compute_match(req, 1), util::now_ms());
            }));
  http_.Get(project + "/zones/([^/]+)", api("compute.zones.get")([this](const httplib::Request& req) {
              return world_->get_compute_zone(compute_match(req, 1), compute_match(req, 2));
            }));
  http_.Post(project + "/setCommonInstanceMetadata",
             api("compute.projects.setCommonInstanceMetadata")([this](const httplib::Request& req) {
               const auto body = util::parse_json_bounded(req.body);
               if (body.is_discarded()) {
                 return error_reply(400, "Invalid JSON payload received: the body is not JSON, or nests deeper "
                                         "than 128 levels");
               }
               return world_->set_common_instance_metadata(compute_match(req, 1), body, util::now_ms());
             }));
  http_.Get(operation, api("compute.globalOperations.get")([this](const httplib::Request& req) {
              return world_->get_compute_operation(compute_match(req, 1), compute_match(req, 2), util::now_ms());
            }));
  // Waits until the operation is DONE, or for two minutes, then answers it as get does.
  http_.Post(operation + "/wait", api("compute.globalOperations.wait")([this](const httplib::Request& req) {
               if (const auto end = world_->compute_operation_end_ms(compute_match(req, 1), compute_match(req, 2))) {
                 const auto now = util::now_ms();
                 const auto until = std::min(*end, now + kWaitDeadlineMs);
                 if (until > now) {
                   std::this_thread::sleep_for(std::chrono::milliseconds(until - now));
                 }
               }
               return world_->get_compute_operation(compute_match(req, 1), compute_match(req, 2), util::now_ms());
             }));

  // Cloud Resource Manager's projects.get: what gcloud asks when told to use a project (`gcloud config set project`).
  http_.Get("/cloudresourcemanager/v1/projects/([^/]+)",
            api("cloudresourcemanager.projects.get")([](const httplib::Request& req) {
              const auto id = compute_match(req, 1);
              return Reply{200,
                           {{"projectNumber", std::to_string(world_internal::project_number(id))},
                            {"projectId", id},
                            {"lifecycleState", "ACTIVE"},
                            {"name", id},
                            {"createTime", "2024-01-01T00:00:00.000Z"}}};
            }));

  // OS Login: users/{user} is the user's email.
  const std::string user = "/oslogin/v1/users/([^/:]+)";
  http_.Get(user + "/loginProfile", api("oslogin.users.getLoginProfile")([this](const httplib::Request& req) {
              return world_->get_login_profile(compute_match(req, 1), req.get_param_value("projectId"), util::now_ms());
            }));
  http_.Post(user + ":importSshPublicKey", api("oslogin.users.importSshPublicKey")([this](const httplib::Request& req) {
               const auto body = util::parse_json_bounded(req.body);
               if (body.is_discarded()) {
                 return error_reply(400, "Invalid JSON payload received: the body is not JSON, or nests deeper "
                                         "than 128 levels");
               }
               return world_->import_ssh_public_key(compute_match(req, 1), req.get_param_value("projectId"), body,
                                                    util::now_ms());
             }));
}

} // namespace jobman::mock
