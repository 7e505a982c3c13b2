#include "jobman/config/loader.hpp"

#include "interpolation.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "schema.hpp"
#include "yaml_tree.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

namespace jobman::config {

namespace {

using detail::Entry;
using detail::Node;
using detail::Origin;
using json = nlohmann::ordered_json;

constexpr std::size_t max_sweep_members = 1000;

// Whether a key must be present.
enum class Presence { optional, required };

// What a document is built for: the snapshot stored and read back, or output for people and scripts.
enum class Purpose { snapshot, display };

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// Problems found while building one config.
struct Problems {
  std::vector<Diagnostic> errors;
  std::vector<ConfigWarning> warnings;

  void error(const Origin& at, const std::string& path, std::string message, std::string hint = {}) {
    errors.push_back(detail::make_diagnostic(at, path, std::move(message), std::move(hint)));
  }
  void warn(const Origin& at, const std::string& path, std::string message) {
    warnings.push_back(ConfigWarning{SourceLocation{at.file, at.line, at.column, path}, std::move(message)});
  }
};

// ---- Typed values ----

std::optional<std::string> as_string(Problems& p, const Node& node, const std::string& path) {
  if (node.unresolved) {
    return std::nullopt;
  }
  if (!node.is_scalar()) {
    p.error(node.origin, path, "expected a string, got " + detail::describe_kind(node));
    return std::nullopt;
  }
  return node.text;
}

std::optional<bool> as_bool(Problems& p, const Node& node, const std::string& path) {
  if (node.unresolved) {
    return std::nullopt;
  }
  if (node.is_scalar()) {
    const std::string word = util::to_lower(node.text);
    if (word == "true" || word == "yes" || word == "on") {
      return true;
    }
    if (word == "false" || word == "no" || word == "off") {
      return false;
    }
  }
  p.error(node.origin, path, "expected true or false, got " + detail::describe_kind(node));
  return std::nullopt;
}

std::string range_text(long long min, long long max) {
  if (max == LLONG_MAX || max == INT_MAX) {
    return "must be at least " + std::to_string(min);
  }
  return "must be between " + std::to_string(min) + " and " + std::to_string(max);
}

std::optional<long long> as_int(Problems& p, const Node& node, const std::string& path, long long min, long long max) {
  if (node.unresolved) {
    return std::nullopt;
  }
  if (!node.is_scalar()) {
    p.error(node.origin, path, "expected an integer, got " + detail::describe_kind(node));
    return std::nullopt;
  }
  const auto value = util::parse_int(node.text);
  if (!value) {
    const std::string_view digits = std::string_view(node.text).substr(node.text.starts_with('-') ? 1 : 0);
    if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) {
      p.error(node.origin, path, "integer out of range: " + node.text, range_text(min, max));
    } else {
      p.error(node.origin, path, "expected an integer, got '" + node.text + "'");
    }
    return std::nullopt;
  }
  if (*value < min || *value > max) {
    p.error(node.origin, path, range_text(min, max) + ", got " + node.text);
    return std::nullopt;
  }
  return value;
}

std::optional<long long> as_duration(Problems& p, const Node& node, const std::string& path, long long min_seconds) {
  if (node.unresolved) {
    return std::nullopt;
  }
  if (!node.is_scalar()) {
    p.error(node.origin, path, "expected a duration such as 30s or 5m, got " + detail::describe_kind(node));
    return std::nullopt;
  }
  const auto seconds = util::parse_duration_seconds(node.text);
  if (!seconds) {
    p.error(node.origin, path, "'" + node.text + "' is not a duration",
            "write e.g. 30s, 5m, 1h30m, or a number of seconds");
    return std::nullopt;
  }
  if (*seconds < min_seconds) {
    p.error(node.origin, path, "must be at least " + std::to_string(min_seconds) + "s, got '" + node.text + "'");
    return std::nullopt;
  }
  return seconds;
}

std::optional<double> as_double(Problems& p, const Node& node, const std::string& path, double min) {
  if (node.unresolved) {
    return std::nullopt;
  }
  if (node.is_scalar() && !node.text.empty()) {
    errno = 0;
    char* end = nullptr;
    const double value = std::strtod(node.text.c_str(), &end);
    if (errno == 0 && end == node.text.c_str() + node.text.size() && std::isfinite(value)) {
      if (value < min) {
        p.error(node.origin, path, "must be at least " + std::to_string(static_cast<int>(min)) + ", got " + node.text);
        return std::nullopt;
      }
      return value;
    }
  }
  p.error(node.origin, path, "expected a number, got " + detail::describe_kind(node));
  return std::nullopt;
}

// One value out of a fixed set, with a did-you-mean.
template <typename Enum>
std::optional<Enum> as_choice(Problems& p, const Node& node, const std::string& path,
                              const std::vector<std::pair<std::string, Enum>>& choices) {
  const auto text = as_string(p, node, path);
  if (!text) {
    return std::nullopt;
  }
  std::vector<std::string> names;
  for (const auto& [name, value] : choices) {
    if (name == *text) {
      return value;
    }
    names.push_back(name);
  }
  std::string hint;
  if (auto close = util::closest_match(*text, names)) {
    hint = "did you mean '" + *close + "'?";
  }
  p.error(node.origin, path, "'" + *text + "' is not one of " + util::join(names, ", "), hint);
  return std::nullopt;
}

// ---- Sections ----

// A mapping section of the document: reports unknown keys once, then hands out typed values.
class Section {
public:
  // `node` is the section's value (nullptr when absent); `anchor` locates messages about missing keys.
  Section(Problems& p, const Node* node, std::string path, Origin anchor, std::string_view schema_name)
      : p_(p), path_(std::move(path)), anchor_(std::move(anchor)) {
    if (node == nullptr || node->is_null()) {
      return;
    }
    if (!node->is_mapping()) {
      if (!node->unresolved) {
        p_.error(node->origin, path_, "expected a mapping of keys, got " + detail::describe_kind(*node));
      }
      broken_ = true;
      return;
    }
    node_ = node;
    const auto keys = detail::known_keys(schema_name);
    for (const auto& entry : node->entries) {
      if (std::find(keys.begin(), keys.end(), entry.key) == keys.end()) {
        p_.error(entry.key_origin, join_path(path_, entry.key), "unknown key", detail::suggestion(entry.key, keys));
      }
    }
  }

