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

// The Python jobman resolves a ${...} only where it reads the key, so a reference that cannot be resolved in a key
// nobody reads (brevo_email, a section it does not know, an environment section env_type does not name) does not
// stop it. Such errors become warnings; the keys they are in are not used anyway.
void unread_reference_errors_to_warnings(const Node& root, Problems& p) {
  std::string env_type = "none";
  if (const Entry* job = root.find("job"); job != nullptr && job->value.is_mapping()) {
    if (const Entry* env = job->value.find("env_type"); env != nullptr && env->value.is_scalar()) {
      env_type = env->value.text;
    }
  }
  const auto sections = detail::known_keys("");
  const auto unread = [&](const std::string& key_path) {
    const std::string top = key_path.substr(0, key_path.find_first_of(".["));
    if (top == "brevo_email" || std::find(sections.begin(), sections.end(), top) == sections.end()) {
      return true;
    }
    return (top == "docker" || top == "conda" || top == "venv") && top != env_type;
  };
  std::vector<Diagnostic> kept;
  for (auto& error : p.errors) {
    // The limit on what resolving may cost is jobman's own guard, wherever it trips.
    const bool guard = error.message.starts_with("resolving references would make");
    if (!guard && !error.where.key_path.empty() && unread(error.where.key_path)) {
      p.warnings.push_back(ConfigWarning{error.where, error.message + " (not used, so not needed)"});
    } else {
      kept.push_back(std::move(error));
    }
  }
  p.errors = std::move(kept);
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

  BuildContext ctx{display_name, base_dir, options.default_zone};
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
    detail::resolve_references(member, detail::ReferenceDefaults{options.default_zone}, p.errors);
    unread_reference_errors_to_warnings(member, p);
    JobConfig config = detail::build_config(p, member, ctx);
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
    config.resolved_yaml = detail::emit_yaml(detail::document(config, Purpose::snapshot, api_key));
    configs.push_back(std::move(config));
  }
  if (!errors.empty()) {
    fail(std::move(errors));
  }
  return configs;
}

} // namespace

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
