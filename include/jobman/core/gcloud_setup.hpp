// What Google's gcloud needs to reach a mock cloud and the worker hosts of a slice: a configuration directory of its
// own, logged in with the mock's service-account key, and the hosts' keys in gcloud's known-hosts file so that it
// checks them from the first connection.
#pragma once

#include "jobman/core/slice_hosts.hpp"

#include <filesystem>
#include <map>
#include <string>

namespace jobman::core {

// The variables that point gcloud at the mock at `url` ("http://127.0.0.1:PORT"): the configuration directory
// `config_dir`, the project, the mock's TPU, Compute and OS Login endpoints and its token endpoint (whatever port the
// key it was logged in with names), and no prompts, update checks, usage reports or GCE metadata probe.
std::map<std::string, std::string> mock_gcloud_environment(const std::string& url, const std::string& project,
                                                           const std::filesystem::path& config_dir);

// Logs gcloud in with the service-account key `key_file` in its configuration directory `config_dir` (the
// environment's CLOUDSDK_CONFIG): runs `gcloud auth activate-service-account --key-file KEY` with `environment` only
// when that directory has not activated this key yet (the key's private_key_id is recorded there once gcloud
// succeeded), under a lock, so that concurrent callers activate it once. Only the key's path is ever on a command
// line. Throws jobman::Error, with what gcloud said, when the key cannot be read or gcloud fails.
void activate_service_account(const std::string& gcloud, const std::map<std::string, std::string>& environment,
                              const std::filesystem::path& config_dir, const std::filesystem::path& key_file);

// The alias gcloud files worker `worker`'s host key under: "tpu.NODE_ID-WORKER-SUFFIX", SUFFIX being the last six
// characters of the key its guest attribute publishes (`host_key`).
std::string gcloud_host_key_alias(const std::string& node_id, int worker, const std::string& host_key);

// gcloud's known-hosts file in `home`: home/.ssh/google_compute_known_hosts.
std::filesystem::path gcloud_known_hosts_file(const std::filesystem::path& home);

// Adds the key of each host of `hosts` to gcloud's known-hosts file in `home` under gcloud's alias, unless it is
// there already (under a lock on the file, so that concurrent callers add each line once). True when the slice's
// hosts have all published their keys and all of them are in the file: gcloud can then check them strictly
// (--strict-host-key-checking=yes). Throws jobman::Error when the file cannot be written.
bool add_gcloud_known_hosts(const SliceHosts& hosts, const std::filesystem::path& home);

} // namespace jobman::core
