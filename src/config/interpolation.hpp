// ${section.key} references and ${oc.env:NAME} inside string values, resolved against the document.
#pragma once

#include "jobman/util/error.hpp"
#include "yaml_tree.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace jobman::config::detail {

// Defaults a reference may fall back on when the document leaves a key out.
struct ReferenceDefaults {
  std::string zone; // Used for ${tpu.zone} when the document has no tpu.zone; empty for none.
};

// Replaces every reference in the document's scalars, in place. A whole-value reference to a list or mapping
// copies it; references inside text are replaced by the target's text. Problems (missing keys, cycles,
// unset environment variables) go to `errors`, each once; the values involved are left as written.
void resolve_references(Node& root, const ReferenceDefaults& defaults, std::vector<Diagnostic>& errors);

// True when the text holds a ${a.b} reference or a ${x.y:...} resolver call (escaped ones count).
bool has_reference(std::string_view text);

// The text that resolves to `text` exactly: each ${a.b} or ${x.y:...} it contains is escaped as $${...}.
std::string escape_references(std::string_view text);

} // namespace jobman::config::detail