  // The value of a key, or nullptr when the key is absent; a missing required key is reported.
  [[nodiscard]] const Node* get(const std::string& key, Presence presence = Presence::optional) const {
    const Entry* entry = node_ == nullptr ? nullptr : node_->find(key);
    if (entry == nullptr && presence == Presence::required) {
      missing(key);
    }
    return entry == nullptr ? nullptr : &entry->value;
  }

  // Reports a required key that is absent (unless the section itself was already reported as broken).
  void missing(const std::string& key, std::string hint = {}) const {
    if (!broken_) {
      p_.error(anchor_, path(key), "required key is missing", std::move(hint));
    }
  }

  // The dotted path of a key in this section.
  [[nodiscard]] std::string path(const std::string& key) const { return join_path(path_, key); }

  // Where a key's value was written, or the section's anchor when it is absent.
  [[nodiscard]] const Origin& origin(const std::string& key) const {
    const Node* value = get(key);
    return value == nullptr ? anchor_ : value->origin;
  }

  // A string; null counts as absent.
  std::optional<std::string> str(const std::string& key, Presence presence = Presence::optional) const {
    const Node* value = get(key, presence);
    if (value == nullptr) {
      return std::nullopt;
    }
    if (value->is_null()) {
      if (presence == Presence::required) {
        p_.error(value->origin, path(key), "required value is null");
      }
      return std::nullopt;
    }
    auto text = as_string(p_, *value, path(key));
    if (text && presence == Presence::required && util::trim(*text).empty()) {
      p_.error(value->origin, path(key), "must not be empty");
      return std::nullopt;
    }
    return text;
  }

  // A boolean; null counts as absent.
  std::optional<bool> boolean(const std::string& key) const {
    const Node* value = get(key);
    return value == nullptr || value->is_null() ? std::nullopt : as_bool(p_, *value, path(key));
  }

  // An integer in [min, max]; null counts as absent.
  std::optional<long long> integer(const std::string& key, long long min, long long max) const {
    const Node* value = get(key);
    return value == nullptr || value->is_null() ? std::nullopt : as_int(p_, *value, path(key), min, max);
  }

  // A duration in seconds, at least `min_seconds`; null counts as absent.
  std::optional<long long> duration(const std::string& key, long long min_seconds) const {
    const Node* value = get(key);
    return value == nullptr || value->is_null() ? std::nullopt : as_duration(p_, *value, path(key), min_seconds);
  }

  // A value out of a fixed set; null counts as absent.
  template <typename Enum>
  std::optional<Enum> choice(const std::string& key, const std::vector<std::pair<std::string, Enum>>& choices) const {
    const Node* value = get(key);
    return value == nullptr || value->is_null() ? std::nullopt : as_choice(p_, *value, path(key), choices);
  }

  // A list of strings; null is an empty list.
  std::vector<std::string> str_list(const std::string& key) const {
    std::vector<std::string> out;
    const Node* value = get(key);
    if (value == nullptr || value->is_null() || value->unresolved) {
      return out;
    }
    if (!value->is_sequence()) {
      p_.error(value->origin, path(key), "expected a list of strings, got " + detail::describe_kind(*value));
      return out;
    }
    for (std::size_t i = 0; i < value->items.size(); ++i) {
      if (auto text = as_string(p_, value->items[i], path(key) + "[" + std::to_string(i) + "]")) {
        out.push_back(*text);
      }
    }
    return out;
  }

  // A mapping from names to single values; null is an empty map. Each entry is passed to `check`.
  std::map<std::string, std::string> str_map(const std::string& key) const {
    std::map<std::string, std::string> out;
    const Node* value = get(key);
    if (value == nullptr || value->is_null() || value->unresolved) {
      return out;
    }
    if (!value->is_mapping()) {
      p_.error(value->origin, path(key), "expected a mapping of names to values, got " + detail::describe_kind(*value));
      return out;
    }
    for (const auto& entry : value->entries) {
      const std::string entry_path = join_path(path(key), entry.key);
      if (entry.value.is_null()) {
        p_.error(entry.value.origin, entry_path, "expected a value, got null");
      } else if (auto text = as_string(p_, entry.value, entry_path)) {
        out[entry.key] = *text;
      }
    }
    return out;
  }

