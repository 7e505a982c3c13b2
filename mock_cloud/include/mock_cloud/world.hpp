// The mock cloud's world: zones, capacity, the queue, queued resources, nodes, operations and faults.
#pragma once

#include "mock_cloud/config.hpp"
#include "mock_cloud/list_query.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace jobman::config {
struct TpuGeneration;
} // namespace jobman::config

namespace jobman::mock {

class WorldStore;

// An HTTP status and a JSON body: a resource, an Operation, or a google.rpc Status error.
struct Reply {
  int status = 200;    // HTTP status code.
  nlohmann::json body; // The response body.
  // True for 2xx replies.
  [[nodiscard]] bool ok() const { return status >= 200 && status < 300; }
};

// A google.rpc Status reply: {"error": {"code", "message", "status"}}.
Reply error_reply(int http_status, const std::string& message);

// The canonical status name of an HTTP code ("NOT_FOUND" for 404).
std::string status_name(int http_status);

// Injected API faults for the /v2 API.
struct FaultSettings {
  double rate = 0;        // Probability that a request fails with one of `codes`.
  std::vector<int> codes; // HTTP codes to fail with (chosen uniformly).
  int latency_ms = 0;     // Wall-clock delay added to every /v2 request (not time-scaled: it is network latency).
};

// What the fault injector decided for one request.
struct FaultDecision {
  int latency_ms = 0;  // Delay to add before answering.
  int fail_status = 0; // HTTP code to fail with, or 0 to serve the request.
};

// The physical machine one worker host runs on, as the data plane needs it.
struct HostMachine {
  std::string physical_host; // The machine's id: blockId/subBlockId/hostId, as Compute Engine's physicalHost.
  bool faulty = false;       // The machine's hardware is faulty: the host's workload sees MOCK_TPU_FAULT_FILE.
};

// A fault injected into the steps of the workload on a worker host, through a file the workload consumes step by
// step (docs/MOCK_CLOUD.md, "Injected step faults").
struct StepFault {
  // Which fault.
  enum class Kind {
    loss_spike, // The next `steps` steps have their loss and gradient multiplied by `factor`.
    hang        // The next step blocks until the process is stopped.
  };
  Kind kind = Kind::loss_spike; // Which fault.
  double factor = 1;            // loss_spike: the multiplier.
  std::int64_t steps = 0;       // loss_spike: how many steps.
};

// One key of Google's `ssh-keys` metadata: the account it opens and the key, as an authorized_keys line.
struct SshKey {
  std::string user; // The account: "tester" of "tester:ssh-ed25519 AAAA... tester".
  std::string key;  // The rest of the line: TYPE BASE64 [COMMENT].
  // Equal when both parts are.
  bool operator==(const SshKey&) const = default;
};

// The keys of an `ssh-keys` metadata value: one "USER:KEY" per line, as Google's guest agent reads them. Blank and
// malformed lines are skipped, and so is a key whose `google-ssh {"expireOn": TIME}` comment says it expired by
// `now_ms`.
std::vector<SshKey> parse_ssh_keys(const std::string& value, std::int64_t now_ms);

// One slice whose worker hosts just came up, as the data plane needs it.
struct SliceHosts {
  std::string node_name;             // projects/P/locations/Z/nodes/ID
  std::string numeric_id;            // The node's id: tells this incarnation from a later node of the same name.
  std::vector<HostMachine> machines; // One per worker host (networkEndpoints), by worker index.
  // Each host's addresses, by worker index: networkEndpoints[].ipAddress and accessConfig.externalIp, all in
  // 127.0.0.0/8.
  std::vector<std::pair<std::string, std::string>> addresses;
  std::vector<std::string> hostnames; // Each host's hostname, Google's t1v-n-HASH-w-N, by worker index.
  std::vector<SshKey> ssh_keys; // What the hosts authorize: the node's keys and, unless it blocks them, the project's.

