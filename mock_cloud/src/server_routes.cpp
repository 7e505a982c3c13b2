// The /v2 routes beyond queued resources and reading nodes and operations: the catalog (locations, acceleratorTypes,
// runtimeVersions, the service identity), standalone nodes and what a client does to a node, and operations.cancel
// and delete.
#include "jobman/util/json_text.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/api_version.hpp"
#include "mock_cloud/server.hpp"
#include "server_internal.hpp"

namespace jobman::mock {

using server_internal::list_query;

namespace {

// The route of a project in every version of the API: /v2/projects/P or /v2alpha1/projects/P.
std::string project_route() {
  return std::string(kTpuVersionRoute) + "/projects/([^/]+)";
}
constexpr const char* kId = "([^/:]+)";

// The route of a location: /v2/projects/P/locations/Z (or /v2alpha1/...).
std::string location_route() {
  return project_route() + "/locations/([^/:]+)";
}

std::string match(const httplib::Request& req, int i) {
  return req.matches[i].str();
}

// The request body as JSON: null when empty, discarded when it is not JSON.
nlohmann::json body_of(const httplib::Request& req) {
  return req.body.empty() ? nlohmann::json() : util::parse_json_bounded(req.body);
}

Reply bad_json() {
  return error_reply(400, "Invalid JSON payload received: the body is not JSON, or nests deeper than 128 levels");
}

Reply bad_page() {
  return error_reply(400, "pageSize must be a non-negative whole number");
}

} // namespace

void MockServer::register_catalog_routes() {
  const auto location = location_route();
  http_.Get(project_route() + "/locations", api_route("locations.list", [this](const httplib::Request& req) {
              auto query = list_query(req);
              return query ? world_->list_locations(match(req, 1), *query) : bad_page();
            }));
  http_.Get(location, api_route("locations.get", [this](const httplib::Request& req) {
              return world_->get_location(match(req, 1), match(req, 2));
            }));
  http_.Post(location + ":generateServiceIdentity",
             api_route("locations.generateServiceIdentity", [this](const httplib::Request& req) {
               return world_->generate_service_identity(match(req, 1), match(req, 2));
             }));
  http_.Get(location + "/acceleratorTypes", api_route("acceleratorTypes.list", [this](const httplib::Request& req) {
              auto query = list_query(req);
              return query ? world_->list_accelerator_types(match(req, 1), match(req, 2), *query) : bad_page();
            }));
  http_.Get(location + "/acceleratorTypes/" + kId,
            api_route("acceleratorTypes.get", [this](const httplib::Request& req) {
              return world_->get_accelerator_type(match(req, 1), match(req, 2), match(req, 3));
            }));
  http_.Get(location + "/reservations", api_route("reservations.list", [this](const httplib::Request& req) {
              auto query = list_query(req);
              return query ? world_->list_reservations(match(req, 1), match(req, 2), *query) : bad_page();
            }));
  http_.Get(location + "/runtimeVersions", api_route("runtimeVersions.list", [this](const httplib::Request& req) {
              auto query = list_query(req);
              return query ? world_->list_runtime_versions(match(req, 1), match(req, 2), *query) : bad_page();
            }));
  http_.Get(location + "/runtimeVersions/" + kId, api_route("runtimeVersions.get", [this](const httplib::Request& req) {
              return world_->get_runtime_version(match(req, 1), match(req, 2), match(req, 3));
            }));
}

void MockServer::register_node_and_operation_routes() {
  const auto location = location_route();
  const std::string node = location + "/nodes/" + kId;
  http_.Post(location + "/nodes", api_route("nodes.create", [this](const httplib::Request& req) {
               const auto body = body_of(req);
               if (body.is_discarded()) {
                 return bad_json();
               }
               return world_->create_node(match(req, 1), match(req, 2), req.get_param_value("nodeId"), body,
                                          util::now_ms());
             }));
  http_.Post(node + ":stop", api_route("nodes.stop", [this](const httplib::Request& req) {
               return body_of(req).is_discarded()
                          ? bad_json()
                          : world_->stop_node(match(req, 1), match(req, 2), match(req, 3), util::now_ms());
             }));
  http_.Post(node + ":start", api_route("nodes.start", [this](const httplib::Request& req) {
               return body_of(req).is_discarded()
                          ? bad_json()
                          : world_->start_node(match(req, 1), match(req, 2), match(req, 3), util::now_ms());
             }));
  http_.Patch(node, api_route("nodes.patch", [this](const httplib::Request& req) {
                const auto body = body_of(req);
                if (body.is_discarded()) {
                  return bad_json();
                }
                return world_->patch_node(match(req, 1), match(req, 2), match(req, 3),
                                          req.get_param_value("updateMask"), body, util::now_ms());
              }));
  http_.Post(node + ":getGuestAttributes", api_route("nodes.getGuestAttributes", [this](const httplib::Request& req) {
               const auto body = body_of(req);
               if (body.is_discarded()) {
                 return bad_json();
               }
               return world_->get_guest_attributes(match(req, 1), match(req, 2), match(req, 3), body, util::now_ms());
             }));
  const std::string operation = location + "/operations/" + kId;
  http_.Post(operation + ":cancel", api_route("operations.cancel", [this](const httplib::Request& req) {
               return world_->cancel_operation(match(req, 1), match(req, 2), match(req, 3), util::now_ms());
             }));
  http_.Delete(operation, api_route("operations.delete", [this](const httplib::Request& req) {
                 return world_->delete_operation(match(req, 1), match(req, 2), match(req, 3), util::now_ms());
               }));
}

} // namespace jobman::mock