  // The section's node, or nullptr when absent, null or not a mapping.
  [[nodiscard]] const Node* node() const { return node_; }
  // True when the section is present as a mapping.
  [[nodiscard]] bool present() const { return node_ != nullptr; }

private:
  Problems& p_;
  std::string path_;
  Origin anchor_;
  const Node* node_ = nullptr;
  bool broken_ = false;
};

// ---- Checks on single values ----

// The patterns values are checked against, each compiled once.
const std::regex& label_key_form() {
  static const std::regex pattern("[a-z][a-z0-9_-]{0,62}");
  return pattern;
}

const std::regex& label_value_form() {
  static const std::regex pattern("[a-z0-9_-]{0,63}");
  return pattern;
}

const std::regex& tag_form() {
  static const std::regex pattern("[a-z]([-a-z0-9]{0,61}[a-z0-9])?");
  return pattern;
}

const std::regex& variable_name_form() {
  static const std::regex pattern("[A-Za-z_][A-Za-z0-9_-]*");
  return pattern;
}

bool matches(const std::string& text, const std::regex& pattern) {
  return std::regex_match(text, pattern);
}

void check_label(Problems& p, const Origin& key_at, const Origin& value_at, const std::string& path,
                 const std::string& key, const std::string& value) {
  if (!matches(key, label_key_form())) {
    p.error(key_at, path, "label key '" + key + "' is not valid",
            "label keys start with a lowercase letter and use lowercase letters, digits, '_' and '-', "
            "at most 63 characters");
  }
  if (!matches(value, label_value_form())) {
    p.error(value_at, path, "label value '" + value + "' is not valid",
            "label values use lowercase letters, digits, '_' and '-', at most 63 characters");
  }
}

void check_tag(Problems& p, const Origin& at, const std::string& path, const std::string& tag) {
  if (!matches(tag, tag_form())) {
    p.error(at, path, "network tag '" + tag + "' is not valid",
            "tags start with a lowercase letter and use lowercase letters, digits and '-', at most 63 characters");
  }
}

std::string hosts_text(int hosts) {
  return hosts == 1 ? "1 host: 0" : std::to_string(hosts) + " hosts: 0-" + std::to_string(hosts - 1);
}

// ---- Building the model ----

// Inputs to building one config besides the document.
struct BuildContext {
  std::string file;               // Display name of the config.
  std::filesystem::path base_dir; // Directory relative paths are resolved against.
  std::string default_zone;       // Zone when the config has none.
};

// Resolves a local path written in the config: "~" expanded, relative to the config's directory.
std::string local_path(const BuildContext& ctx, const std::string& path) {
  if (path.empty()) {
    return path;
  }
  std::filesystem::path out = util::expand_user(path);
  if (out.is_relative()) {
    out = ctx.base_dir / out;
  }
  return out.lexically_normal().string();
}

WorkerSelection build_workers(Problems& p, const Node* node, const std::string& path,
                              const std::optional<AcceleratorType>& accelerator) {
  WorkerSelection out;
  if (node == nullptr || node->is_null() || node->unresolved) {
    return out;
  }
  std::vector<const Node*> items;
  if (node->is_scalar() && node->text == "all") {
    return out;
  }
  if (node->is_scalar()) {
    items.push_back(node);
  } else if (node->is_sequence()) {
    for (const auto& item : node->items) {
      items.push_back(&item);
    }
    if (items.empty()) {
      p.error(node->origin, path, "the list of workers is empty", "write \"all\" or at least one worker index");
      return out;
    }
  } else {
    p.error(node->origin, path,
            "expected \"all\", a worker index or a list of indices, got " + detail::describe_kind(*node));
    return out;
  }
  out.all = false;
  for (const Node* item : items) {
    if (item->is_scalar() && !util::parse_int(item->text)) {
      p.error(item->origin, path, "expected \"all\", a worker index or a list of indices, got '" + item->text + "'");
      continue;
    }
    const auto index = as_int(p, *item, path, INT_MIN, INT_MAX);
    if (!index) {
      continue;
    }
    if (accelerator && (*index < 0 || *index >= accelerator->hosts)) {
      p.error(item->origin, path, "worker " + std::to_string(*index) + " does not exist on " + accelerator->name,
              hosts_text(accelerator->hosts));
      continue;
    }
    if (*index < 0) {
      p.error(item->origin, path, "worker " + std::to_string(*index) + " does not exist", "worker indices start at 0");
      continue;
    }
    if (std::find(out.indices.begin(), out.indices.end(), static_cast<int>(*index)) != out.indices.end()) {
      p.error(item->origin, path, "worker " + std::to_string(*index) + " is listed twice");
      continue;
    }
    out.indices.push_back(static_cast<int>(*index));
  }
  std::sort(out.indices.begin(), out.indices.end());
  return out;
}

// Splits "k=v,k2=v2" (gcloud's --labels and --metadata form).
std::vector<std::pair<std::string, std::string>> key_values(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& item : util::split(text, ',')) {
    const auto eq = item.find('=');
    out.emplace_back(std::string(util::trim(item.substr(0, eq))),
                     eq == std::string::npos ? std::string() : std::string(util::trim(item.substr(eq + 1))));
  }
  return out;
}

// Moves the gcloud flags that have a TPU API equivalent into the model; names the rest in one warning.
void apply_tpu_flags(Problems& p, const Section& tpu, TpuSection& out) {
  const Node* node = tpu.get("flags");
  if (node == nullptr || node->is_null() || node->unresolved) {
    return;
  }
  if (!node->is_sequence()) {
    p.error(node->origin, tpu.path("flags"), "expected a list of gcloud flags, got " + detail::describe_kind(*node));
    return;
  }
  static const std::set<std::string, std::less<>> with_value{
      "--network", "--subnetwork", "--service-account", "--reservation", "--tags", "--labels", "--metadata"};
  static const std::set<std::string, std::less<>> switches{"--reserved", "--internal-ips"};
  const std::string path = tpu.path("flags");
  std::vector<std::string> rest;
  const auto set_string = [&](std::string& field, const std::string& key, const std::string& value, const Node& at,
                              const std::string& item_path) {
    if (!field.empty() && field != value) {
      p.error(at.origin, item_path, "conflicts with " + tpu.path(key) + " '" + field + "'");
      return;
    }
    field = value;
  };
  for (std::size_t i = 0; i < node->items.size(); ++i) {
    const Node& item = node->items[i];
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    const auto text = as_string(p, item, item_path);
    if (!text) {
      continue;
    }
    std::string name = *text;
    std::optional<std::string> value;
    if (const auto sep = text->find_first_of("= "); sep != std::string::npos && text->starts_with("--")) {
      name = text->substr(0, sep);
      value = std::string(util::trim(text->substr(sep + 1)));
    }
    if (switches.contains(name)) {
      if (value && !value->empty() && util::to_lower(*value) != "true") {
        p.error(item.origin, item_path, name + " takes no value");
        continue;
      }
      (name == "--reserved" ? out.reserved : out.internal_ips) = true;
      continue;
    }
    if (!with_value.contains(name)) {
      rest.push_back(*text);
      continue;
    }
    if (!value) {
      const bool next_is_value =
          i + 1 < node->items.size() && node->items[i + 1].is_scalar() && !node->items[i + 1].text.starts_with("-");
      if (!next_is_value) {
        p.error(item.origin, item_path, name + " needs a value");
        continue;
      }
      value = node->items[++i].text;
    }
    if (name == "--network") {
      set_string(out.network, "network", *value, item, item_path);
    } else if (name == "--subnetwork") {
      set_string(out.subnetwork, "subnetwork", *value, item, item_path);
    } else if (name == "--service-account") {
      set_string(out.service_account, "service_account", *value, item, item_path);
    } else if (name == "--reservation") {
      set_string(out.reservation, "reservation", *value, item, item_path);
    } else if (name == "--tags") {
      for (const auto& tag : util::split(*value, ',')) {
        const std::string trimmed(util::trim(tag));
        check_tag(p, item.origin, item_path, trimmed);
        if (std::find(out.tags.begin(), out.tags.end(), trimmed) == out.tags.end()) {
          out.tags.push_back(trimmed);
        }
      }
    } else {
      auto& target = name == "--labels" ? out.labels : out.metadata;
      for (const auto& [key, entry_value] : key_values(*value)) {
        if (name == "--labels") {
          check_label(p, item.origin, item.origin, item_path, key, entry_value);
        } else if (key.empty()) {
          p.error(item.origin, item_path, "--metadata needs KEY=VALUE pairs");
          continue;
        }
        if (auto it = target.find(key); it != target.end() && it->second != entry_value) {
          p.error(item.origin, item_path,
                  "conflicts with " + tpu.path(name == "--labels" ? "labels" : "metadata") + "." + key + " '" +
                      it->second + "'");
          continue;
        }
        target[key] = entry_value;
      }
    }
  }
  if (!rest.empty()) {
    p.warn(node->origin, path,
           "jobman creates slices through the TPU API, which has no equivalent of " + util::join(rest, ", ") +
               "; not applied");
  }
  out.flags = rest;
}