  // The number of worker hosts.
  [[nodiscard]] int hosts() const { return static_cast<int>(machines.size()); }
};

// Told when slices' worker hosts come and go. Called with the world's mutex held: it must be quick and must not
// call into the world.
class SliceListener {
public:
  virtual ~SliceListener() = default;
  // The node became READY: its hosts exist from now on.
  virtual void slice_ready(const SliceHosts& slice) = 0;
  // The node was preempted, terminated, is being deleted or is gone: its hosts and their processes end.
  virtual void slice_lost(const std::string& node_name) = 0;
  // The machine under worker `worker` of the node was marked faulty.
  virtual void slice_faulty(const std::string& node_name, int worker) = 0;
  // The workload of worker `worker` of the node is to meet `fault` in its next steps.
  virtual void slice_step_fault(const std::string& /*node_name*/, int /*worker*/, const StepFault& /*fault*/) {}
  // The keys the node's hosts authorize changed: its metadata or its project's was written.
  virtual void slice_keys(const std::string& /*node_name*/, const std::vector<SshKey>& /*keys*/) {}
  // The guest attributes worker `worker` of the node publishes about its SSH server, by "NAMESPACE/KEY"
  // ("hostkeys/ssh-ed25519" -> "ssh-ed25519 BASE64"), empty until the server is up; nullopt from a data plane
  // without SSH servers, where the world publishes host keys of its own making.
  virtual std::optional<std::map<std::string, std::string>> ssh_attributes(const std::string& /*node_name*/,
                                                                           int /*worker*/) {
    return std::nullopt;
  }
  // Whether a new host may be given `address`: nothing on this machine listens there on the hosts' SSH port.
  virtual bool address_free(const std::string& /*address*/) { return true; }
};

// The state of the emulated TPU API, advanced by `tick(now)`; every method takes the wall-clock time.
// Thread-safe: one mutex guards everything.
class World {
public:
  // A world described by `config`; delays and rates are divided by `time_scale`; `seed` drives every random draw.
  World(MockConfig config, double time_scale, std::uint64_t seed);

  // Keeps the world in the SQLite database `file` from now on (each change commits the rows it touched), restoring
  // it first when the database holds a world. Throws jobman::Error when the database cannot be opened.
  void attach_store(const std::filesystem::path& file, std::int64_t now_ms);

  // Tells `listener` (which must outlive the world, or be replaced by nullptr) about slices from now on, starting
  // with every READY node the world already has.
  void set_listener(SliceListener* listener);
  // Where the addresses of new hosts start in 127.0.0.0/8: a random offset keeps two mocks of the same seed on one
  // machine apart. Call before attach_store; a restored world keeps the offset it had.
  void start_addresses_at(std::uint32_t offset);

  // Advances timers: creation, provisioning, preemption, maintenance, suspension, deletion, queue admission.
  void tick(std::int64_t now_ms);

  // locations.list: the zones of the world config, by name.
  Reply list_locations(const std::string& project, const ListQuery& query);
  // locations.get.
  Reply get_location(const std::string& project, const std::string& zone);
  // acceleratorTypes.list: every size of every generation the zone has a pool for, in catalog order.
  Reply list_accelerator_types(const std::string& project, const std::string& zone, const ListQuery& query);
  // acceleratorTypes.get; `id` is a type such as "v4-8".
  Reply get_accelerator_type(const std::string& project, const std::string& zone, const std::string& id);
  // runtimeVersions.list: the runtime versions of the zone's generations, by name.
  Reply list_runtime_versions(const std::string& project, const std::string& zone, const ListQuery& query);
  // runtimeVersions.get.
  Reply get_runtime_version(const std::string& project, const std::string& zone, const std::string& id);
  // reservations.list (v2alpha1): the zone's reservations (its `reserved` pools), their chips and how many are held.
  Reply list_reservations(const std::string& project, const std::string& zone, const ListQuery& query);
  // locations.generateServiceIdentity: the project's Cloud TPU service agent, the same on every call.
  Reply generate_service_identity(const std::string& project, const std::string& zone);

