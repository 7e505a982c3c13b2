// Per-user settings: settings.yaml under the config directory, each key overridable by JOBMAN_* variables.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace jobman::config {

// Where jobman keeps its store and logs: $JOBMAN_HOME, else ${XDG_DATA_HOME:-~/.local/share}/jobman.
std::filesystem::path jobman_home();
// Where jobman's settings and prices are read from: ${XDG_CONFIG_HOME:-~/.config}/jobman.
std::filesystem::path jobman_config_dir();

// Which cloud jobman talks to.
enum class CloudKind { mock, google };

// How jobman reaches a slice's worker hosts.
enum class Transport {
  ssh,    // OpenSSH's ssh and scp, straight to each host's address, one shared connection per host.
  gcloud, // `gcloud compute tpus tpu-vm ssh` and `scp`, one gcloud process per command.
};

// One setting's effective value and where it came from.
struct SettingSource {
  std::string key;    // "cloud", "project", ...
  std::string value;  // Effective value as text.
  std::string origin; // "default", "<file>:<line>", or "env JOBMAN_PROJECT".
};

// The effective settings.
struct Settings {
  CloudKind cloud = CloudKind::mock;
  std::string project;                  // Google Cloud project; required for google.
  std::string zone;                     // Default zone when a config gives none.
  std::string gcloud = "gcloud";        // Program run for ssh/scp and access tokens.
  Transport transport = Transport::ssh; // How commands reach the worker hosts.
  long long poll_interval_seconds = 30;
  std::string api_endpoint;    // TPU API base URL; empty means the cloud's default.
  double mock_time_scale = 60; // The bundled mock's --time-scale (and the supervisor's tick divisor there).
  bool autostart = true;       // create/resume/wait/cancel/... start the supervisor (and mock) when none runs.
  // validate and create refuse (exit 2) a config whose bucket is outside its slice's region, as --strict-locality.
  bool strict_locality = false;
  std::string brevo_endpoint = "https://api.brevo.com/v3/smtp/email"; // Where notification mail is sent.
  // Where jobs are stored: a SQLite file (the default, jobman.db in jobman's home) or a PostgreSQL server a lab
  // shares ("postgresql://user@host/db"; the password from ~/.pgpass or PGPASSFILE, not from here).
  std::string store;
  std::vector<SettingSource> sources; // Every key, in a fixed order, for `jobman settings`.
};

// Reads settings.yaml (if present) then JOBMAN_* variables. Throws ConfigError on bad input.
Settings load_settings();

// The store location of `settings`: its `store` setting, or jobman.db in jobman's home.
std::string store_location(const Settings& settings);

// The settings file's path: ${XDG_CONFIG_HOME:-~/.config}/jobman/settings.yaml.
std::string settings_path();

} // namespace jobman::config