void build_job(const Section& s, JobSection& out) {
  out.name = s.str("name", Presence::required).value_or("");
  out.env_type =
      s.choice<EnvType>(
           "env_type",
           {{"none", EnvType::none}, {"venv", EnvType::venv}, {"conda", EnvType::conda}, {"docker", EnvType::docker}})
          .value_or(EnvType::none);
  out.loop = s.boolean("loop").value_or(true);
  out.remote_user = s.str("remote_user").value_or("");
}

std::optional<AcceleratorType> build_tpu(Problems& p, const Section& s, const BuildContext& ctx, const JobSection& job,
                                         TpuSection& out) {
  out.allocation_mode =
      s.choice<AllocationMode>("allocation_mode", {{"queued-resources", AllocationMode::queued_resources},
                                                   {"tpu-vm", AllocationMode::tpu_vm}})
          .value_or(AllocationMode::queued_resources);
  std::optional<AcceleratorType> accelerator;
  if (auto name = s.str("accelerator", Presence::required)) {
    std::string why;
    accelerator = find_accelerator(*name, &why);
    if (accelerator) {
      out.accelerator = *accelerator;
    } else {
      p.error(s.origin("accelerator"), s.path("accelerator"), why);
    }
  }
  out.name = s.str("name").value_or(job.name);
  if (auto zone = s.str("zone")) {
    out.zone = *zone;
  } else if (!ctx.default_zone.empty()) {
    out.zone = ctx.default_zone;
  } else if (const Node* node = s.get("zone"); node == nullptr || !node->unresolved) {
    s.missing("zone", "set tpu.zone, or a default zone in settings.yaml (zone:) or JOBMAN_ZONE");
  }
  if (!out.zone.empty()) {
    if (auto problem = detail::zone_problem(out.zone)) {
      p.error(s.origin("zone"), s.path("zone"), problem->first, problem->second);
    } else if (accelerator) {
      const auto& zones = accelerator->generation->zones;
      if (std::find(zones.begin(), zones.end(), out.zone) == zones.end()) {
        p.warn(s.origin("zone"), s.path("zone"),
               accelerator->generation->name + " is not offered in " + out.zone +
                   " as far as jobman knows (known: " + util::join(zones, ", ") + ")");
      }
    }
  }
  if (auto version = s.str("version")) {
    out.version = *version;
    if (accelerator) {
      const auto& mine = accelerator->generation->runtime_versions;
      if (std::find(mine.begin(), mine.end(), out.version) == mine.end()) {
        for (const auto& other : tpu_generations()) {
          const auto& theirs = other.runtime_versions;
          if (std::find(theirs.begin(), theirs.end(), out.version) != theirs.end()) {
            p.warn(s.origin("version"), s.path("version"),
                   "runtime version '" + out.version + "' is meant for " + other.name + ", not " +
                       accelerator->generation->name + " (" + accelerator->generation->name + " usually runs " +
                       mine.front() + ")");
            break;
          }
        }
      }
    }
  } else if (accelerator) {
    out.version = accelerator->generation->runtime_versions.front();
  }
  out.pricing =
      s.choice<Pricing>(
           "pricing", {{"spot", Pricing::spot}, {"ondemand", Pricing::ondemand}, {"preemptible", Pricing::preemptible}})
          .value_or(Pricing::spot);
  out.startup_script = s.str("startup_script");
  out.tags = s.str_list("tags");
  for (std::size_t i = 0; i < out.tags.size(); ++i) {
    check_tag(p, s.get("tags")->items[i].origin, s.path("tags") + "[" + std::to_string(i) + "]", out.tags[i]);
  }
  out.metadata = s.str_map("metadata");
  if (out.startup_script && out.metadata.contains("startup-script")) {
    p.error(s.origin("startup_script"), s.path("startup_script"),
            "conflicts with tpu.metadata.startup-script; give the script once");
  }
  out.labels = s.str_map("labels");
  if (const Node* labels = s.get("labels"); labels != nullptr && labels->is_mapping()) {
    for (const auto& entry : labels->entries) {
      if (auto it = out.labels.find(entry.key); it != out.labels.end()) {
        check_label(p, entry.key_origin, entry.value.origin, join_path(s.path("labels"), entry.key), entry.key,
                    it->second);
      }
    }
  }
  out.queue_timeout_seconds = s.duration("queue_timeout", 1);
  if (out.queue_timeout_seconds && out.allocation_mode == AllocationMode::tpu_vm) {
    p.warn(s.origin("queue_timeout"), s.path("queue_timeout"),
           "ignored: allocation_mode tpu-vm creates the slice directly, without a queue");
  }
  out.network = s.str("network").value_or("");
  out.subnetwork = s.str("subnetwork").value_or("");
  out.service_account = s.str("service_account").value_or("");
  out.reservation = s.str("reservation").value_or("");
  out.reserved = s.boolean("reserved").value_or(false);
  out.internal_ips = s.boolean("internal_ips").value_or(false);
  out.keep_on_success = s.boolean("keep_on_success").value_or(false);
  apply_tpu_flags(p, s, out);
  return accelerator;
}

