#include "jobman/config/settings.hpp"

#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "schema.hpp"
#include "yaml_tree.hpp"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

namespace jobman::config {

std::filesystem::path jobman_home() {
  if (auto home = util::getenv_nonempty("JOBMAN_HOME")) {
    return util::expand_user(*home);
  }
  if (auto data = util::getenv_nonempty("XDG_DATA_HOME")) {
    return std::filesystem::path(*data) / "jobman";
  }
  return util::home_dir() / ".local" / "share" / "jobman";
}

std::filesystem::path jobman_config_dir() {
  if (auto config = util::getenv_nonempty("XDG_CONFIG_HOME")) {
    return std::filesystem::path(*config) / "jobman";
  }
  return util::home_dir() / ".config" / "jobman";
}

namespace {

using detail::Node;

// 60 -> "60", 2.5 -> "2.5".
std::string format_scale(double scale) {
  std::ostringstream out;
  out << scale;
  return out.str();
}
using detail::Origin;

// The settings keys in the order `jobman settings` lists them, with the variable that overrides each.
struct Key {
  std::string name;
  const char* env;
};

const std::vector<Key>& keys() {
  static const std::vector<Key> table{
      {"cloud", "JOBMAN_CLOUD"},
      {"project", "JOBMAN_PROJECT"},
      {"zone", "JOBMAN_ZONE"},
      {"gcloud", "JOBMAN_GCLOUD"},
      {"transport", "JOBMAN_TRANSPORT"},
      {"poll_interval", "JOBMAN_POLL_INTERVAL"},
      {"api_endpoint", "JOBMAN_API_ENDPOINT"},
      {"mock_time_scale", "JOBMAN_MOCK_TIME_SCALE"},
      {"autostart", "JOBMAN_AUTOSTART"},
      {"strict_locality", "JOBMAN_STRICT_LOCALITY"},
      {"brevo_endpoint", "JOBMAN_BREVO_ENDPOINT"},
      {"store", "JOBMAN_STORE"},
  };
  return table;
}

// One setting as given by the file or the environment.
struct Given {
  std::string text;
  Origin at;          // Where messages about it point.
  std::string origin; // "<file>:<line>" or "env JOBMAN_X".
};

std::map<std::string, Given> read_file_settings(const std::string& path, std::vector<Diagnostic>& errors) {
  std::map<std::string, Given> out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return out;
  }
  const Node root = detail::parse_yaml(util::read_file(path), path, errors);
  if (!errors.empty() || root.is_null()) {
    return out;
  }
  if (!root.is_mapping()) {
    errors.push_back(detail::make_diagnostic(
        root.origin, "", "settings must be a mapping of keys to values, got " + detail::describe_kind(root)));
    return out;
  }
  std::vector<std::string> names;
  for (const auto& key : keys()) {
    names.push_back(key.name);
  }
  for (const auto& entry : root.entries) {
    if (std::find(names.begin(), names.end(), entry.key) == names.end()) {
      errors.push_back(detail::make_diagnostic(entry.key_origin, entry.key, "unknown setting",
                                               detail::suggestion(entry.key, names)));
      continue;
    }
    if (entry.value.is_null()) {
      continue; // "key:" with no value leaves the default.
    }
    if (!entry.value.is_scalar()) {
      errors.push_back(detail::make_diagnostic(entry.value.origin, entry.key,
                                               "expected a single value, got " + detail::describe_kind(entry.value)));
      continue;
    }
    out[entry.key] = Given{entry.value.text, entry.value.origin, path + ":" + std::to_string(entry.key_origin.line)};
  }
  return out;
}

} // namespace

std::string store_location(const Settings& settings) {
  if (!settings.store.empty()) {
    return settings.store;
  }
  return (config::jobman_home() / "jobman.db").string();
}

std::string settings_path() {
  return (config::jobman_config_dir() / "settings.yaml").string();
}