  // queuedResources.create: `body` is a QueuedResource; returns an Operation or an error.
  Reply create_queued_resource(const std::string& project, const std::string& zone, const std::string& id,
                               const std::string& request_id, const nlohmann::json& body, std::int64_t now_ms);
  // queuedResources.get.
  Reply get_queued_resource(const std::string& project, const std::string& zone, const std::string& id,
                            std::int64_t now_ms);
  // queuedResources.list, ordered by name; `page_token` is opaque.
  Reply list_queued_resources(const std::string& project, const std::string& zone, int page_size,
                              const std::string& page_token, std::int64_t now_ms);
  // queuedResources.delete; ACTIVE or PROVISIONING needs `force`.
  Reply delete_queued_resource(const std::string& project, const std::string& zone, const std::string& id, bool force,
                               const std::string& request_id, std::int64_t now_ms);
  // queuedResources.reset: SUSPENDED or FAILED back to WAITING_FOR_RESOURCES.
  Reply reset_queued_resource(const std::string& project, const std::string& zone, const std::string& id,
                              std::int64_t now_ms);
  // nodes.get.
  Reply get_node(const std::string& project, const std::string& zone, const std::string& id, std::int64_t now_ms);
  // nodes.list, ordered by name.
  Reply list_nodes(const std::string& project, const std::string& zone, int page_size, const std::string& page_token,
                   std::int64_t now_ms);
  // nodes.delete.
  Reply delete_node(const std::string& project, const std::string& zone, const std::string& id, std::int64_t now_ms);
  // nodes.create: a standalone node (`body` is a Node); returns an Operation that ends with the Node once READY, or
  // with RESOURCE_EXHAUSTED (and no node) when its pool had no free chips.
  Reply create_node(const std::string& project, const std::string& zone, const std::string& id,
                    const nlohmann::json& body, std::int64_t now_ms);
  // nodes.stop: a READY standalone node to STOPPING, then STOPPED (its hosts end, its chips are freed).
  Reply stop_node(const std::string& project, const std::string& zone, const std::string& id, std::int64_t now_ms);
  // nodes.start: a STOPPED standalone node to STARTING, then READY with fresh worker hosts.
  Reply start_node(const std::string& project, const std::string& zone, const std::string& id, std::int64_t now_ms);
  // nodes.patch: sets the fields `update_mask` names (comma-separated) from `body`; an Operation ending with the Node.
  Reply patch_node(const std::string& project, const std::string& zone, const std::string& id,
                   const std::string& update_mask, const nlohmann::json& body, std::int64_t now_ms);
  // nodes.getGuestAttributes: `body` is a GetGuestAttributesRequest; the READY node's per-worker attributes.
  Reply get_guest_attributes(const std::string& project, const std::string& zone, const std::string& id,
                             const nlohmann::json& body, std::int64_t now_ms);
  // operations.cancel: a running create or start ends CANCELLED and is undone; others are marked cancelRequested.
  Reply cancel_operation(const std::string& project, const std::string& zone, const std::string& id,
                         std::int64_t now_ms);
  // operations.delete: forgets the operation record (what it does goes on).
  Reply delete_operation(const std::string& project, const std::string& zone, const std::string& id,
                         std::int64_t now_ms);
  // operations.get; `id` is "operation-...".
  Reply get_operation(const std::string& project, const std::string& zone, const std::string& id, std::int64_t now_ms);
  // operations.list, oldest first.
  Reply list_operations(const std::string& project, const std::string& zone, int page_size,
                        const std::string& page_token, std::int64_t now_ms);

  // Compute Engine's zones.get: a zone of the world config, UP, in its region (gcloud on a VM checks the zone it
  // is told to use so).
  Reply get_compute_zone(const std::string& project, const std::string& zone);
  // Compute Engine's projects.get: the project with its commonInstanceMetadata ({fingerprint, items, kind}), what
  // gcloud reads before it connects to a TPU VM.
  Reply get_compute_project(const std::string& project, std::int64_t now_ms);
  // Compute Engine's projects.setCommonInstanceMetadata: `body` is a Metadata whose fingerprint must be the current
  // one (else 412 conditionNotMet, as at Google); replaces the items at once and returns a compute Operation that
  // is RUNNING until the change has propagated.
  Reply set_common_instance_metadata(const std::string& project, const nlohmann::json& body, std::int64_t now_ms);
  // Compute Engine's globalOperations.get: a compute Operation, RUNNING or DONE.
  Reply get_compute_operation(const std::string& project, const std::string& operation, std::int64_t now_ms);
  // When the compute operation is DONE (wall milliseconds), or nullopt when there is no such operation: what
  // globalOperations.wait waits for.
  std::optional<std::int64_t> compute_operation_end_ms(const std::string& project, const std::string& operation);
  // The project's common instance metadata (projects.setCommonInstanceMetadata's items): key -> value.
  std::map<std::string, std::string> common_metadata(const std::string& project);
  // OS Login's users.getLoginProfile: the user's (an email) POSIX accounts, of `project_id` only when it is not empty,
  // and SSH public keys that have not expired.
  Reply get_login_profile(const std::string& user, const std::string& project_id, std::int64_t now_ms);
  // OS Login's users.importSshPublicKey: adds `key` (an SshPublicKey: key, expirationTimeUsec) to the user's keys and
  // gives the user a POSIX account in `project_id` (when not empty); returns {"loginProfile"}.
  Reply import_ssh_public_key(const std::string& user, const std::string& project_id, const nlohmann::json& key,
                              std::int64_t now_ms);