void build_recovery(Problems& p, const Section& s, const Origin& file_origin, bool loop, RecoverySection& out) {
  bool explicit_preemptions = false;
  if (const Node* node = s.get("max_preemptions")) {
    explicit_preemptions = true;
    if (node->is_null() || (node->is_scalar() && util::to_lower(node->text) == "unlimited")) {
      out.max_preemptions = std::nullopt;
    } else if (node->is_scalar() && !util::parse_int(node->text) && !node->text.empty() &&
               node->text.find_first_not_of("-+0123456789") != std::string::npos) {
      p.error(node->origin, s.path("max_preemptions"),
              "expected a number of preemptions or \"unlimited\", got '" + node->text + "'");
    } else if (auto value = as_int(p, *node, s.path("max_preemptions"), 0, INT_MAX)) {
      out.max_preemptions = static_cast<int>(*value);
    }
  }
  if (!loop && !explicit_preemptions) {
    out.max_preemptions = 0;
  }
  out.max_failures = static_cast<int>(s.integer("max_failures", 0, INT_MAX).value_or(0));
  if (const Node* codes = s.get("restart_exit_codes")) {
    out.restart_exit_codes.clear();
    if (codes->is_sequence()) {
      for (std::size_t i = 0; i < codes->items.size(); ++i) {
        const std::string path = s.path("restart_exit_codes") + "[" + std::to_string(i) + "]";
        if (auto code = as_int(p, codes->items[i], path, 1, 255)) {
          if (std::find(out.restart_exit_codes.begin(), out.restart_exit_codes.end(), *code) !=
              out.restart_exit_codes.end()) {
            p.error(codes->items[i].origin, path, "exit code " + std::to_string(*code) + " is listed twice");
          } else {
            out.restart_exit_codes.push_back(static_cast<int>(*code));
          }
        }
      }
    } else if (!codes->is_null() && !codes->unresolved) {
      p.error(codes->origin, s.path("restart_exit_codes"),
              "expected a list of exit codes (1-255), got " + detail::describe_kind(*codes));
    }
  }
  out.poll_interval_seconds = s.duration("poll_interval", 1).value_or(30);
  const Node* backoff_node = s.get("backoff");
  const Section backoff(p, backoff_node, s.path("backoff"), s.present() ? s.origin("backoff") : file_origin,
                        "recovery.backoff");
  out.backoff_initial_seconds = backoff.duration("initial", 0).value_or(10);
  out.backoff_max_seconds = backoff.duration("max", 0).value_or(600);
  if (const Node* multiplier = backoff.get("multiplier"); multiplier != nullptr && !multiplier->is_null()) {
    out.backoff_multiplier = as_double(p, *multiplier, backoff.path("multiplier"), 1.0).value_or(2.0);
  }
  if (out.backoff_max_seconds < out.backoff_initial_seconds) {
    p.error(backoff.origin("max"), backoff.path("max"),
            "must be at least backoff.initial (" + std::to_string(out.backoff_initial_seconds) + "s)");
  }
}

// Section lookup in the document: its entry (or nullptr) and where messages about it point.
struct SectionRef {
  const Node* node = nullptr;
  Origin anchor;
};

SectionRef section_ref(const Node& root, const std::string& name, const std::string& file) {
  if (const Entry* entry = root.find(name)) {
    return SectionRef{&entry->value, entry->key_origin};
  }
  return SectionRef{nullptr, Origin{file, 0, 0}};
}

