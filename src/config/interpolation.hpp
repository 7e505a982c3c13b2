// ${section.key} references and ${oc.env:NAME} inside string values, resolved against the document.
#pragma once

#include "jobman/util/error.hpp"
#include "yaml_tree.hpp"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::config::detail {

// What becomes of an ${oc.env:...} call.
enum class EnvironmentCalls {
  resolve, // It takes the variable's value, or its default.
  mark,    // It becomes environment_marker(i), where i indexes `marked`, which gets the call as written.
};

// How references are resolved, and defaults they may fall back on when the document leaves a key out.
struct ReferenceDefaults {
  std::string zone; // Used for ${tpu.zone} when the document has no tpu.zone; empty for none.
  EnvironmentCalls environment = EnvironmentCalls::resolve;
  std::vector<std::string>* marked = nullptr;         // With mark: the calls as written, in marker order.
  std::map<std::string, std::string>* read = nullptr; // With resolve, when set: each variable read and its value.
};

// Replaces every reference in the document's scalars, in place. A whole-value reference to a list or mapping
// copies it; references inside text are replaced by the target's text. Problems (missing keys, cycles,
// unset environment variables) go to `errors`, each once; the values involved are left as written.
void resolve_references(Node& root, const ReferenceDefaults& defaults, std::vector<Diagnostic>& errors);

// The text standing for marked call `index`: private-use characters no config holds, around the index.
std::string environment_marker(std::size_t index);

// Replaces each environment marker in `text` by what `call` gives for the index it holds.
std::string replace_environment_markers(std::string_view text, const std::function<std::string(std::size_t)>& call);

// True when `text` holds an environment marker.
bool has_environment_marker(std::string_view text);

// The variable an ${oc.env:NAME} or ${oc.env:NAME,default} call (as written) names: NAME, trimmed.
std::string environment_variable(std::string_view call);

// What such a call stands for: the variable's value from `lookup`, else the call's default; nullopt when it has
// neither (or names no variable).
std::optional<std::string>
environment_value(std::string_view call, const std::function<std::optional<std::string>(const std::string&)>& lookup);

// True when the text holds a ${a.b} reference or a ${x.y:...} resolver call (escaped ones count).
bool has_reference(std::string_view text);

// The text that resolves to `text` exactly: each ${a.b} or ${x.y:...} it contains is escaped as $${...}.
std::string escape_references(std::string_view text);

} // namespace jobman::config::detail
