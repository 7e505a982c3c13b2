// What OpenSSH needs to reach a slice's worker hosts: each host's address and port, from the node, and its host
// key, from the guest attributes its guest agent publishes; kept beside the attempt's logs so that every later
// command (setup, launch, the log stream, `jobman ssh`) connects without asking the API again.
#pragma once

#include "jobman/cloud/tpu_client.hpp"
#include "jobman/config/job_config.hpp"
#include "jobman/remote/gcloud.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace jobman::core {

// Guest attributes of one worker, by "NAMESPACE/KEY" ("hostkeys/ssh-ed25519" -> "ssh-ed25519 BASE64").
using WorkerAttributes = std::map<std::string, std::string>;

// The guest attribute holding a host's ed25519 key, the one every TPU VM's guest agent publishes.
inline constexpr const char* kHostKeyAttribute = "hostkeys/ssh-ed25519";
// The guest attribute the bundled mock's hosts publish when their sshd is not on port 22 (a mock run by a user other
// than root).
inline constexpr const char* kSshPortAttribute = "mock/ssh-port";

// A slice's hosts as OpenSSH reaches them.
struct SliceHosts {
  std::string node_id;                // The node's numeric id (Node.id): its hosts' key aliases start with it.
  std::vector<remote::SshHost> hosts; // By worker index.
  std::vector<std::string> host_keys; // "TYPE BASE64" by worker index; "" where none is published yet.
  std::string user;                   // The account OS Login gives jobman's key on these hosts; "" without OS Login.

  // True when every host has published its key: until then the slice's hosts are still booting.
  [[nodiscard]] bool complete() const;
};

// Whether a job's hosts are reached on their internal addresses: remote.internal_ip, or a node made without external
// ones (tpu.internal_ips).
bool reached_internally(const config::JobConfig& config);

// The hosts of `node` with the guest attributes of its workers (in worker order): the external address of each, or
// its internal one with `internal` (remote.internal_ip) or when it has no external one.
SliceHosts slice_hosts_of(const cloud::Node& node, const std::vector<WorkerAttributes>& attributes, bool internal);

// The nodes of an attempt whose node is `node`: that node for one slice; for a multislice job (`slices` > 1), whose
// request names `node` as its nodes' prefix, NODE-0 ... NODE-(slices-1), as the TPU API names them.
std::vector<std::string> slice_node_ids(const std::string& node, int slices);

// The hosts of a multislice job's nodes, given slice by slice with each node's name, as one target's: worker indices
// run across the slices (slice 0's hosts first), and each host names its node and its worker index there. The node
// id and OS Login account are the first slice's (OS Login names one account for a key in a project).
SliceHosts join_slice_hosts(const std::vector<std::pair<std::string, SliceHosts>>& per_node);

// Keeps `hosts` in the attempt's directory: known_hosts (each key under its host's alias, as OpenSSH's
// UserKnownHostsFile reads it) and hosts.json; each written whole, then renamed into place.
void save_slice_hosts(const std::filesystem::path& attempt_dir, const SliceHosts& hosts);

// The hosts kept in the attempt's directory, or nullopt when none are (or they are unreadable).
std::optional<SliceHosts> load_slice_hosts(const std::filesystem::path& attempt_dir);

// The known_hosts file save_slice_hosts writes in `attempt_dir`.
std::filesystem::path known_hosts_file(const std::filesystem::path& attempt_dir);

// The private key jobman connects with when a config names none: ~/.ssh/google_compute_engine when the user has it
// (gcloud's key, already known to their nodes and projects), else JOBMAN_HOME/ssh/id_ed25519, made with ssh-keygen
// the first time (mode 0600, no passphrase, in a directory of mode 0700). Throws jobman::Error when it cannot be made.
std::filesystem::path default_ssh_identity();

// The public half of `private_key` (its .pub file) as "TYPE BASE64", without its comment. Throws jobman::Error when
// the .pub file cannot be read or holds no key.
std::string ssh_public_key(const std::filesystem::path& private_key);

// The public half of `private_key` as a line of the `ssh-keys` metadata for `user`: "USER:TYPE BASE64 USER", as gcloud
// writes it. Throws jobman::Error as ssh_public_key does.
std::string ssh_keys_entry(const std::filesystem::path& private_key, const std::string& user);

// Whether `metadata` (a node's, or a project's common metadata) holds `entry` as one of its `ssh-keys` lines: one of
// the same user and key, whatever its comment says.
bool has_ssh_keys_entry(const std::map<std::string, std::string>& metadata, const std::string& entry);

// `keys` (an `ssh-keys` value) with `entry` as its last line, unless a line of the same user and key is there already.
std::string with_ssh_keys_entry(std::string keys, const std::string& entry);

// Whether OS Login decides who may log in to a node: the node's `enable-oslogin` metadata when it has one, else the
// project's; true for "TRUE" in any case, as Google's guest agent reads it.
bool os_login_enabled(const std::map<std::string, std::string>& node_metadata,
                      const std::map<std::string, std::string>& project_metadata);

} // namespace jobman::core