JobConfig build_config(Problems& p, const Node& root, const BuildContext& ctx) {
  JobConfig config;
  const auto sections = detail::known_keys("");
  for (const auto& entry : root.entries) {
    if (std::find(sections.begin(), sections.end(), entry.key) == sections.end()) {
      p.error(entry.key_origin, entry.key, "unknown section", detail::suggestion(entry.key, sections));
    }
  }
  const auto open = [&](const std::string& name, Presence presence) {
    const SectionRef ref = section_ref(root, name, ctx.file);
    if (ref.node == nullptr && presence == Presence::required) {
      p.error(ref.anchor, name, "required section is missing");
      // Report the section once, not each of its required keys.
      Node broken = detail::make_scalar("", ref.anchor);
      broken.unresolved = true;
      return Section(p, &broken, name, ref.anchor, name);
    }
    return Section(p, ref.node, name, ref.anchor, name);
  };

  const Section job = open("job", Presence::required);
  build_job(job, config.job);
  const Section tpu = open("tpu", Presence::required);
  const auto accelerator = build_tpu(p, tpu, ctx, config.job, config.tpu);

  if (const Section s = open("gcsfuse", Presence::optional); s.present()) {
    GcsfuseSection out;
    out.bucket_name = s.str("bucket_name", Presence::required).value_or("");
    if (out.bucket_name.starts_with("gs://")) {
      p.error(s.origin("bucket_name"), s.path("bucket_name"), "write the bucket name without gs://",
              "e.g. " + out.bucket_name.substr(5));
    }
    out.mount_path = s.str("mount_path", Presence::required).value_or("");
    out.flags = s.str_list("flags");
    config.gcsfuse = out;
  }
  if (const Section s = open("ssh", Presence::optional); s.present()) {
    SshSection out;
    out.private_key = s.str("private_key").value_or("");
    if (const Node* identities = s.get("identities"); identities != nullptr && !identities->is_null()) {
      if (identities->is_sequence()) {
        for (std::size_t i = 0; i < identities->items.size(); ++i) {
          const Node& item = identities->items[i];
          const std::string path = s.path("identities") + "[" + std::to_string(i) + "]";
          const Section identity(p, &item, path, item.origin, "ssh.identities[]");
          if (!identity.present()) {
            if (item.is_null()) {
              p.error(item.origin, path, "expected a mapping with private_key, public_key, config_entry, got null");
            }
            continue;
          }
          SshIdentity entry;
          entry.private_key = identity.str("private_key", Presence::required).value_or("");
          entry.public_key = identity.str("public_key").value_or("");
          entry.config_entry = identity.str("config_entry").value_or("");
          out.identities.push_back(entry);
        }
      } else if (!identities->unresolved) {
        p.error(identities->origin, s.path("identities"),
                "expected a list of identities, got " + detail::describe_kind(*identities));
      }
    }
    config.ssh = out;
  }
  const Section docker = open("docker", Presence::optional);
  if (docker.present()) {
    DockerSection out;
    out.image = docker.str("image").value_or("");
    out.flags = docker.str_list("flags");
    out.env_vars = docker.str_list("env_vars");
    out.mount_dirs = docker.str_list("mount_dirs");
    out.workdir = docker.str("workdir").value_or("");
    config.docker = out;
  }
  const Section conda = open("conda", Presence::optional);
  if (conda.present()) {
    CondaSection out;
    out.name = conda.str("name").value_or("");
    out.config_file = local_path(ctx, conda.str("config_file").value_or(""));
    config.conda = out;
  }
  const Section venv = open("venv", Presence::optional);
  if (venv.present()) {
    VenvSection out;
    out.name = venv.str("name").value_or("");
    out.requirements_file = local_path(ctx, venv.str("requirements_file").value_or(""));
    out.python = venv.str("python").value_or("");
    config.venv = out;
  }

  const Section command = open("command", Presence::required);
  config.command.cmd = command.str("cmd", Presence::required).value_or("");
  config.command.workers = build_workers(p, command.get("workers"), command.path("workers"), accelerator);

  const Section recovery = open("recovery", Presence::optional);
  build_recovery(p, recovery, Origin{ctx.file, 0, 0}, config.job.loop, config.recovery);

  if (const SectionRef vars = section_ref(root, "vars", ctx.file); vars.node != nullptr && !vars.node->is_null()) {
    if (vars.node->is_mapping()) {
      for (const auto& entry : vars.node->entries) {
        const std::string path = join_path("vars", entry.key);
        if (!matches(entry.key, variable_name_form())) {
          p.error(entry.key_origin, path, "'" + entry.key + "' is not a variable name",
                  "use letters, digits, '_' and '-', starting with a letter");
        } else if (entry.value.is_null()) {
          config.vars[entry.key] = "";
        } else if (entry.value.is_scalar()) {
          config.vars[entry.key] = entry.value.text;
        } else if (!entry.value.unresolved) {
          p.error(entry.value.origin, path,
                  "expected a single value (string or number), got " + detail::describe_kind(entry.value));
        }
      }
    } else if (!vars.node->unresolved) {
      p.error(vars.node->origin, "vars",
              "expected a mapping of variable names to values, got " + detail::describe_kind(*vars.node));
    }
  }

  if (const Section s = open("brevo_email", Presence::optional); s.present()) {
    EmailSection out;
    out.api_key = s.str("api_key").value_or("");
    out.sender = s.str("sender").value_or("");
    out.receiver = s.str("receiver").value_or("");
    if (!out.api_key.empty()) {
      const SectionRef ref = section_ref(root, "brevo_email", ctx.file);
      p.warn(ref.anchor, "brevo_email", "e-mail notifications are not sent yet: this section has no effect");
    }
    config.email = out;
  }

  // The environment named by job.env_type must be configured; the others are left unused.
  const struct {
    EnvType type;
    const char* name;
    const Section* section;
    const char* key;
  } envs[] = {{EnvType::docker, "docker", &docker, "image"},
              {EnvType::conda, "conda", &conda, "name"},
              {EnvType::venv, "venv", &venv, "name"}};
  const Origin env_at = job.origin("env_type");
  for (const auto& env : envs) {
    if (env.type == config.job.env_type) {
      if (!env.section->present()) {
        p.error(env_at, "job.env_type",
                std::string("env_type is ") + env.name + " but the config has no " + env.name + " section",
                std::string("add ") + env.name + "." + env.key);
      } else if (env.section->get(env.key) == nullptr || env.section->get(env.key)->is_null()) {
        env.section->missing(env.key, std::string("job.env_type is ") + env.name);
      }
    } else if (env.section->present()) {
      const SectionRef ref = section_ref(root, env.name, ctx.file);
      p.warn(ref.anchor, env.name, "section not used: job.env_type is " + to_string(config.job.env_type));
    }
  }
  const auto check_file = [&](const Section& s, const std::string& key, const std::string& path) {
    if (!path.empty() && !std::filesystem::exists(path)) {
      p.warn(s.origin(key), s.path(key), "file not found: " + path);
    }
  };
  if (config.job.env_type == EnvType::conda && config.conda) {
    check_file(conda, "config_file", config.conda->config_file);
  }
  if (config.job.env_type == EnvType::venv && config.venv) {
    check_file(venv, "requirements_file", config.venv->requirements_file);
  }
  return config;
}

// ---- Overrides and sweeps ----

bool is_index(std::string_view text) {
  return !text.empty() && text.size() < 10 && text.find_first_not_of("0123456789") == std::string_view::npos;
}

// Parses a command-line value as YAML; text that does not read as a value (or reads as a block mapping,
// as in "echo a: b") is taken as a plain string.
Node parse_argument_value(const std::string& text, const Origin& origin, const std::string& path,
                          std::vector<Diagnostic>& errors) {
  std::vector<Diagnostic> parse_errors;
  Node value = detail::parse_yaml(text, origin.file, parse_errors);
  const std::string_view trimmed = util::trim(text);
  const bool flow = !trimmed.empty() && (trimmed.front() == '[' || trimmed.front() == '{' || trimmed.front() == '"' ||
                                         trimmed.front() == '\'');
  if (!parse_errors.empty() && flow) {
    std::string message = parse_errors.front().message;
    errors.push_back(detail::make_diagnostic(origin, path, "cannot read the value '" + text + "': " + message));
  } else if (!parse_errors.empty() || (value.is_mapping() && !flow) ||
             value.is_sequence() != (flow && trimmed.front() == '[')) {
    value = detail::make_scalar(text, origin);
  }
  detail::set_origin(value, origin);
  return value;
}

