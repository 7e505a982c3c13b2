// Shared by the World's sources only: its private records, mutate_at, pool keys and the helpers that shape replies.
#pragma once

#include "jobman/config/accelerator.hpp"
#include "mock_cloud/world.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jobman::mock {

// Chips, quota and use of one zone, generation and tier.
struct World::Pool {
  std::string zone;        // The zone.
  std::string generation;  // The TPU generation ("v4").
  Tier tier = Tier::spot;  // How its slices are provisioned (config.hpp).
  int chips = 0;           // Chips the zone has (best_effort: none; its slices take the spot pool's).
  int quota = 0;           // Chips one project may hold at once (check_quota).
  int used = 0;            // Chips held by queued resources (holds_capacity); best_effort's count in the spot pool.
  std::string reservation; // reserved: the reservation's id.
};

// One queued resource and its timers.
struct World::QueuedResource {
  std::string name;               // projects/P/locations/Z/queuedResources/ID
  std::string project;            // P.
  std::string zone;               // Z.
  std::string id;                 // ID.
  nlohmann::json request;         // The QueuedResource as the client sent it, minus output-only fields.
  std::string state = "CREATING"; // The API's state name.
  std::string initiator = "USER"; // The stateInitiator: USER or SERVICE.
  std::string accelerator;        // The accelerator type ("v4-8").
  std::string generation;         // Its TPU generation ("v4").
  Tier tier = Tier::spot;         // How it is provisioned (config.hpp).
  int chips = 0;                  // Chips its slices take from its pool, all of them together.
  double run_seconds = 0;         // flex_start: runDuration.maxRunDuration, in simulated seconds.
  std::int64_t terminate_ms = 0;  // flex_start: when its run ends (runDuration.terminationTime), once ACTIVE.
  std::string reservation;        // reserved: the reservation's full name (projects/P/locations/Z/reservations/R).
  int hosts = 0;                  // Worker hosts of each slice.
  // The full names of its nodes, one per slice (tpu.nodeSpec[0].nodeId, or multisliceParams' nodeCount names
  // "<nodeIdPrefix>-<index>"); a nodes.delete takes its node's name away until a reset.
  std::vector<std::string> node_names;
  std::int64_t create_ms = 0;      // When it was created.
  std::int64_t next_ms = 0;        // When CREATING, PROVISIONING, SUSPENDING or DELETING ends.
  std::int64_t queued_seq = 0;     // Its place in the queue (strict FIFO per pool).
  std::int64_t valid_until_ms = 0; // The queueingPolicy deadline while waiting, or 0.
  std::int64_t preempt_ms = 0;     // When an ACTIVE spot slice is preempted, or 0.
  std::int64_t maintenance_ms = 0; // When an ACTIVE on-demand slice is stopped for maintenance, or 0.
  bool holds_capacity = false;     // Its chips count in its pool's `used`.
  nlohmann::json failed_error;     // Why it FAILED (a google.rpc Status), or null.
  std::string create_op;           // The create operation's name.
  std::string delete_op;           // The delete operation's name, once deleting.
};

// One TPU node (slice) and its worker hosts.
struct World::Node {
  std::string name;               // projects/P/locations/Z/nodes/ID
  std::string project;            // P.
  std::string zone;               // Z.
  std::string id;                 // ID.
  std::string queued_resource;    // The full name of the queued resource it came from.
  nlohmann::json spec;            // The Node from the request's nodeSpec.
  std::string accelerator;        // The accelerator type ("v4-8").
  Tier tier = Tier::spot;         // How it is provisioned (config.hpp).
  std::string state = "CREATING"; // The API's state name.
  std::string health;             // HEALTHY from READY on; empty before, and cleared when deleting or stopping.
  std::string health_description; // Why the node is unhealthy (admin :setHealth); empty when not said.
  // The maintenance it announces (upcomingMaintenance, its window opening then), or 0: set events.maintenance_notice
  // before its queued resource's maintenance, or at once by the admin :scheduleMaintenance.
  std::int64_t maintenance_window_ms = 0;
  std::int64_t create_ms = 0; // When it was created.
  std::int64_t next_ms = 0;   // When its nodes.delete ends.
  std::string numeric_id;     // The API's numeric id: tells this node from a later one of the same name.
  std::vector<std::pair<std::string, std::string>> endpoints; // internal, external
  std::vector<std::string> machines; // The machine under each worker host, by worker; empty while hosts are down.
  std::string delete_op;             // The nodes.delete operation's name, or empty when none was asked for.
  // A standalone node (nodes.create, no queued resource) holds its own chips and has its own timers:
  std::string generation;          // Its TPU generation ("v4").
  int chips = 0;                   // Chips it takes from its pool.
  bool holds_capacity = false;     // Its chips count in its pool's `used`.
  bool preemptible = false;        // schedulingConfig.preemptible: the spot pool, reported as preemptible.
  std::int64_t preempt_ms = 0;     // When a READY spot or preemptible node is preempted, or 0.
  std::int64_t maintenance_ms = 0; // When a READY on-demand node is terminated for maintenance, or 0.
  std::string create_op;           // nodes.create's operation while it runs.
  std::string transition_op;       // nodes.stop's or nodes.start's operation while it runs.
  int incarnation = 0;             // Starts so far: each start brings fresh worker hosts.
  bool multislice = false;         // One of the slices of a queued resource's multisliceParams (multisliceNode).

