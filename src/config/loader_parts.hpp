// What the parts of the config loader share: the problems found, typed values, Section, the checks on single
// values, the steps that build the model, --set overrides and sweeps, and the document the model is written as.
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "yaml_tree.hpp"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jobman::config::detail {

// Whether a key must be present.
enum class Presence { optional, required };

// What a document is built for: the snapshot stored and read back, or output for people and scripts.
enum class Purpose { snapshot, display };

// The dotted path of `key` under `parent` ("tpu" and "zone" -> "tpu.zone"; just `key` at the top level).
std::string join_path(const std::string& parent, const std::string& key);

// Problems found while building one config.
struct Problems {
  std::vector<Diagnostic> errors;      // Each makes the config invalid.
  std::vector<ConfigWarning> warnings; // Shown, but the config is used.

  // Records an error at `at` for the key `path`.
  void error(const Origin& at, const std::string& path, std::string message, std::string hint = {}) {
    errors.push_back(detail::make_diagnostic(at, path, std::move(message), std::move(hint)));
  }
  // Records a warning at `at` for the key `path`.
  void warn(const Origin& at, const std::string& path, std::string message) {
    warnings.push_back(ConfigWarning{SourceLocation{at.file, at.line, at.column, path}, std::move(message)});
  }
};

// ---- Typed values (loader_values.cpp) ----
// Each returns nullopt for a value whose reference could not be resolved (already reported) and reports any other
// value that is not of its type.

// The text of a scalar.
std::optional<std::string> as_string(Problems& p, const Node& node, const std::string& path);

// true/yes/on or false/no/off, in any case.
std::optional<bool> as_bool(Problems& p, const Node& node, const std::string& path);

// A whole integer in [min, max].
std::optional<long long> as_int(Problems& p, const Node& node, const std::string& path, long long min, long long max);

// A duration ("30s", "5m", "1h30m" or seconds) in seconds, at least `min_seconds`.
std::optional<long long> as_duration(Problems& p, const Node& node, const std::string& path, long long min_seconds);

// A finite number, at least `min`.
std::optional<double> as_double(Problems& p, const Node& node, const std::string& path, double min);

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

// ---- Sections (loader_section.cpp) ----

// A mapping section of the document: reports unknown keys once, then hands out typed values.
class Section {
public:
  // `node` is the section's value (nullptr when absent); `anchor` locates messages about missing keys.
  Section(Problems& p, const Node* node, std::string path, Origin anchor, std::string_view schema_name);

  // The value of a key, or nullptr when the key is absent; a missing required key is reported.
  [[nodiscard]] const Node* get(const std::string& key, Presence presence = Presence::optional) const;

  // Reports a required key that is absent (unless the section itself was already reported as broken).
  void missing(const std::string& key, std::string hint = {}) const;

  // The dotted path of a key in this section.
  [[nodiscard]] std::string path(const std::string& key) const { return join_path(path_, key); }

  // Where a key's value was written, or the section's anchor when it is absent.
  [[nodiscard]] const Origin& origin(const std::string& key) const;

  // A string; null counts as absent.
  std::optional<std::string> str(const std::string& key, Presence presence = Presence::optional) const;

  // A boolean; null counts as absent.
  std::optional<bool> boolean(const std::string& key) const;

  // An integer in [min, max]; null counts as absent.
  std::optional<long long> integer(const std::string& key, long long min, long long max) const;

  // A duration in seconds, at least `min_seconds`; null counts as absent.
  std::optional<long long> duration(const std::string& key, long long min_seconds) const;

  // A value out of a fixed set; null counts as absent.
  template <typename Enum>
  std::optional<Enum> choice(const std::string& key, const std::vector<std::pair<std::string, Enum>>& choices) const {
    const Node* value = get(key);
    return value == nullptr || value->is_null() ? std::nullopt : as_choice(p_, *value, path(key), choices);
  }

  // A list of strings; null is an empty list.
  std::vector<std::string> str_list(const std::string& key) const;

  // A mapping from names to single values; null is an empty map. Each entry is passed to `check`.
  std::map<std::string, std::string> str_map(const std::string& key) const;

  // The section's node, or nullptr when absent, null or not a mapping.
  [[nodiscard]] const Node* node() const { return node_; }
  // True when the section is present as a mapping.
  [[nodiscard]] bool present() const { return node_ != nullptr; }

private:
  Problems& p_;                // Where problems are reported.
  std::string path_;           // The section's dotted path.
  Origin anchor_;              // Where messages about missing keys point.
  const Node* node_ = nullptr; // The section's mapping, or nullptr.
  bool broken_ = false;        // Present but not a mapping (already reported).
};

// ---- Checks on single values (loader_values.cpp) ----

// The form of a vars key: a letter or '_', then letters, digits, '_' and '-' (compiled once).
const std::regex& variable_name_form();

// True when the whole of `text` matches `pattern`.
bool matches(const std::string& text, const std::regex& pattern);

// Reports a label whose key or value GCP would refuse.
void check_label(Problems& p, const Origin& key_at, const Origin& value_at, const std::string& path,
                 const std::string& key, const std::string& value);

// Reports a network tag GCP would refuse.
void check_tag(Problems& p, const Origin& at, const std::string& path, const std::string& tag);

// The worker indices a slice has, for hints: "1 host: 0", "4 hosts: 0-3".
std::string hosts_text(int hosts);

// ---- Building the model (loader_build_sections.cpp, loader_build_config.cpp) ----

// Inputs to building one config besides the document.
struct BuildContext {
  std::string file;               // Display name of the config.
  std::filesystem::path base_dir; // Directory relative paths are resolved against.
  std::string default_zone;       // Zone when the config has none.
  bool zone_optional = false;     // No zone is no problem (a task for a worker in any zone).
};

// command.workers: "all" (also when absent), one index or a list of indices that exist on the accelerator.
WorkerSelection build_workers(Problems& p, const Node* node, const std::string& path,
                              const std::optional<AcceleratorType>& accelerator);

// The job section.
void build_job(Problems& p, const Section& s, JobSection& out);

// The tpu section, its gcloud flags included; returns the accelerator when it is valid.
std::optional<AcceleratorType> build_tpu(Problems& p, const Section& s, const BuildContext& ctx, const JobSection& job,
                                         TpuSection& out);

// The recovery section; `file_origin` locates messages when the section is absent, `loop` is job.loop.
void build_recovery(Problems& p, const Section& s, const Origin& file_origin, bool loop, RecoverySection& out);

// The whole config from a document whose references are resolved; problems go to `p`.
JobConfig build_config(Problems& p, const Node& root, const BuildContext& ctx);

// ---- Overrides and sweeps (loader_overrides.cpp) ----

// Puts `value` at a dotted path, creating mappings on the way. False (reported) when the path crosses a value.
bool set_path(Node& root, const std::string& path, Node value, const Origin& origin, std::vector<Diagnostic>& errors);

// Applies each "key.path=value" of --set to the document.
void apply_set_overrides(Node& root, const std::vector<std::string>& overrides, std::vector<Diagnostic>& errors);

// One swept key and its values.
struct SweepAxis {
  std::string path;         // Dotted key path.
  std::vector<Node> values; // In the order given.
  Origin origin;            // Where the sweep of this key was written.
};

// The swept keys: those of the document's sweep section (which is removed from `root`), then those of the --sweep
// arguments, each of which replaces an axis for the same key.
std::vector<SweepAxis> collect_sweeps(Node& root, const std::vector<std::string>& args, Problems& p);

// ---- Output (loader_document.cpp) ----

// The config as a JSON document in the layout of a config file. A brevo_email.api_key that is set is written as
// `api_key_reference` in a snapshot that has one, and as "<redacted>" otherwise.
nlohmann::ordered_json document(const JobConfig& c, Purpose purpose,
                                const std::optional<std::string>& api_key_reference);

// The brevo_email.api_key as written, when it is a reference (e.g. ${oc.env:BREVO_API_KEY}).
std::optional<std::string> api_key_reference(const Node& root);

} // namespace jobman::config::detail