// Puts `value` at a dotted path, creating mappings on the way. False (reported) when the path crosses a value.
bool set_path(Node& root, const std::string& path, Node value, const Origin& origin, std::vector<Diagnostic>& errors) {
  const auto parts = util::split(path, '.');
  Node* current = &root;
  std::string walked;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    if (current->is_null()) {
      *current = detail::make_mapping(origin);
    }
    Node* next = nullptr;
    if (current->is_mapping()) {
      Entry* entry = current->find(part);
      if (entry == nullptr) {
        current->entries.push_back(Entry{part, origin, Node{Node::Kind::null, {}, {}, {}, origin, false}});
        entry = &current->entries.back();
      }
      next = &entry->value;
    } else if (current->is_sequence() && is_index(part) && std::stoul(part) < current->items.size()) {
      next = &current->items[std::stoul(part)];
    } else {
      errors.push_back(detail::make_diagnostic(origin, path,
                                               "cannot set this key: " + walked + " is " +
                                                   detail::describe_kind(*current) + ", not a mapping"));
      return false;
    }
    walked = join_path(walked, part);
    if (last) {
      *next = std::move(value);
      return true;
    }
    current = next;
  }
  return true;
}

// "key.path" and the value text of a "key.path=value" argument; nullopt (reported) when malformed.
std::optional<std::pair<std::string, std::string>> split_argument(const std::string& arg, const Origin& origin,
                                                                  const std::string& example,
                                                                  std::vector<Diagnostic>& errors) {
  const auto eq = arg.find('=');
  const std::string path = eq == std::string::npos ? "" : std::string(util::trim(arg.substr(0, eq)));
  bool valid = !path.empty();
  for (const auto& part : util::split(path, '.')) {
    valid = valid && !part.empty();
  }
  if (eq == std::string::npos || !valid) {
    errors.push_back(detail::make_diagnostic(origin, "", "'" + arg + "' is not of the form key.path=value",
                                             "e.g. " + origin.file + " " + example));
    return std::nullopt;
  }
  return std::pair(path, arg.substr(eq + 1));
}

void apply_set_overrides(Node& root, const std::vector<std::string>& overrides, std::vector<Diagnostic>& errors) {
  const Origin origin{"--set", 0, 0};
  for (const auto& arg : overrides) {
    const auto parsed = split_argument(arg, origin, "tpu.zone=us-central2-b", errors);
    if (!parsed) {
      continue;
    }
    const auto& [path, text] = *parsed;
    set_path(root, path, parse_argument_value(text, origin, path, errors), origin, errors);
  }
}

// One swept key and its values.
struct SweepAxis {
  std::string path;
  std::vector<Node> values;
  Origin origin;
};

void add_axis(std::vector<SweepAxis>& axes, SweepAxis axis, const std::string& shown_path, Problems& p, bool replace) {
  if (auto problem = detail::check_key_path(axis.path)) {
    p.error(axis.origin, shown_path, problem->message, problem->hint);
    return;
  }
  if (axis.values.empty()) {
    p.error(axis.origin, shown_path, "empty list of values", "a sweep needs at least one value");
    return;
  }
  for (auto& existing : axes) {
    if (existing.path == axis.path) {
      if (!replace) {
        p.error(axis.origin, shown_path, "swept twice");
      } else {
        existing = std::move(axis);
      }
      return;
    }
  }
  axes.push_back(std::move(axis));
}

void flatten_sweep(const Node& node, const std::string& prefix, std::vector<SweepAxis>& axes, Problems& p) {
  for (const auto& entry : node.entries) {
    const std::string path = join_path(prefix, entry.key);
    const std::string shown = "sweep." + path;
    if (entry.value.is_mapping()) {
      flatten_sweep(entry.value, path, axes, p);
    } else if (entry.value.is_sequence()) {
      add_axis(axes, SweepAxis{path, entry.value.items, entry.key_origin}, shown, p, false);
    } else {
      p.error(entry.value.origin, shown, "expected a list of values, got " + detail::describe_kind(entry.value),
              "e.g. vars.lr: [0.1, 0.01]");
    }
  }
}

std::vector<SweepAxis> collect_sweeps(Node& root, const std::vector<std::string>& args, Problems& p) {
  std::vector<SweepAxis> axes;
  if (const Entry* entry = root.find("sweep")) {
    if (entry->value.is_mapping()) {
      flatten_sweep(entry->value, "", axes, p);
    } else if (!entry->value.is_null()) {
      p.error(entry->value.origin, "sweep",
              "expected a mapping from key paths to lists of values, got " + detail::describe_kind(entry->value),
              "e.g. sweep: {vars.lr: [0.1, 0.01]}");
    }
    root.erase("sweep");
  }
  const Origin origin{"--sweep", 0, 0};
  for (const auto& arg : args) {
    const auto parsed = split_argument(arg, origin, "vars.lr=0.1,0.01", p.errors);
    if (!parsed) {
      continue;
    }
    const auto& [path, text] = *parsed;
    SweepAxis axis{path, {}, origin};
    const std::string_view trimmed = util::trim(text);
    if (trimmed.starts_with('[')) {
      Node list = parse_argument_value(std::string(trimmed), origin, path, p.errors);
      if (list.is_sequence()) {
        axis.values = list.items;
      }
    } else if (!trimmed.empty()) {
      for (const auto& item : util::split(text, ',')) {
        axis.values.push_back(parse_argument_value(std::string(util::trim(item)), origin, path, p.errors));
      }
    }
    add_axis(axes, std::move(axis), path, p, true);
  }
  return axes;
}

// ---- Output ----