  // True for a node of nodes.create, false for one of a queued resource.
  [[nodiscard]] bool standalone() const { return queued_resource.empty(); }
  // Health is reported from READY on only: the node is being deleted or stopped.
  void clear_health() {
    health.clear();
    health_description.clear();
  }
};

// One physical machine of a zone and TPU generation. It carries one worker host at a time and keeps its identity
// and its faults from one slice to the next.
struct World::Machine {
  std::string id;           // blockId/subBlockId/hostId, as Compute Engine's resourceStatus.physicalHost.
  std::string zone;         // Its zone.
  std::string generation;   // The TPU generation it carries ("v4").
  std::int64_t serial = 0;  // Its place among its zone and generation's machines, in the order they were minted.
  bool faulty = false;      // Its hardware is faulty: the workload of a worker host on it yields NaN.
  std::string node;         // The node whose worker host it carries; empty while it is free.
  int worker = 0;           // That worker host's index.
  std::int64_t release = 0; // Its place in the free list: the order of the last release; 0 before any.
};

// One project's Compute Engine settings that the mock keeps: its common instance metadata. A project has a record
// once its metadata was first set; before that it has no items.
struct World::ComputeProject {
  std::string project;                                    // The project id.
  std::vector<std::pair<std::string, std::string>> items; // commonInstanceMetadata.items, key and value, in order.
  std::int64_t version = 0; // Changes so far: the fingerprint is derived from it and the items.
};

// One Compute Engine global operation: a setCommonInstanceMetadata. It is RUNNING until end_ms, DONE after.
struct World::ComputeOperation {
  std::string name;           // operation-<insert ms>-<16 hex digits>
  std::string project;        // The project id.
  std::string operation_type; // compute.projects.setCommonInstanceMetadata
  std::int64_t insert_ms = 0; // When it was asked for.
  std::int64_t end_ms = 0;    // When it is DONE.
};

// One OS Login user (an email): its SSH public keys and the projects where it has a POSIX account.
struct World::OsLoginUser {
  std::string email; // The user, as the API's users/{user} names it.
  // fingerprint (SHA-256 of the key, hex) -> the key as imported and when it expires (microseconds, 0: never).
  std::map<std::string, std::pair<std::string, std::int64_t>> keys;
  std::set<std::string> projects; // The projects it has a POSIX account in (an import with projectId made it).
};

// One long-running operation.
struct World::Operation {
  std::string name;              // projects/P/locations/Z/operations/operation-...
  std::string verb;              // create, delete or reset.
  std::string target;            // The full name of the resource it acts on.
  std::int64_t create_ms = 0;    // When it started.
  std::int64_t end_ms = 0;       // When it finished.
  bool done = false;             // Finished.
  nlohmann::json response;       // The response of a finished operation.
  nlohmann::json error;          // The error of a failed operation, or null.
  bool cancel_requested = false; // operations.cancel was called while it ran.
};

// Defined here, where every source file that runs a changing call sees it.
template <typename Fn> auto World::mutate_at(std::int64_t now, Fn&& fn) {
  const auto lock = lock_at(now);
  auto result = std::forward<Fn>(fn)();
  persist_locked();
  return result;
}

