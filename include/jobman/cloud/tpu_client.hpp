// The Cloud TPU v2 REST API (queued resources, nodes, operations) with retries and typed answers. Field names and
// enum strings are those of the API's discovery document.
#pragma once

#include "jobman/cloud/auth.hpp"
#include "jobman/cloud/http.hpp"
#include "jobman/cloud/retry.hpp"
#include "jobman/util/error.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace jobman::cloud {

// Google's default TPU API base URL.
inline constexpr const char* kDefaultTpuEndpoint = "https://tpu.googleapis.com/v2/";
// Google's Compute Engine API (a project's common instance metadata) and OS Login API (a user's SSH keys).
inline constexpr const char* kDefaultComputeEndpoint = "https://compute.googleapis.com/compute/v1/";
inline constexpr const char* kDefaultOsLoginEndpoint = "https://oslogin.googleapis.com/v1/";
inline constexpr const char* kDefaultStorageEndpoint = "https://storage.googleapis.com/storage/v1/";

// Cloud Storage's base URL beside the TPU API at `tpu_endpoint` (a resolved one): a server on this machine's loopback
// (a mock answering Google's API) serves it at /storage/v1/ of the same origin; anywhere else it is Google's.
std::string resolve_storage_endpoint(std::string_view tpu_endpoint);

// The base URL to use: JOBMAN_API_ENDPOINT, else `configured` (the settings' api_endpoint), else kDefaultTpuEndpoint;
// "/v2/" is appended when the URL does not end with it (so a mock's "http://127.0.0.1:8471" works).
std::string resolve_tpu_endpoint(std::string_view configured);

// The versions of the TPU API jobman calls: v2, and v2alpha1 for what only it has (flex-start, reservations,
// best-effort).
enum class ApiVersion { v2, v2alpha1 };

// The field of a queued resource's NodeSpec that asks for several slices (nodeCount, nodeIdPrefix) in place of a
// nodeId: v2's name, and v2alpha1's for the same field (each version refuses the other's).
inline constexpr const char* kMultisliceParams = "multisliceParams";
inline constexpr const char* kMultiNodeParams = "multiNodeParams";

// Whether a queuedResources.create body asks for what only v2alpha1 has: a provisioningModel, a runDuration, a
// bestEffort tier, guaranteed.reserved, or several slices under v2alpha1's name (multiNodeParams).
bool needs_v2alpha1(const nlohmann::json& body);

// A reservation of the project (v2alpha1's Reservation), with its chips.
struct Reservation {
  std::string name;     // projects/P/locations/Z/reservations/ID.
  std::string state;    // state: "APPROVED", "PROVISIONING", "ACTIVE", ...
  std::string type;     // standard.resourceType: "TPU_V4", ...
  long long chips = 0;  // standard.size.
  long long in_use = 0; // standard.usage.total.
  nlohmann::json raw;   // The whole object as received.
};

// A project and zone: "projects/P/locations/Z".
struct Location {
  std::string project; // Project id.
  std::string zone;    // Zone, e.g. "us-central2-b".
  // "projects/P/locations/Z".
  [[nodiscard]] std::string name() const { return "projects/" + project + "/locations/" + zone; }
};

// google.rpc.Status, as found in Operation.error and FailedData.error.
struct RpcStatus {
  int code = 0;        // The gRPC code.
  std::string message; // The server's message.
};

// QueuedResourceState.state.
enum class QueuedResourceState {
  state_unspecified,
  creating,
  accepted,
  provisioning,
  failed,
  deleting,
  active,
  suspending,
  suspended,
  waiting_for_resources,
};

// QueuedResourceState.stateInitiator.
enum class StateInitiator { state_initiator_unspecified, user, service };

// Node.state.
enum class NodeState {
  state_unspecified,
  creating,
  ready,
  restarting,
  reimaging,
  deleting,
  repairing,
  stopped,
  stopping,
  starting,
  preempted,
  terminated,
  hiding,
  hidden,
  unhiding,
  unknown,
};

