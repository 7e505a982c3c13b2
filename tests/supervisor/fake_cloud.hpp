// The cloud as the in-process supervisor tests see it: queued resources and nodes in memory, whose states a test
// sets, and a record of every call the supervisor made.
#pragma once

#include "operations.hpp"

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace jobman::test {

// One slice: a queued resource and its node, or a node created directly (tpu-vm mode).
struct FakeSlice {
  std::string zone;
  std::string id;          // The queued resource's id, or the node's.
  bool node_only = false;  // A node created directly.
  std::string node_id;     // The node's id (a queued resource's nodeSpec[0].nodeId); a multislice one's prefix.
  int node_count = 1;      // A multislice request's nodeCount: its nodes are NODE_ID-0 ... NODE_ID-(count-1).
  bool spot = false;       // A `spot` member in the request.
  std::string accelerator; // acceleratorType.
  int hosts = 1;
  cloud::QueuedResourceState state = cloud::QueuedResourceState::waiting_for_resources; // A queued resource's.
  std::optional<cloud::RpcStatus> failed_error;                                         // A FAILED one's.
  std::optional<cloud::NodeState> node; // The node's state; nullopt while it does not exist.
  cloud::NodeHealth health = cloud::NodeHealth::healthy;
  std::optional<cloud::UpcomingMaintenance> maintenance;
  std::map<std::string, cloud::NodeHealth> node_health; // One node's health, by node id, over `health`.
  std::vector<std::string> physical_hosts; // The guest attribute host/physical_host, by worker (across the nodes).
  std::int64_t valid_until_ms = 0;         // queueingPolicy.validUntilDuration after the create; 0: none.
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> metadata; // The node's, as the create asked for it and patches changed it.
  int silent_hosts = 0;                        // Hosts (the last ones) that have not published their SSH host key.
  nlohmann::json request;                      // The create's body.
  long long run_seconds = 0;                   // A flex-start request's runDuration.maxRunDuration; 0: none.
  std::optional<std::int64_t> termination_ms;  // When its run ends: set as it becomes ACTIVE, for a flex-start one.
};

// SliceOps over FakeSlices. A create makes a queued resource WAITING_FOR_RESOURCES (a node: CREATING, its create's
// operation not done) unless the zone has capacity (set_capacity), in which case it is ACTIVE with a READY node at
// once. A queued resource still waiting when its queueingPolicy.validUntilDuration has passed is FAILED, as the API
// fails it. Calls are recorded as "create qr ZONE/ID", "get node ZONE/ID", "list qr ZONE", "delete qr ZONE/ID", ...
class FakeSlices final : public core::supervision::SliceOps {
public:
  // The cloud's clock, in milliseconds since the epoch.
  explicit FakeSlices(std::function<std::int64_t()> clock) : clock_(std::move(clock)) {}

  // ---- what the test sets ----
  // Whether a create in `zone` is granted at once.
  void set_capacity(const std::string& zone, bool capacity);
  // The next call whose record starts with `call` ("create qr", "list qr us-central2-b") throws an ApiError with
  // `http_status` instead.
  void fail_next(const std::string& call, int http_status, const std::string& message = "injected");
  // Grants a waiting slice: ACTIVE with a READY, healthy node of its hosts.
  void grant(const std::string& id);
  // Takes a slice as a spot preemption does: SUSPENDED (a node: PREEMPTED).
  void preempt(const std::string& id);
  // Ends a flex-start slice's run as the cloud does at its termination time: SUSPENDED, its node deleted.
  void end_run(const std::string& id);
  // Sets a slice's queued resource state; the node follows for the states that have none.
  void set_state(const std::string& id, cloud::QueuedResourceState state);
  // Fails a waiting queued resource (FAILED with `error`); a node's create operation fails with `code`.
  void fail(const std::string& id, int code, const std::string& message);
  // Sets the node's health, and the maintenance it announces.
  void set_health(const std::string& id, cloud::NodeHealth health,
                  std::optional<cloud::UpcomingMaintenance> maintenance = std::nullopt);
  // Sets the health of one node of a multislice slice.
  void set_node_health(const std::string& id, const std::string& node_id, cloud::NodeHealth health);
  // Sets the machines the slice's workers run on.
  void set_physical_hosts(const std::string& id, std::vector<std::string> hosts);
  // The machines of the slices created next, one list per slice, in order.
  void set_next_physical_hosts(std::vector<std::vector<std::string>> each);
  // Removes a slice, as if someone deleted it by hand.
  void vanish(const std::string& id);
  // Sets a slice's node metadata, as if someone changed it by hand.
  void set_metadata(const std::string& id, std::map<std::string, std::string> metadata);
  // The last `count` hosts of a slice have not published their SSH host keys (they never booted).
  void set_silent_hosts(const std::string& id, int count);
  // The project's common instance metadata.
  void set_project_metadata(std::map<std::string, std::string> metadata);
  // The POSIX username OS Login gives the account that registers `public_key` ("TYPE BASE64").
  void set_os_login_user(const std::string& public_key, const std::string& user);

  // ---- what the test reads ----
  [[nodiscard]] std::optional<FakeSlice> slice(const std::string& id) const;
  [[nodiscard]] std::vector<FakeSlice> slices() const;
  // The calls so far, in order, and then forgets them.
  std::vector<std::string> take_calls();
  // The calls so far that change something (create, delete, patch), in order.
  [[nodiscard]] std::vector<std::string> mutations() const;

  // ---- SliceOps ----
  cloud::CreateResult create_queued_resource(const std::string& zone, const std::string& id,
                                             const nlohmann::json& body) override;
  std::optional<cloud::QueuedResource> get_queued_resource(const std::string& zone, const std::string& id) override;
  // Recorded as "list qr ZONE", or "list qr ZONE v2alpha1"; only v2alpha1 tells runDuration.terminationTime.
  std::vector<cloud::QueuedResource> list_queued_resources(const std::string& zone, cloud::ApiVersion version) override;
  std::optional<cloud::Operation> delete_queued_resource(const std::string& zone, const std::string& id) override;
  cloud::NodeCreateResult create_node(const std::string& zone, const std::string& id,
                                      const nlohmann::json& body) override;
  std::optional<cloud::Node> get_node(const std::string& zone, const std::string& id) override;
  std::vector<cloud::Node> list_nodes(const std::string& zone) override;
  std::optional<cloud::Operation> delete_node(const std::string& zone, const std::string& id) override;
  std::vector<std::map<std::string, std::string>> guest_attributes(const std::string& zone,
                                                                   const std::string& id) override;
  cloud::Operation set_node_metadata(const std::string& zone, const std::string& id,
                                     const std::map<std::string, std::string>& metadata) override;
  cloud::Operation get_operation(const std::string& name) override;
  std::map<std::string, std::string> project_metadata() override;
  std::string os_login_user(const std::string& public_key) override;

private:
  // Records `call` and throws the failure injected for it, if any; fails the queued resources whose validUntil
  // passed. Called with mutex_ held.
  void record(const std::string& call);
  // Deletes a queued resource (or a node created directly); nullopt when it was already gone.
  std::optional<cloud::Operation> remove(const std::string& zone, const std::string& id, bool node_only);
  [[nodiscard]] cloud::QueuedResource as_queued_resource(const FakeSlice& s,
                                                         cloud::ApiVersion version = cloud::ApiVersion::v2) const;
  // Node `index` of the slice (0 for one node).
  [[nodiscard]] cloud::Node as_node(const FakeSlice& s, int index = 0) const;
  FakeSlice* find(const std::string& zone, const std::string& id, bool node_only);
  FakeSlice& named(const std::string& id);

  std::function<std::int64_t()> clock_;
  mutable std::mutex mutex_;
  std::vector<FakeSlice> slices_;
  std::map<std::string, bool> capacity_;
  std::vector<std::pair<std::string, std::pair<int, std::string>>> failures_;
  std::vector<std::string> calls_;
  std::vector<std::string> mutations_;
  std::map<std::string, std::optional<cloud::RpcStatus>> create_errors_; // A node create operation's error by id.
  std::vector<std::vector<std::string>> next_hosts_;
  std::map<std::string, std::string> project_metadata_;
  std::map<std::string, std::string> os_login_users_;
};

} // namespace jobman::test
