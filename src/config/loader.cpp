// The config loader's entry points: reads the document, applies --set and the sweep, and builds and checks one
// config per sweep member. The steps live in the loader_*.cpp files beside this one (loader_parts.hpp).
#include "jobman/config/loader.hpp"

#include "interpolation.hpp"
#include "jobman/util/system.hpp"
#include "loader_parts.hpp"
#include "schema.hpp"
#include "yaml_tree.hpp"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

namespace jobman::config {

namespace {

using detail::BuildContext;
using detail::Entry;
using detail::Node;
using detail::Origin;
using detail::Problems;
using detail::Purpose;
using detail::SweepAxis;

constexpr std::size_t max_sweep_members = 1000;

[[noreturn]] void fail(std::vector<Diagnostic> errors) {
  detail::sort_by_position(errors);
  throw ConfigError(std::move(errors));
}

// The Python jobman reads a key only where it uses it, and resolves a ${...} only then, so a problem in a key it
// never reads does not stop it: brevo_email, a section it does not know, an environment section env_type does not
// name, and the node's tags, metadata and startup script (jobman sends them; the Python jobman leaves them out).
// Problems there become warnings, and the value is left out of the job. Jobman's own limit on what resolving
// references may cost stays an error wherever it trips.
void unread_errors_to_warnings(const Node& root, JobConfig& config, Problems& p) {
  std::string env_type = "none";
  if (const Entry* job = root.find("job"); job != nullptr && job->value.is_mapping()) {
    if (const Entry* env = job->value.find("env_type"); env != nullptr && env->value.is_scalar()) {
      env_type = env->value.text;
    }
  }
  const auto sections = detail::known_keys("");
  // Whether `key_path` is `key` or inside it.
  const auto under = [](const std::string& key_path, std::string_view key) {
    return key_path.starts_with(key) &&
           (key_path.size() == key.size() || key_path[key.size()] == '.' || key_path[key.size()] == '[');
  };
  // The node's values that the Python jobman never sends, and how each is left out.
  const std::pair<std::string_view, std::function<void()>> node_values[] = {
      {"tpu.tags", [&] { config.tpu.tags.clear(); }},
      {"tpu.metadata", [&] { config.tpu.metadata.clear(); }},
      {"tpu.startup_script", [&] { config.tpu.startup_script.reset(); }},
  };
  std::vector<Diagnostic> kept;
  for (auto& error : p.errors) {
    const auto& path = error.where.key_path;
    const std::string top = path.substr(0, path.find_first_of(".["));
    std::string left_out;
    // An unknown section that stands for a missing required one (`tpuu:`) is that section's error: it stays one.
    const bool misspelled_required = path == top && error.message == "unknown section";
    if (error.message.starts_with("resolving references would make") || path.empty() || misspelled_required) {
      left_out.clear();
    } else if (top == "brevo_email" || std::find(sections.begin(), sections.end(), top) == sections.end() ||
               ((top == "docker" || top == "conda" || top == "venv") && top != env_type)) {
      left_out = "not used, so not needed";
    } else {
      for (const auto& [key, leave_out] : node_values) {
        if (under(path, key)) {
          leave_out();
          left_out = std::string(key) + " is left out of the node";
        }
      }
    }
    if (left_out.empty()) {
      kept.push_back(std::move(error));
    } else {
      p.warnings.push_back(ConfigWarning{error.where, error.message + " (" + left_out + ")"});
    }
  }
  p.errors = std::move(kept);
}

using ordered_json = nlohmann::ordered_json;

// The keys whose values reach the workers or the node as written, where a call to ${oc.env:...} stays a call in the
// snapshot: they are where secrets go (a token exported in the command, a key in a container's environment).
// (expand_environment puts the values into the same keys.)
bool passes_through(const std::vector<std::string>& path) {
  if (path.size() < 2) {
    return false;
  }
  return (path[0] == "command" && path[1] == "cmd") || path[0] == "vars" ||
         (path[0] == "docker" && (path[1] == "env_vars" || path[1] == "flags")) ||
         (path[0] == "tpu" && (path[1] == "metadata" || path[1] == "startup_script")) ||
         (path[0] == "setup" && path[1] == "script") || (path[0] == "notify" && path[1] == "webhooks") ||
         (path[0] == "notify" && path[1] == "smtp" && path.size() > 2 &&
          (path[2] == "password" || path[2] == "username"));
}

// Calls `visit` with every string in `doc` and its path of keys and indices.
void each_string(ordered_json& doc, std::vector<std::string>& path,
                 const std::function<void(ordered_json&, const std::vector<std::string>&)>& visit) {
  if (doc.is_string()) {
    visit(doc, path);
  } else if (doc.is_object()) {
    for (auto& [key, value] : doc.items()) {
      path.push_back(key);
      each_string(value, path, visit);
      path.pop_back();
    }
  } else if (doc.is_array()) {
    for (std::size_t i = 0; i < doc.size(); ++i) {
      path.push_back(std::to_string(i));
      each_string(doc[i], path, visit);
      path.pop_back();
    }
  }
}

// A recorded config's snapshot: its markers become the calls they stand for again.
void restore_calls(ordered_json& snapshot, const std::vector<std::string>& calls) {
  std::vector<std::string> path;
  each_string(snapshot, path, [&](ordered_json& value, const std::vector<std::string>&) {
    value = detail::replace_environment_markers(value.get<std::string>(),
                                                [&](std::size_t i) { return i < calls.size() ? calls[i] : ""; });
  });
}

// Resolves the document once more with each ${oc.env:...} call marked, and puts the calls, not their values, into
// the snapshot's keys that pass through. Returns the values those calls read (`read` holds every variable read).
std::map<std::string, std::string> keep_calls(ordered_json& snapshot, Node as_written, const BuildContext& ctx,
                                              detail::ReferenceDefaults defaults,
                                              const std::map<std::string, std::string>& read,
                                              const std::optional<std::string>& api_key) {
  std::vector<std::string> calls;
  defaults.environment = detail::EnvironmentCalls::mark;
  defaults.marked = &calls;
  defaults.read = nullptr;
  Problems ignored; // The first pass reported everything.
  detail::resolve_references(as_written, defaults, ignored.errors);
  const JobConfig marked = detail::build_config(ignored, as_written, ctx);
  auto with_markers = detail::document(marked, Purpose::snapshot, api_key);
  std::map<std::string, std::string> kept;
  std::vector<std::string> path;
  each_string(with_markers, path, [&](ordered_json& value, const std::vector<std::string>& at) {
    if (!passes_through(at) || !detail::has_environment_marker(value.get<std::string>())) {
      return;
    }
    ordered_json::json_pointer pointer;
    for (const auto& part : at) {
      pointer /= part;
    }
    if (!snapshot.contains(pointer) || !snapshot[pointer].is_string()) {
      return; // The snapshot has no such value: nothing to keep out of it.
    }
    snapshot[pointer] = detail::replace_environment_markers(value.get<std::string>(), [&](std::size_t i) {
      if (i >= calls.size()) {
        return std::string();
      }
      if (auto it = read.find(detail::environment_variable(calls[i])); it != read.end()) {
        kept.insert(*it);
      }
      return calls[i];
    });
  });
  return kept;
}

std::vector<JobConfig> parse_configs(const std::string& text, const std::string& display_name,
                                     const std::filesystem::path& base_dir, const LoadOptions& options) {
  Problems base;
  // Every value ends up in JSON (the store, --json), which holds UTF-8 only.
  for (const auto& [file, args] :
       {std::pair{"--set", &options.set_overrides}, std::pair{"--sweep", &options.sweep_args}}) {
    for (std::size_t i = 0; i < args->size(); ++i) {
      if (detail::invalid_utf8_offset((*args)[i]) != std::string_view::npos) {
        base.error(Origin{file, 0, 0}, "",
                   "the " + std::string(file) + " argument number " + std::to_string(i + 1) + " is not UTF-8 text");
      }
    }
  }
  if (!base.errors.empty()) {
    fail(base.errors);
  }
  Node root = detail::parse_yaml(text, display_name, base.errors);
  if (!base.errors.empty()) {
    fail(base.errors);
  }
  if (root.is_null()) {
    fail({detail::make_diagnostic(Origin{display_name, 0, 0}, "", "the config is empty",
                                  "a job config needs at least the sections job, tpu and command")});
  }
  if (!root.is_mapping()) {
    fail({detail::make_diagnostic(root.origin, "",
                                  "the top level must be a mapping of sections (job, tpu, command, ...), got " +
                                      detail::describe_kind(root))});
  }
  detail::apply_set_overrides(root, options.set_overrides, base.errors);
  std::vector<SweepAxis> axes = detail::collect_sweeps(root, options.sweep_args, base);
  if (!base.errors.empty()) {
    axes.clear(); // Still check the document itself, to report everything at once.
  }
  std::size_t members = 1;
  for (const auto& axis : axes) {
    // Saturates far above the limit, so the count shown is exact for any sweep a person writes.
    members = std::min<std::size_t>(members * axis.values.size(), std::size_t{1} << 40);
  }
  if (members > max_sweep_members) {
    base.error(axes.front().origin, axes.front().origin.file == "--sweep" ? axes.front().path : "sweep",
               "the sweep has " + std::to_string(members) + " combinations, more than the " +
                   std::to_string(max_sweep_members) + " allowed",
               "sweep fewer values, or split the sweep into several jobs");
    axes.clear();
    members = 1;
  }

  // A key gets its leaf name in job names unless another swept key has the same leaf.
  std::vector<std::string> labels;
  for (const auto& axis : axes) {
    const auto leaf = [](const std::string& path) { return path.substr(path.rfind('.') + 1); };
    const bool shared = std::count_if(axes.begin(), axes.end(),
                                      [&](const SweepAxis& other) { return leaf(other.path) == leaf(axis.path); }) > 1;
    labels.push_back(shared ? axis.path : leaf(axis.path));
  }

  BuildContext ctx{display_name, base_dir, options.default_zone, options.zone_optional};
  std::vector<JobConfig> configs;
  std::vector<Diagnostic> errors = base.errors;
  std::set<std::string> seen;
  for (const auto& error : errors) {
    seen.insert(error.format());
  }
  for (std::size_t index = 0; index < members; ++index) {
    Problems p;
    Node member = root;
    std::map<std::string, std::string> point;
    std::string suffix;
    // The first key varies slowest.
    std::size_t rest = index;
    std::vector<std::size_t> choice(axes.size());
    for (std::size_t a = axes.size(); a-- > 0;) {
      choice[a] = rest % axes[a].values.size();
      rest /= axes[a].values.size();
    }
    for (std::size_t a = 0; a < axes.size(); ++a) {
      const Node& value = axes[a].values[choice[a]];
      const std::string value_text = detail::flow_text(value);
      point[axes[a].path] = value_text;
      suffix += "-" + labels[a] + "=" + value_text;
      detail::set_path(member, axes[a].path, value, value.origin, p.errors);
    }
    if (!suffix.empty()) {
      if (Entry* job = member.find("job"); job != nullptr && job->value.is_mapping()) {
        if (Entry* name = job->value.find("name"); name != nullptr && name->value.is_scalar()) {
          name->value.text += suffix;
        }
      }
    }
    const auto api_key = detail::api_key_reference(member);
    const Node as_written = member;
    std::map<std::string, std::string> read;
    std::vector<std::string> calls;
    detail::ReferenceDefaults defaults{options.default_zone};
    if (options.recorded) {
      defaults.environment = detail::EnvironmentCalls::mark;
      defaults.marked = &calls;
    } else {
      defaults.read = &read;
    }
    // The Python jobman renames its node to tpu.name plus the job's id before the command reads ${tpu.name}.
    if (const Entry* command = member.find("command");
        !options.recorded && command != nullptr && command->value.is_mapping()) {
      if (const Entry* cmd = command->value.find("cmd");
          cmd != nullptr && cmd->value.is_scalar() && cmd->value.text.find("${tpu.name}") != std::string::npos) {
        p.warn(cmd->value.origin, "command.cmd",
               "${tpu.name} is what jobman starts node names with, not the node's name (which has the job's id and "
               "attempt after it); the command finds the node's name in $JOBMAN_TPU_NAME");
      }
    }
    detail::resolve_references(member, defaults, p.errors);
    JobConfig config = detail::build_config(p, member, ctx);
    unread_errors_to_warnings(member, config, p);
    for (auto& error : p.errors) {
      if (seen.insert(error.format()).second) {
        errors.push_back(std::move(error));
      }
    }
    if (!errors.empty()) {
      continue;
    }
    std::stable_sort(p.warnings.begin(), p.warnings.end(), [](const ConfigWarning& a, const ConfigWarning& b) {
      const auto key = [](const ConfigWarning& w) {
        return std::pair(w.where.line == 0 ? INT_MAX : w.where.line, w.where.column);
      };
      return key(a) < key(b);
    });
    config.warnings = std::move(p.warnings);
    config.sweep_point = std::move(point);
    auto snapshot = detail::document(config, Purpose::snapshot, api_key);
    if (options.recorded) {
      config.environment_calls = std::move(calls);
      restore_calls(snapshot, config.environment_calls);
    } else if (!read.empty()) {
      // A setup script read from a file is the file's text, for which no call of the config stands (a call there
      // gave the file's path): it is kept as it is.
      const auto setup = snapshot["setup"];
      config.environment = keep_calls(snapshot, as_written, ctx, defaults, read, api_key);
      if (config.setup && !config.setup->file.empty()) {
        snapshot["setup"] = setup;
      }
    }
    config.resolved_yaml = detail::emit_yaml(snapshot);
    configs.push_back(std::move(config));
  }
  if (!errors.empty()) {
    fail(std::move(errors));
  }
  return configs;
}

} // namespace

std::vector<std::string>
expand_environment(JobConfig& config,
                   const std::function<std::optional<std::string>(const std::string& name)>& lookup) {
  std::vector<std::string> missing;
  const auto expand = [&](std::string& text) {
    text = detail::replace_environment_markers(text, [&](std::size_t i) -> std::string {
      if (i >= config.environment_calls.size()) {
        return "";
      }
      const std::string& call = config.environment_calls[i];
      if (auto value = detail::environment_value(call, lookup)) {
        return *value;
      }
      const auto name = detail::environment_variable(call);
      if (std::find(missing.begin(), missing.end(), name) == missing.end()) {
        missing.push_back(name);
      }
      return call;
    });
  };
  expand(config.command.cmd);
  if (config.docker) {
    std::for_each(config.docker->env_vars.begin(), config.docker->env_vars.end(), expand);
    std::for_each(config.docker->flags.begin(), config.docker->flags.end(), expand);
  }
  for (auto& [key, value] : config.tpu.metadata) {
    expand(value);
  }
  if (config.tpu.startup_script) {
    expand(*config.tpu.startup_script);
  }
  if (config.setup) {
    expand(config.setup->script);
  }
  if (config.notify) {
    std::for_each(config.notify->webhooks.begin(), config.notify->webhooks.end(), expand);
    if (config.notify->smtp) {
      expand(config.notify->smtp->username);
      expand(config.notify->smtp->password);
    }
  }
  for (auto& [key, value] : config.vars) {
    expand(value);
  }
  return missing;
}

std::vector<JobConfig> load_job_configs(const std::string& path, const LoadOptions& options) {
  const std::string text = util::read_file(path);
  const auto base_dir = std::filesystem::absolute(std::filesystem::path(path)).parent_path();
  auto configs = parse_configs(text, path, base_dir, options);
  for (auto& config : configs) {
    config.source_path = path;
  }
  return configs;
}

std::vector<JobConfig> parse_job_configs(const std::string& text, const std::string& display_name,
                                         const LoadOptions& options) {
  std::filesystem::path base_dir = std::filesystem::current_path();
  if (!display_name.empty()) {
    base_dir = std::filesystem::absolute(std::filesystem::path(display_name)).parent_path();
  }
  return parse_configs(text, display_name, base_dir, options);
}

std::string to_json(const JobConfig& config, int indent) {
  return detail::document(config, Purpose::display, std::nullopt).dump(indent);
}

} // namespace jobman::config