// Node.health.
enum class NodeHealth { health_unspecified, healthy, timeout, unhealthy_tensorflow, unhealthy_maintenance };

// The enum strings of the discovery document ("WAITING_FOR_RESOURCES", "SERVICE", "PREEMPTED", "HEALTHY").
const char* to_string(QueuedResourceState state);
const char* to_string(StateInitiator initiator);
const char* to_string(NodeState state);
const char* to_string(NodeHealth health);

// A queued resource as the API returns it.
struct QueuedResource {
  std::string name;                                                   // projects/P/locations/Z/queuedResources/ID.
  std::string create_time;                                            // createTime (RFC 3339).
  QueuedResourceState state = QueuedResourceState::state_unspecified; // state.state.
  StateInitiator state_initiator = StateInitiator::state_initiator_unspecified; // state.stateInitiator.
  std::optional<RpcStatus> failed_error;                                        // state.failedData.error.
  std::vector<std::string> node_ids;                                            // tpu.nodeSpec[].nodeId.
  std::map<std::string, std::string> node_labels; // tpu.nodeSpec[].node.labels (the first spec that has them).
  bool spot = false;                              // A `spot` member is present.
  std::string provisioning_model;                 // provisioningModel ("FLEX_START", ...; v2alpha1); empty when none.
  std::optional<std::int64_t> termination_ms;     // runDuration.terminationTime (v2alpha1, flex-start once ACTIVE).
  nlohmann::json raw;                             // The whole object as received.
};

// One worker host's addresses (Node.networkEndpoints[]).
struct NetworkEndpoint {
  std::string ip_address;  // ipAddress.
  std::string external_ip; // accessConfig.externalIp; empty when none.
};

// A maintenance event a node announces (Node.upcomingMaintenance, in the v2 API's newer revisions).
struct UpcomingMaintenance {
  std::string type;                                   // type: "SCHEDULED", "UNSCHEDULED" ("UNKNOWN_TYPE").
  bool can_reschedule = false;                        // canReschedule.
  std::optional<std::int64_t> window_start_ms;        // windowStartTime.
  std::optional<std::int64_t> window_end_ms;          // windowEndTime.
  std::optional<std::int64_t> latest_window_start_ms; // latestWindowStartTime.
  std::string status;                                 // maintenanceStatus: "PENDING", "ONGOING".
};

// A TPU node as the API returns it.
struct Node {
  std::string name;                                   // projects/P/locations/Z/nodes/ID.
  std::string create_time;                            // createTime (RFC 3339).
  std::string queued_resource;                        // queuedResource: the one that requested it; empty when none.
  NodeState state = NodeState::state_unspecified;     // state.
  NodeHealth health = NodeHealth::health_unspecified; // health.
  std::string health_description;                     // healthDescription: why it is unhealthy; empty when healthy.
  std::optional<UpcomingMaintenance> upcoming_maintenance; // upcomingMaintenance, when it announces one.
  std::string accelerator_type;                            // acceleratorType, e.g. "v4-32".
  std::vector<NetworkEndpoint> network_endpoints;          // networkEndpoints[], worker 0 first.
  std::map<std::string, std::string> labels;               // labels.
  std::map<std::string, std::string> metadata;             // metadata ("ssh-keys", "enable-oslogin", ...).
  nlohmann::json raw;                                      // The whole object as received.
};

// A long-running operation.
struct Operation {
  std::string name;               // projects/P/locations/Z/operations/ID.
  bool done = false;              // done.
  std::optional<RpcStatus> error; // error, when it failed.
  nlohmann::json response;        // response, when it succeeded (null otherwise).
  nlohmann::json metadata;        // metadata.
};

// Parsers from the API's JSON; missing fields keep their defaults, unknown enum strings become *_unspecified.
QueuedResource parse_queued_resource(const nlohmann::json& json);
Node parse_node(const nlohmann::json& json);
Operation parse_operation(const nlohmann::json& json);

