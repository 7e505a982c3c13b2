// What jobman will do for a job: the cloud request it sends and the steps it runs on each worker.
#pragma once

#include "jobman/config/job_config.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace jobman::core {

// The queued resource and node id for a job's attempt: "<tpu.name>-<id>-a<attempt>", a valid
// Cloud resource id (lower-case letters, digits and dashes, at most 63 characters). The requests a first-ready attempt
// races alongside its own are its candidates 2, 3, ...: "<tpu.name>-<id>-a<attempt>c<candidate>".
std::string resource_id(const std::string& tpu_name, std::int64_t job_id, int attempt, int candidate = 1);

// The label naming the job a resource was made for ("000042").
inline constexpr const char* kJobIdLabel = "jobman-job-id";
// The label naming who made it: owner_label_value of the job's user.
inline constexpr const char* kOwnerLabel = "jobman-owner";
// The label naming the attempt it was made for ("1", "2", ...).
inline constexpr const char* kAttemptLabel = "jobman-attempt";
// The label naming the store whose job it was made for (store_label_value), so that a supervisor or `sync` of one
// store never takes another store's slices for orphans.
inline constexpr const char* kStoreLabel = "jobman-store";

// The value of the `jobman-store` label for the store at `location`: twelve hex digits of a digest of which store it
// is, the same from every machine and user of it (a PostgreSQL store's server and database; a SQLite store's
// machine and file).
std::string store_label_value(const std::string& location);

// After a create answered 409 ALREADY_EXISTS: throws cloud::ApiError (400 FAILED_PRECONDITION, a refusal) when the
// resource found under `name` carries another store's `jobman-store` label than `request_labels` (the labels the
// create asked for): two stores' jobs with the same tpu.name and id name their slices alike, and one must never take
// the other's for its own. A resource without the label (made before resources named their store) is taken as before.
// The node labels of a queuedResources.create body (tpu.nodeSpec[0].node.labels); null when it has none.
nlohmann::json request_node_labels(const nlohmann::json& body);

void refuse_another_stores_resource(const std::string& name, const std::map<std::string, std::string>& found_labels,
                                    const nlohmann::json& request_labels);

// The value of the `jobman-owner` label for `user`: a GCP label value (lower-case letters, digits, '_' and '-', at
// most 63 characters).
std::string owner_label_value(const std::string& user);

// Labels jobman puts on every node so a resource can be traced back to its job.
std::map<std::string, std::string> job_labels(const config::JobConfig& config, std::int64_t job_id,
                                              const std::string& user, int attempt);

// The body of queuedResources.create (or nodes.create in tpu-vm mode) for one attempt, with the field names of the TPU
// API version it goes to (cloud::needs_v2alpha1 tells which). Its node is named `node_id` (empty: resource_id of the
// attempt). With tpu.slices N > 1, tpu.nodeSpec[0] has no nodeId but multisliceParams {nodeCount: N, nodeIdPrefix:
// that same name} (multiNodeParams where the body goes to v2alpha1), and the cloud names the nodes NAME-0 ...
// NAME-(N-1).
nlohmann::json create_request_body(const config::JobConfig& config, const std::string& project, std::int64_t job_id,
                                   const std::string& user, int attempt, const std::string& node_id = {});

// Adds `entry` (a line of the `ssh-keys` metadata, "USER:KEY USER") to the metadata of every node a create request
// body asks for (a queued resource's tpu.nodeSpec[].node, or the node itself), after the lines already there and
// only once: the key reaches the hosts with the create request, at no extra call.
void add_ssh_key(nlohmann::json& body, const std::string& entry);

// The private key OpenSSH connects to a job's hosts with: the config's ssh.private_key ("~" expanded) when it names
// one, else default_ssh_identity() (slice_hosts.hpp).
std::filesystem::path ssh_identity(const config::JobConfig& config);

// The account a job's commands run as on its hosts: job.remote_user, else this machine's user (as ssh and gcloud
// choose).
std::string remote_user(const config::JobConfig& config);

// One step jobman runs on worker hosts.
struct SetupStep {
  std::string module;       // "ssh", "gcsfuse", "venv", "conda", "docker", "command".
  std::string summary;      // What it does, for people.
  std::vector<int> workers; // Which hosts it runs on.
};

// The steps, in order: ssh -> gcsfuse -> environment -> command.
std::vector<SetupStep> setup_steps(const config::JobConfig& config);

// The whole plan as JSON: {"api": {"method", "version" ("v2", or "v2alpha1" for what only it has), "url", "body"},
// "setup": [...]}.
nlohmann::json plan_json(const config::JobConfig& config, const std::string& project, const std::string& user);

} // namespace jobman::core