Settings load_settings() {
  Settings settings;
  std::vector<Diagnostic> errors;
  std::map<std::string, Given> given = read_file_settings(settings_path(), errors);
  if (!errors.empty()) {
    throw ConfigError(std::move(errors));
  }
  // The environment wins over the file.
  for (const auto& key : keys()) {
    if (auto value = util::getenv_nonempty(key.env)) {
      given[key.name] = Given{*value, Origin{std::string("env ") + key.env, 0, 0}, std::string("env ") + key.env};
    }
  }
  std::map<std::string, std::string> origins;
  const auto report = [&](const Given& g, const std::string& key, std::string message, std::string hint = {}) {
    // Messages about a variable name the variable; those about the file name the key.
    errors.push_back(detail::make_diagnostic(g.at, g.at.line > 0 ? key : "", std::move(message), std::move(hint)));
  };
  for (const auto& [key, g] : given) {
    origins[key] = g.origin;
    const std::string text(util::trim(g.text));
    if (key == "cloud") {
      if (text == "mock" || text == "google") {
        settings.cloud = text == "google" ? CloudKind::google : CloudKind::mock;
      } else {
        const std::vector<std::string> clouds{"mock", "google"};
        std::string hint;
        if (auto close = util::closest_match(text, clouds)) {
          hint = "did you mean '" + *close + "'?";
        }
        report(g, key, "'" + text + "' is not one of mock, google", hint);
      }
    } else if (key == "project") {
      settings.project = text;
    } else if (key == "zone") {
      if (auto problem = detail::zone_problem(text)) {
        report(g, key, problem->first, problem->second);
      } else {
        settings.zone = text;
      }
    } else if (key == "gcloud") {
      if (text.empty()) {
        report(g, key, "must name a program");
      } else {
        settings.gcloud = text;
      }
    } else if (key == "transport") {
      if (text == "ssh" || text == "gcloud") {
        settings.transport = text == "ssh" ? Transport::ssh : Transport::gcloud;
      } else {
        report(g, key, "'" + text + "' is not one of ssh, gcloud",
               "ssh connects to each host with OpenSSH; gcloud runs gcloud compute tpus tpu-vm ssh");
      }
    } else if (key == "poll_interval") {
      const auto seconds = util::parse_duration_seconds(text);
      if (!seconds || *seconds < 1) {
        report(g, key, "'" + text + "' is not a duration of at least 1s", "write e.g. 30s, 5m, or a number of seconds");
      } else {
        settings.poll_interval_seconds = *seconds;
      }
    } else if (key == "api_endpoint") {
      if (!text.starts_with("http://") && !text.starts_with("https://")) {
        report(g, key, "'" + text + "' is not an http:// or https:// URL");
      } else {
        settings.api_endpoint = text;
      }
    } else if (key == "brevo_endpoint") {
      if (!text.starts_with("http://") && !text.starts_with("https://")) {
        report(g, key, "'" + text + "' is not an http:// or https:// URL");
      } else {
        settings.brevo_endpoint = text;
      }
    } else if (key == "store") {
      if (text.empty()) {
        report(g, key, "must name a SQLite file or a postgresql:// URL");
      } else if (text.find("://") != std::string::npos && !util::is_postgres_url(text)) {
        report(g, key, "'" + util::without_password(text) + "' is neither a file nor a postgresql:// URL",
               "write postgresql://USER@HOST/DATABASE, or a path to a SQLite file");
      } else if (!util::is_postgres_url(text) && !text.starts_with("/") && !text.starts_with("~/")) {
        report(g, key, "'" + text + "' is a relative path",
               "the supervisor runs elsewhere: write an absolute path, ~/..., or a postgresql:// URL");
      } else {
        settings.store = util::is_postgres_url(text) ? text : util::expand_user(text).string();
      }
    } else if (key == "autostart" || key == "strict_locality") {
      bool& flag = key == "autostart" ? settings.autostart : settings.strict_locality;
      if (text == "true" || text == "yes" || text == "on" || text == "1") {
        flag = true;
      } else if (text == "false" || text == "no" || text == "off" || text == "0") {
        flag = false;
      } else {
        report(g, key, "'" + text + "' is not true or false");
      }
    } else if (key == "mock_time_scale") {
      char* end = nullptr;
      const double scale = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size() || !(scale >= 1 && scale <= 1e6)) {
        report(g, key, "'" + text + "' is not a number from 1 to 1000000",
               "1 is real time; 60 makes a minute a second");
      } else {
        settings.mock_time_scale = scale;
      }
    }
  }
  if (!errors.empty()) {
    detail::sort_by_position(errors);
    throw ConfigError(std::move(errors));
  }
  // Without an explicit choice, a project means Google Cloud; otherwise the bundled mock.
  if (!given.contains("cloud")) {
    settings.cloud = settings.project.empty() ? CloudKind::mock : CloudKind::google;
    origins.emplace("cloud", settings.project.empty() ? "default (no project set)" : "default (a project is set)");
  }
  const std::map<std::string, std::string> values{
      {"cloud", settings.cloud == CloudKind::google ? "google" : "mock"},
      {"project", settings.project},
      {"zone", settings.zone},
      {"gcloud", settings.gcloud},
      {"transport", settings.transport == Transport::ssh ? "ssh" : "gcloud"},
      {"poll_interval", detail::exact_duration(settings.poll_interval_seconds)},
      {"api_endpoint", settings.api_endpoint},
      {"mock_time_scale", format_scale(settings.mock_time_scale)},
      {"autostart", settings.autostart ? "true" : "false"},
      {"strict_locality", settings.strict_locality ? "true" : "false"},
      {"brevo_endpoint", settings.brevo_endpoint},
      {"store", util::without_password(store_location(settings))},
  };
  for (const auto& key : keys()) {
    const auto origin = origins.find(key.name);
    settings.sources.push_back(
        SettingSource{key.name, values.at(key.name), origin == origins.end() ? "default" : origin->second});
  }
  return settings;
}

} // namespace jobman::config