// A TPU API call that failed: "TPU API: <method> <resource>: <STATUS> (<http>): <server's message>".
class ApiError : public Error {
public:
  // `http_status` is 0 when no answer arrived; `status` is google.rpc's name ("NOT_FOUND"), or empty.
  ApiError(const std::string& message, int http_status, std::string status)
      : Error(message), http_status_(http_status), status_(std::move(status)) {}
  // The HTTP status, or 0 when no answer arrived.
  [[nodiscard]] int http_status() const noexcept { return http_status_; }
  // The google.rpc status name, e.g. "RESOURCE_EXHAUSTED"; empty when unknown.
  [[nodiscard]] const std::string& status() const noexcept { return status_; }

private:
  int http_status_;
  std::string status_;
};

// How a client retries and polls; waiting and sending are injectable so tests need neither wait nor a server.
struct TpuClientOptions {
  std::string endpoint = kDefaultTpuEndpoint;                // Base URL ending in "/v2/".
  std::string compute_endpoint = kDefaultComputeEndpoint;    // Base URL of the Compute API, ending in "/".
  std::string oslogin_endpoint = kDefaultOsLoginEndpoint;    // Base URL of the OS Login API, ending in "/".
  std::string storage_endpoint = kDefaultStorageEndpoint;    // Base URL of Cloud Storage's JSON API, ending in "/".
  RetryPolicy retry;                                         // For every request.
  HttpOptions http;                                          // Connection and request timeouts.
  std::chrono::milliseconds poll_initial{1000};              // First wait when polling an operation.
  std::chrono::milliseconds poll_max{10'000};                // Longest wait between polls.
  std::function<void(std::chrono::milliseconds)> sleep;      // Waits; std::this_thread::sleep_for when empty.
  std::function<double()> jitter;                            // Values in [0, 1); a random generator when empty.
  std::function<HttpResponse(const HttpRequest&)> transport; // Sends a request; the libcurl HttpClient when empty.
};

// A Cloud Storage bucket's place, as buckets.get gives it.
struct Bucket {
  std::string name;
  std::string location;      // Upper case, as the API gives it: "EUROPE-WEST4", "US", "NAM4".
  std::string location_type; // "region", "dual-region", "multi-region".
  std::string storage_class; // "STANDARD", "NEARLINE", ...
  // A configurable dual-region's two regions (customPlacementConfig.dataLocations), upper case; empty otherwise.
  std::vector<std::string> data_locations;
};

// Whether a delete also removes what the resource holds (an ACTIVE queued resource needs it).
enum class DeleteMode { normal, force };

// What queuedResources.create led to.
struct CreateResult {
  std::optional<Operation> operation;     // The create's operation; empty when the resource already existed.
  std::optional<QueuedResource> existing; // The resource found after a 409 ALREADY_EXISTS.
};

// What nodes.create led to.
struct NodeCreateResult {
  std::optional<Operation> operation; // The create's operation; empty when the node already existed.
  std::optional<Node> existing;       // The node found after a 409 ALREADY_EXISTS.
};

// A client of one TPU API endpoint. Thread-safe.
class TpuClient {
public:
  // Uses `tokens` for every call and `options` for the endpoint, retries and polling.
  TpuClient(std::shared_ptr<CachedTokenSource> tokens, TpuClientOptions options);
  ~TpuClient();
  TpuClient(const TpuClient&) = delete;
  TpuClient& operator=(const TpuClient&) = delete;