namespace world_internal {

// The @type of a QueuedResource in an operation's response.
constexpr const char* kQueuedResourceType = "type.googleapis.com/google.cloud.tpu.v2.QueuedResource";
// The @type of a Node in an operation's response.
constexpr const char* kNodeType = "type.googleapis.com/google.cloud.tpu.v2.Node";
// The @type of the response of a delete.
constexpr const char* kEmptyType = "type.googleapis.com/google.protobuf.Empty";

// Resource ids as the API accepts them (RFC 1035 labels).
bool valid_id(const std::string& id);

// True when `text` is UTF-8, so that a resource named with it can be sent as JSON.
bool is_utf8(const std::string& text);

// A google.rpc Status for an operation's `error`: {"code": code, "message": message}.
inline nlohmann::json rpc_status(int code, const std::string& message) {
  return {{"code", code}, {"message", message}};
}

// The key of a pool in World::pools_: "zone/generation/tier".
inline std::string pool_key(const std::string& zone, const std::string& generation, Tier tier) {
  return zone + "/" + generation + "/" + std::string(tier_name(tier));
}

// The key of a fleet of machines in World::free_machines_ and machines_minted_: "zone/generation".
inline std::string fleet_key(const std::string& zone, const std::string& generation) {
  return zone + "/" + generation;
}

// How the store's names of machine records begin; resources' names begin with "projects/".
constexpr std::string_view kMachineRecordPrefix = "machines/";

// How the store's names of Compute Engine records begin: "compute/projects/P" and
// "compute/projects/P/global/operations/NAME".
constexpr std::string_view kComputeRecordPrefix = "compute/";

// How the store's names of OS Login records begin: "oslogin/users/EMAIL".
constexpr std::string_view kOsLoginRecordPrefix = "oslogin/users/";

// The store's name for the record of machine `id`.
inline std::string machine_record_name(const std::string& id) {
  return std::string(kMachineRecordPrefix) + id;
}

// The node ids a queued resource's request asks for: tpu.nodeSpec[0].nodeId, or "<nodeIdPrefix>-<index>" for each of
// multisliceParams.nodeCount slices, the prefix being `queued_resource_id` when the request names none. Expects a
// request create_queued_resource accepted.
std::vector<std::string> requested_node_ids(const nlohmann::json& request, const std::string& queued_resource_id);

// A 64-bit FNV-1a hash: stable across runs and machines, unlike std::hash.
std::uint64_t stable_hash(std::string_view text);

// The project's number (12 digits), derived from its id: what Google's service identities and Compute Engine's
// project id and default service account are named after.
std::uint64_t project_number(const std::string& project);

// SHA-256 of `text`, as raw bytes.
std::string sha256(const std::string& text);

// The POSIX username OS Login gives an account (an email): "sa_" and a number for a service account, else the email
// with every character but letters and digits made '_', at most 32 characters.
std::string oslogin_username(const std::string& email);

// The resource called `name` in `items`, rendered; a 404 naming it as `kind` when there is none.
template <typename Map, typename Render>
Reply find_reply(const Map& items, const std::string& name, std::string_view kind, Render render) {
  auto it = items.find(name);
  if (it == items.end()) {
    return error_reply(404, std::string(kind) + " '" + name + "' was not found");
  }
  return {200, render(*it->second)};
}

// The resources in `items` whose names start with `prefix`, in name order.
template <typename Map> auto under_prefix(const Map& items, const std::string& prefix) {
  std::vector<const typename Map::mapped_type::element_type*> out;
  for (const auto& [name, item] : items) {
    if (name.rfind(prefix, 0) == 0) {
      out.push_back(item.get());
    }
  }
  return out;
}

// One page of `count` items; only the items on the page are rendered, so a page costs its size, not the list's.
Reply page(std::size_t count, const std::function<nlohmann::json(std::size_t)>& render, const char* field,
           int page_size, const std::string& token);

// The AcceleratorConfig of an accelerator type: {"type": "V4", "topology": "2x2x4"}.
nlohmann::json accelerator_config(const config::AcceleratorType& accelerator);

// FAILED_PRECONDITION travels as HTTP 400 with its own status name.
Reply failed_precondition(const std::string& message);

} // namespace world_internal

} // namespace jobman::mock