  // Admin: preempts an ACTIVE slice now (node PREEMPTED, queued resource SUSPENDING).
  Reply preempt_node(const std::string& project, const std::string& zone, const std::string& id, std::int64_t now_ms);
  // Admin: marks the machines under a READY node's worker hosts faulty, every worker's or only `worker`'s (their
  // workload's loss turns NaN); health stays HEALTHY. A worker out of range is INVALID_ARGUMENT.
  Reply mark_node_faulty(const std::string& project, const std::string& zone, const std::string& id,
                         std::int64_t now_ms, std::optional<std::int64_t> worker = std::nullopt);
  // Admin: injects `fault` into the steps of the workload on a READY node's worker hosts, every worker's or only
  // `worker`'s (a loss spike of factor 1 < F <= 1e6 over 1 to 1e6 steps, or a hang). A bad factor or step count or a
  // worker out of range is INVALID_ARGUMENT; answers {"node", "workers": [W...]} and the fault.
  Reply inject_step_fault(const std::string& project, const std::string& zone, const std::string& id,
                          const StepFault& fault, std::int64_t now_ms,
                          std::optional<std::int64_t> worker = std::nullopt);
  // True when the node exists and one of its worker hosts is on a faulty machine.
  bool node_faulty(const std::string& project, const std::string& zone, const std::string& id);
  // Admin: the chance that a newly minted machine is faulty, in [0, 1] (else INVALID_ARGUMENT).
  Reply set_faulty_fraction(double fraction, std::int64_t now_ms);
  // Admin: sets a READY node's health (a Node.health name other than HEALTH_UNSPECIFIED, else INVALID_ARGUMENT) and
  // healthDescription (cleared when empty); returns the Node.
  // Admin: the node announces a maintenance (Node.upcomingMaintenance, SCHEDULED and PENDING) whose window opens
  // `in_seconds` (simulated) from now, when its slice is stopped as by a maintenance event (TERMINATED).
  Reply schedule_maintenance(const std::string& project, const std::string& zone, const std::string& id,
                             double in_seconds, std::int64_t now_ms);
  Reply set_node_health(const std::string& project, const std::string& zone, const std::string& id,
                        const std::string& health, const std::string& description, std::int64_t now_ms);
  // Admin: replaces the fault settings; a rate of 0 clears them.
  void set_faults(const FaultSettings& faults);
  // Draws the fault decision for one /v2 request from the seeded generator.
  FaultDecision decide_fault();
  // Admin: sets a zone's chips (and optionally quota) for a generation and tier; waiting resources may start.
  Reply set_capacity(const std::string& zone, const std::string& generation, Tier tier, int chips,
                     std::optional<int> quota, std::int64_t now_ms);
  // Counts one API request by method name and HTTP status, for metrics.
  void count_request(const std::string& method, int status);
  // Admin: request counts, slices per state, faulty machines and the nodes on them, capacity in use,
  // processes_running.
  nlohmann::json metrics(std::int64_t now_ms);
  // The queued resources and nodes that hold (or are on their way to holding, or releasing) chips or worker hosts:
  // all but SUSPENDED and FAILED queued resources and STOPPED, PREEMPTED and TERMINATED nodes.
  int live_slices(std::int64_t now_ms);