json document(const JobConfig& c, Purpose purpose, const std::optional<std::string>& api_key_reference) {
  const auto s = [&](const std::string& text) -> json {
    return purpose == Purpose::snapshot ? detail::escape_references(text) : text;
  };
  const auto opt = [&](const std::string& text) -> json { return text.empty() ? json(nullptr) : s(text); };
  const auto list = [&](const std::vector<std::string>& items) {
    json out = json::array();
    for (const auto& item : items) {
      out.push_back(s(item));
    }
    return out;
  };
  const auto map = [&](const std::map<std::string, std::string>& items) {
    json out = json::object();
    for (const auto& [key, value] : items) {
      out[key] = s(value);
    }
    return out;
  };

  json doc = json::object();
  doc["job"] = json{{"name", s(c.job.name)},
                    {"env_type", to_string(c.job.env_type)},
                    {"loop", c.job.loop},
                    {"remote_user", opt(c.job.remote_user)}};
  const TpuSection& t = c.tpu;
  json tpu = json::object();
  tpu["allocation_mode"] = to_string(t.allocation_mode);
  tpu["accelerator"] = t.accelerator.name;
  tpu["name"] = s(t.name);
  tpu["zone"] = s(t.zone);
  tpu["version"] = s(t.version);
  tpu["pricing"] = to_string(t.pricing);
  tpu["startup_script"] = t.startup_script ? s(*t.startup_script) : json(nullptr);
  tpu["tags"] = list(t.tags);
  tpu["metadata"] = map(t.metadata);
  tpu["labels"] = map(t.labels);
  tpu["flags"] = list(t.flags);
  tpu["queue_timeout"] =
      t.queue_timeout_seconds ? json(detail::exact_duration(*t.queue_timeout_seconds)) : json(nullptr);
  tpu["network"] = opt(t.network);
  tpu["subnetwork"] = opt(t.subnetwork);
  tpu["service_account"] = opt(t.service_account);
  tpu["reservation"] = opt(t.reservation);
  tpu["reserved"] = t.reserved;
  tpu["internal_ips"] = t.internal_ips;
  tpu["keep_on_success"] = t.keep_on_success;
  doc["tpu"] = tpu;
  doc["gcsfuse"] = c.gcsfuse ? json{{"bucket_name", s(c.gcsfuse->bucket_name)},
                                    {"mount_path", s(c.gcsfuse->mount_path)},
                                    {"flags", list(c.gcsfuse->flags)}}
                             : json(nullptr);
  if (c.ssh) {
    json identities = json::array();
    for (const auto& identity : c.ssh->identities) {
      identities.push_back(json{{"private_key", s(identity.private_key)},
                                {"public_key", opt(identity.public_key)},
                                {"config_entry", opt(identity.config_entry)}});
    }
    doc["ssh"] = json{{"private_key", opt(c.ssh->private_key)}, {"identities", identities}};
  } else {
    doc["ssh"] = nullptr;
  }
  doc["docker"] = c.docker ? json{{"image", opt(c.docker->image)},
                                  {"flags", list(c.docker->flags)},
                                  {"env_vars", list(c.docker->env_vars)},
                                  {"mount_dirs", list(c.docker->mount_dirs)},
                                  {"workdir", opt(c.docker->workdir)}}
                           : json(nullptr);
  doc["conda"] =
      c.conda ? json{{"name", opt(c.conda->name)}, {"config_file", opt(c.conda->config_file)}} : json(nullptr);
  doc["venv"] = c.venv ? json{{"name", opt(c.venv->name)},
                              {"requirements_file", opt(c.venv->requirements_file)},
                              {"python", opt(c.venv->python)}}
                       : json(nullptr);
  json workers = "all";
  if (!c.command.workers.all) {
    workers = json(c.command.workers.indices);
  }
  doc["command"] = json{{"cmd", s(c.command.cmd)}, {"workers", workers}};
  const RecoverySection& r = c.recovery;
  doc["recovery"] = json{
      {"max_preemptions", r.max_preemptions ? json(*r.max_preemptions) : json("unlimited")},
      {"max_failures", r.max_failures},
      {"restart_exit_codes", r.restart_exit_codes},
      {"poll_interval", detail::exact_duration(r.poll_interval_seconds)},
      {"backoff", json{{"initial", detail::exact_duration(r.backoff_initial_seconds)},
                       {"max", detail::exact_duration(r.backoff_max_seconds)},
                       {"multiplier", r.backoff_multiplier}}},
  };
  doc["vars"] = map(c.vars);
  if (c.email) {
    // The API key is a secret: the snapshot keeps the reference it came from, output never shows it.
    json api_key = nullptr;
    if (!c.email->api_key.empty()) {
      api_key = purpose == Purpose::snapshot && api_key_reference ? json(*api_key_reference) : json("<redacted>");
    }
    doc["brevo_email"] =
        json{{"api_key", api_key}, {"sender", opt(c.email->sender)}, {"receiver", opt(c.email->receiver)}};
  } else {
    doc["brevo_email"] = nullptr;
  }
  return doc;
}

// The brevo_email.api_key as written, when it is a reference (e.g. ${oc.env:BREVO_API_KEY}).
std::optional<std::string> api_key_reference(const Node& root) {
  const Entry* section = root.find("brevo_email");
  if (section == nullptr || !section->value.is_mapping()) {
    return std::nullopt;
  }
  const Entry* key = section->value.find("api_key");
  if (key == nullptr || !key->value.is_scalar() || !detail::has_reference(key->value.text)) {
    return std::nullopt;
  }
  return key->value.text;
}

[[noreturn]] void fail(std::vector<Diagnostic> errors) {
  detail::sort_by_position(errors);
  throw ConfigError(std::move(errors));
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
  apply_set_overrides(root, options.set_overrides, base.errors);
  std::vector<SweepAxis> axes = collect_sweeps(root, options.sweep_args, base);
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
      set_path(member, axes[a].path, value, value.origin, p.errors);
    }
    if (!suffix.empty()) {
      if (Entry* job = member.find("job"); job != nullptr && job->value.is_mapping()) {
        if (Entry* name = job->value.find("name"); name != nullptr && name->value.is_scalar()) {
          name->value.text += suffix;
        }
      }
    }
    const auto api_key = api_key_reference(member);
    detail::resolve_references(member, detail::ReferenceDefaults{options.default_zone}, p.errors);
    JobConfig config = build_config(p, member, ctx);
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
    config.resolved_yaml = detail::emit_yaml(document(config, Purpose::snapshot, api_key));
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
  return document(config, Purpose::display, std::nullopt).dump(indent);
}

} // namespace jobman::config