  // queuedResources.create with a request id kept across retries; a 409 returns the existing resource. Sent to
  // v2alpha1 when the body needs it (needs_v2alpha1), where a 404 says the endpoint may not serve that version.
  CreateResult create_queued_resource(const Location& where, const std::string& id, const nlohmann::json& body);
  // queuedResources.get; nullopt when it does not exist. v2alpha1 tells a flex-start slice's termination time.
  std::optional<QueuedResource> get_queued_resource(const Location& where, const std::string& id,
                                                    ApiVersion version = ApiVersion::v2);
  // queuedResources.list, every page (`page_size` per request; 0 for the server's default).
  std::vector<QueuedResource> list_queued_resources(const Location& where, int page_size = 0,
                                                    ApiVersion version = ApiVersion::v2);
  // reservations.list (v2alpha1 only), every page: the project's reservations in the zone.
  std::vector<Reservation> list_reservations(const Location& where);
  // queuedResources.delete with a request id kept across retries; nullopt when it was already gone.
  std::optional<Operation> delete_queued_resource(const Location& where, const std::string& id, DeleteMode mode);

  // nodes.create (tpu-vm mode); a 409 returns the existing node, which is what makes a retried create safe (the
  // method binds no request id).
  NodeCreateResult create_node(const Location& where, const std::string& id, const nlohmann::json& body);
  // nodes.get; nullopt when it does not exist.
  std::optional<Node> get_node(const Location& where, const std::string& id);
  // nodes.list, every page.
  std::vector<Node> list_nodes(const Location& where, int page_size = 0);
  // nodes.delete (the method binds no request id; a repeated delete finds the node gone); nullopt when it was already
  // gone.
  std::optional<Operation> delete_node(const Location& where, const std::string& id);

  // nodes.patch of the fields `update_mask` names ("metadata"), taken from `fields` (a Node object); its operation.
  Operation patch_node(const Location& where, const std::string& id, const nlohmann::json& fields,
                       const std::string& update_mask);

  // nodes.getGuestAttributes for every worker: the value of `namespace_key` ("host/physical_host") by worker, in
  // worker order; "" for a worker that publishes none. A node that answers 400 or 404 (not READY, gone) has none.
  std::vector<std::string> guest_attribute(const Location& where, const std::string& id,
                                           const std::string& namespace_key);
  // nodes.getGuestAttributes for every worker with `query_path` ("" for all): each worker's attributes by
  // "NAMESPACE/KEY", in worker order. A node that answers 400 or 404 (not READY, gone) has none.
  std::vector<std::map<std::string, std::string>> guest_attributes(const Location& where, const std::string& id,
                                                                   const std::string& query_path = "");

  // locations.list, every page: the zones of `project` where the TPU API serves ("us-central2-b", ...), as their
  // `locationId` field.
  std::vector<std::string> list_locations(const std::string& project);
  // acceleratorTypes.list, every page: the accelerator types the zone offers ("v4-8", ...), as their `type` field.
  std::vector<std::string> list_accelerator_types(const Location& where);
  // runtimeVersions.list, every page: the runtime versions the zone offers, as their `version` field.
  std::vector<std::string> list_runtime_versions(const Location& where);

  // The Compute API's projects.get: the project's common instance metadata, by key ("ssh-keys", "enable-oslogin").
  std::map<std::string, std::string> project_metadata(const std::string& project);
  // The OS Login API's users.importSshPublicKey: adds `public_key` ("TYPE BASE64 [COMMENT]") to the login profile of
  // `account` (an email) for `project`, and returns the POSIX username the profile gives the account there. Throws
  // jobman::Error when the profile has no POSIX account for the project.
  std::string import_ssh_public_key(const std::string& account, const std::string& project,
                                    const std::string& public_key);

  // Cloud Storage's buckets.get (metadata only): where the bucket is. nullopt when it does not exist (404); a bucket
  // the account may not read (403) throws ApiError like any other answer.
  std::optional<Bucket> get_bucket(const std::string& name);

  // operations.get by full name.
  Operation get_operation(const std::string& name);
  // Polls operations.get with backoff until done; throws jobman::Error when `timeout` passes first.
  Operation wait_operation(const std::string& name, std::chrono::milliseconds timeout);

  // The base URL, ending in "/v2/".
  [[nodiscard]] const std::string& endpoint() const;
  // The account its tokens belong to (CachedTokenSource::account).
  std::string account();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace jobman::cloud