  // A JSON snapshot of everything that must survive a restart.
  nlohmann::json snapshot();
  // Replaces the state with a snapshot.
  void restore(const nlohmann::json& snapshot);

private:
  struct QueuedResource; // One queued resource and its timers.
  struct Node;           // One TPU node (slice) and its worker hosts.
  struct Operation;      // One long-running operation.
  struct Pool;           // Chips, quota and use of one zone, generation and tier.
  struct Machine;        // One physical machine, which carries one worker host at a time.

  // One project's Compute Engine settings: its common instance metadata.
  struct ComputeProject;
  // One Compute Engine global operation (setCommonInstanceMetadata).
  struct ComputeOperation;
  // One OS Login user: SSH public keys and the projects it has a POSIX account in.
  struct OsLoginUser;

  // Takes the mutex and replays the timers up to `now`: how every call that sees the time begins.
  [[nodiscard]] std::unique_lock<std::mutex> lock_at(std::int64_t now);
  // lock_at(now), then commits what the replay changed: how every call that only reads begins.
  [[nodiscard]] std::unique_lock<std::mutex> settle_at(std::int64_t now);
  // Runs `fn` under lock_at(now) and returns what it returns once what changed is committed; when `fn` throws,
  // nothing is committed. Defined in src/world_internal.hpp.
  template <typename Fn> auto mutate_at(std::int64_t now, Fn&& fn);
  // Replays every timed event up to `now`, each at its own time; returns at once when nothing is due.
  void tick_locked(std::int64_t now);
  // When an ACTIVE queued resource's node announces its coming maintenance (events.maintenance_notice before it);
  // nullopt when it has none coming, no notice is configured, or it was announced already.
  [[nodiscard]] std::optional<std::int64_t> announce_ms_locked(const QueuedResource& qr) const;
  // Tells the listener a node is READY.
  void announce_ready_locked(const Node& node);
  // The node becomes READY and HEALTHY: each worker host is placed on a machine and the listener is told.
  void node_ready_locked(Node& node);
  // The node's worker hosts are gone: their machines go back to the free list and the listener is told. Repeats
  // only tell the listener again.
  void hosts_lost_locked(Node& node);
  // A machine of the zone and generation for a worker host: a newly minted one while the fleet is smaller than
  // fleet_size_locked, else the free one released longest ago.
  Machine& take_machine_locked(const std::string& zone, const std::string& generation);
  // How many machines the zone's pools of the generation (both tiers) need at most: their chips over a host's.
  [[nodiscard]] int fleet_size_locked(const std::string& zone, const std::string& generation) const;
  // Records a change to the world's scalars: the store is stale and the next tick must step (admission may succeed).
  void touch_locked();
  // Records a change to the resource called `name` (created, changed or removed), as touch_locked() does.
  void touch_locked(const std::string& name);
  // The operation an earlier request with this key started, or nullptr (always for an empty key).
  const Operation* operation_for_request(const std::string& key) const;
  // 429 when `chips` more in `pool` would exceed the project's quota there; 200 otherwise.
  Reply check_quota(const std::string& project, const Pool& pool, int chips) const;
  // Records a requestId's operation (key: verb, resource name and requestId), to be persisted with the next commit.
  void remember_request_id(const std::string& key, const std::string& operation);
  // Applies the events due at `now`, then admits waiting resources.
  void step_locked(std::int64_t now);
  // The earliest pending timed event, or INT64_MAX.
  std::int64_t next_event_locked() const;
  // Moves waiting resources to PROVISIONING, strictly FIFO per zone, generation and tier.
  void admit_locked(std::int64_t now);
  // Commits what changed since the last commit to the store, if there is one.
  void persist_locked();
  // The snapshot, with the mutex held.
  nlohmann::json snapshot_locked() const;
  // The scalar state: sequence numbers, the generator, the pools' chips and quota.
  nlohmann::json globals_locked() const;
  // A queued resource as stored (every field, including timers).
  static nlohmann::json record_of(const QueuedResource& qr);
  // A node as stored.
  static nlohmann::json record_of(const Node& node);
  // An operation as stored.
  static nlohmann::json record_of(const Operation& op);
  // A machine as stored.
  static nlohmann::json record_of(const Machine& machine);
  // A project's Compute Engine settings as stored.
  static nlohmann::json record_of(const ComputeProject& project);
  // A compute operation as stored.
  static nlohmann::json record_of(const ComputeOperation& op);
  // The project's common instance metadata changed (a setCommonInstanceMetadata, or a restore), or OS Login's keys for
  // it did: called after every change, with the mutex held.
  void common_metadata_changed_locked(const std::string& project);
  // The Compute Engine settings of `project`, or nullptr while nothing was set.
  const ComputeProject* compute_project_locked(const std::string& project) const;
  // The compute Project as the API returns it.
  nlohmann::json compute_project_json(const std::string& project) const;
  // The compute Operation as the API returns it, RUNNING or DONE at `now`.
  static nlohmann::json compute_operation_json(const ComputeOperation& op, std::int64_t now);
  // An OS Login user as stored.
  static nlohmann::json record_of(const OsLoginUser& user);
  // The user's LoginProfile as OS Login returns it at `now`: POSIX accounts (of `project_id` only, when not empty)
  // and the keys that have not expired.
  static nlohmann::json login_profile_json(const OsLoginUser& user, const std::string& project_id, std::int64_t now);
  // Simulated seconds as wall milliseconds (divided by the time scale).
  double scaled_ms(double seconds) const;
  // One draw of a delay, in wall milliseconds.
  double draw_delay_ms(const DelayDistribution& delay);
  // One exponential draw with the given mean, in wall milliseconds; 0 when the mean is 0.
  std::int64_t draw_exponential_ms(double mean_seconds);
  // The pool of a zone, generation and tier, or nullptr.
  Pool* pool_for(const std::string& zone, const std::string& generation, Tier tier);
  // The pool whose chips a slice of that tier takes: the spot pool for best_effort, else pool_for's.
  Pool* chips_pool_for(const std::string& zone, const std::string& generation, Tier tier);
  // The zone's position in the config (its internal subnet), 255 when unknown.
  int zone_index(const std::string& zone) const;
  // Records a pending operation and returns its full name.
  std::string new_operation(const std::string& project, const std::string& zone, const std::string& verb,
                            const std::string& target, std::int64_t now);
  // Marks an operation done with `response` (or its "error" member).
  void finish_operation(const std::string& name, std::int64_t now, nlohmann::json response);
  // Returns a resource's chips to its pool.
  void release_capacity(QueuedResource& qr);
  // Preempts best-effort slices on `pool`'s chips, newest first, until the spot request `waiting` would fit once
  // they are SUSPENDED; none when it would not fit even without all of them.
  void preempt_best_effort_locked(const QueuedResource& waiting, const Pool& pool, std::int64_t now);
  // Returns a standalone node's chips to its pool.
  void release_capacity(Node& node);
  // The node called `name`, or nullptr with `missing` set to its 404.
  Node* find_node_locked(const std::string& name, Reply* missing);
  // For an admin call on the hosts of a READY node: the node called `name` and the workers `worker` selects (all when
  // absent) in `workers`; nullptr with `error` set to its 404, INVALID_ARGUMENT for a worker out of range, or
  // FAILED_PRECONDITION when its hosts are not up.
  Node* hosts_of_locked(const std::string& name, std::optional<std::int64_t> worker, std::vector<int>& workers,
                        Reply& error);
  // Gives a new node its numeric id and one internal and one external address per worker host, both in
  // 127.0.0.0/8 and free on this machine (SliceListener::address_free).
  void place_hosts_locked(Node& node, int hosts);
  // The keys the node's hosts authorize: its metadata's `ssh-keys` (and the older `sshKeys`), then the project's
  // common metadata's unless the node's block-project-ssh-keys is true; with OS Login on (the node's enable-oslogin,
  // else the project's), the keys OS Login holds for the project instead, each for its account's POSIX user.
  std::vector<SshKey> ssh_keys_locked(const Node& node, std::int64_t now) const;
  // A standalone node becomes READY and HEALTHY (hosts announced, preemption or maintenance drawn); ends `op`.
  void standalone_ready_locked(Node& node, std::string& op, std::int64_t now);
  // A standalone node is taken back (PREEMPTED or TERMINATED): its hosts end and its chips are freed.
  void take_back_locked(Node& node, const std::string& state);
  // Advances the standalone nodes' timers due at `now`.
  void step_standalone_locked(std::int64_t now);
  // The earliest timer of the standalone nodes, or INT64_MAX.
  std::int64_t next_standalone_event_locked() const;
  // The queued resource's nodes that exist, one per slice, in slice order.
  std::vector<Node*> nodes_of_locked(const QueuedResource& qr);
  // Starts SUSPENDING with its nodes (all its slices together) in `node_state` (PREEMPTED or TERMINATED).
  void start_suspending(QueuedResource& qr, const std::string& node_state, std::int64_t now);
  // The QueuedResource as the API returns it.
  nlohmann::json queued_resource_json(const QueuedResource& qr) const;
  // The Node as the API returns it.
  nlohmann::json node_json(const Node& node) const;
  // The Operation as the API returns it.
  nlohmann::json operation_json(const Operation& op) const;
  // "projects/P/locations/Z".
  std::string location(const std::string& project, const std::string& zone) const;
  // 404 unless the zone is configured.
  Reply check_location(const std::string& zone) const;
  // The generations the zone has a pool for (of either tier), in catalog order.
  std::vector<const config::TpuGeneration*> generations_in_locked(const std::string& zone) const;
  // A Location.
  nlohmann::json location_json(const std::string& project, const std::string& zone) const;
  // Every AcceleratorType of the zone.
  std::vector<nlohmann::json> accelerator_types_locked(const std::string& project, const std::string& zone) const;
  // Every RuntimeVersion of the zone, by name.
  std::vector<nlohmann::json> runtime_versions_locked(const std::string& project, const std::string& zone) const;

