#include "schema.hpp"

#include "jobman/util/strings.hpp"

#include <map>
#include <regex>
#include <vector>

namespace jobman::config::detail {

namespace {

const std::map<std::string, std::vector<std::string>, std::less<>>& schema() {
  static const std::map<std::string, std::vector<std::string>, std::less<>> table{
      {"",
       {"job", "tpu", "gcsfuse", "ssh", "docker", "conda", "venv", "setup", "command", "recovery", "vars", "sweep",
        "brevo_email", "notify", "remote"}},
      {"job", {"name", "env_type", "loop", "remote_user", "queue", "progress", "loss", "experiment"}},
      {"job.queue", {"enabled", "config", "prefix"}},
      {"tpu",
       {"allocation_mode",
        "accelerator",
        "name",
        "zone",
        "version",
        "pricing",
        "startup_script",
        "tags",
        "metadata",
        "labels",
        "flags",
        "queue_timeout",
        "network",
        "subnetwork",
        "service_account",
        "reservation",
        "preflight",
        "reserved",
        "internal_ips",
        "keep_on_success",
        "idle_release",
        "order",
        "strategy",
        "max_run_duration",
        "slices"}},
      {"gcsfuse", {"bucket_name", "mount_path", "flags", "expected_read_gb"}},
      {"ssh", {"private_key", "identities"}},
      {"ssh.identities[]", {"private_key", "public_key", "config_entry"}},
      {"docker", {"image", "flags", "env_vars", "mount_dirs", "workdir"}},
      {"conda", {"name", "config_file"}},
      {"venv", {"name", "requirements_file", "python"}},
      {"setup", {"script"}},
      {"remote", {"internal_ip"}},
      {"command", {"cmd", "workers"}},
      {"recovery",
       {"max_preemptions", "max_failures", "restart_exit_codes", "poll_interval", "backoff", "max_bad_hardware",
        "bad_hardware", "fallback", "maintenance_lead", "deadline_lead", "max_runs", "stall_timeout",
        "stall_first_line", "loss_spike"}},
      {"recovery.loss_spike", {"factor", "window", "min_steps", "max_rollbacks", "skip_steps"}},
      {"recovery.fallback", {"after_preemptions", "after_waiting"}},
      {"recovery.backoff", {"initial", "max", "multiplier"}},
      {"brevo_email", {"api_key", "sender", "receiver"}},
      {"notify", {"events", "mail_to", "webhooks", "smtp", "brevo_config"}},
      {"notify.smtp", {"url", "from", "to", "username", "password"}},
  };
  return table;
}

} // namespace

bool is_list_index(std::string_view text) {
  return !text.empty() && text.size() < 10 && text.find_first_not_of("0123456789") == std::string_view::npos;
}

std::span<const std::string> known_keys(std::string_view section) {
  const auto& table = schema();
  if (auto it = table.find(section); it != table.end()) {
    return it->second;
  }
  return {};
}

bool has_free_keys(std::string_view section) {
  return section == "vars" || section == "tpu.metadata" || section == "tpu.labels" || section == "sweep";
}

std::string suggestion(std::string_view word, std::span<const std::string> candidates) {
  if (auto close = util::closest_match(word, candidates)) {
    return "did you mean '" + *close + "'?";
  }
  if (candidates.empty()) {
    return {};
  }
  return "expected one of: " + util::join(candidates, ", ");
}

std::optional<KeyPathProblem> check_key_path(std::string_view path) {
  const auto parts = util::split(path, '.');
  if (parts.front() == "sweep") {
    return KeyPathProblem{0, "the sweep section cannot itself be swept", {}};
  }
  std::string section; // Schema name of the mapping (or list) that holds parts[i].
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part.empty()) {
      return KeyPathProblem{i, "empty component in key path", {}};
    }
    if (has_free_keys(section)) {
      section = "free";
      continue;
    }
    if (section == "ssh.identities") {
      if (!is_list_index(part)) {
        return KeyPathProblem{i, "expected a list index", {}};
      }
      section = "ssh.identities[]";
      continue;
    }
    const auto keys = known_keys(section);
    if (keys.empty()) {
      const std::string parent = util::join(std::span(parts).first(i), ".");
      return KeyPathProblem{i, "'" + parent + "' holds a single value, not a mapping", {}};
    }
    bool found = false;
    for (const auto& key : keys) {
      found = found || key == part;
    }
    if (!found) {
      return KeyPathProblem{i, section.empty() ? "unknown section" : "unknown key", suggestion(part, keys)};
    }
    if (!section.empty()) {
      section += '.';
    }
    section += part;
  }
  if (section.empty()) {
    return KeyPathProblem{0, "empty key path", {}};
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, std::string>> zone_problem(const std::string& zone) {
  static const std::regex zone_form("[a-z]+-[a-z]+[0-9]+-[a-z]");
  static const std::regex region_form("[a-z]+-[a-z]+[0-9]+");
  if (std::regex_match(zone, zone_form)) {
    return std::nullopt;
  }
  std::string hint = "a zone is a region plus a letter, e.g. us-central2-b";
  if (std::regex_match(zone, region_form)) {
    hint = "'" + zone + "' is a region; add the zone letter, e.g. " + zone + "-b";
  }
  return std::pair("'" + zone + "' is not a zone", hint);
}

std::string exact_duration(long long seconds) {
  if (seconds <= 0) {
    return "0s";
  }
  std::string out;
  const std::pair<long long, char> units[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
  for (const auto& [size, unit] : units) {
    if (seconds >= size) {
      out += std::to_string(seconds / size) + unit;
      seconds %= size;
    }
  }
  return out;
}

} // namespace jobman::config::detail