  std::mutex mutex_;                                                          // Guards everything below.
  MockConfig config_;                                                         // The world description.
  double time_scale_;                                                         // Divides every delay.
  std::mt19937_64 rng_;                                                       // Every random draw.
  FaultSettings faults_;                                                      // Injected API faults.
  std::map<std::string, std::unique_ptr<QueuedResource>> queued_resources_;   // Key: full resource name.
  std::map<std::string, std::unique_ptr<Node>> nodes_;                        // Key: full resource name.
  std::map<std::string, std::unique_ptr<Operation>> operations_;              // Key: full resource name.
  std::map<std::string, std::string> request_ids_;                            // location + requestId -> operation.
  std::map<std::string, std::unique_ptr<Pool>> pools_;                        // zone/generation/tier -> pool.
  std::map<std::string, std::unique_ptr<Machine>> machines_;                  // Key: the machine's id.
  std::map<std::string, std::map<std::int64_t, std::string>> free_machines_;  // zone/generation -> release -> id.
  std::map<std::string, std::int64_t> machines_minted_;                       // zone/generation -> machines made.
  std::map<std::string, std::map<std::string, std::int64_t>> request_counts_; // method -> status -> count.
  std::int64_t queued_resources_created_ = 0; // Created since start, not counting replays of a requestId.
  std::int64_t next_sequence_ = 1;            // Queue order and operation suffixes.
  std::uint32_t next_host_ = 0;               // The next host's number: its addresses follow from it.
  std::uint32_t address_offset_ = 0;          // This world's start in 127.0.0.0/8, drawn apart from the seed.
  std::int64_t next_release_ = 1;             // The free list's order: each released machine takes the next number.
  double faulty_fraction_ = 0;                // The chance that a newly minted machine is faulty.
  std::unique_ptr<WorldStore> store_;         // Where changes are committed, or null.
  std::set<std::string> changed_;             // Resources changed since the last commit.
  std::vector<std::pair<std::string, std::string>> new_request_ids_; // requestIds not committed yet.
  bool dirty_ = false;                                               // Something changed since the last commit.
  std::int64_t due_ms_ = 0;           // No tick before this time can change anything; 0 after any change.
  SliceListener* listener_ = nullptr; // The data plane, or null.
  // Projects' Compute Engine settings; key: the record name ("compute/projects/P").
  std::map<std::string, std::unique_ptr<ComputeProject>> compute_projects_;
  // Compute operations; key: the record name ("compute/projects/P/global/operations/NAME").
  std::map<std::string, std::unique_ptr<ComputeOperation>> compute_operations_;
  // OS Login's users; key: the record name ("oslogin/users/EMAIL").
  std::map<std::string, std::unique_ptr<OsLoginUser>> oslogin_users_;

public:
  // Frees the world.
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;
};

} // namespace jobman::mock
