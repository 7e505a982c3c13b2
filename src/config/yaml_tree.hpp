// A YAML document as a plain tree that remembers where every value was written.
#pragma once

#include "jobman/util/error.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::config::detail {

// Where a node or key was written: file (or "--set"/"--sweep"), 1-based line and column (0 when none).
struct Origin {
  std::string file; // As messages name it.
  int line = 0;     // 1-based; 0 for values from the command line.
  int column = 0;   // 1-based; 0 when unknown.
};

struct Entry;

// One YAML value: null, a scalar (kept as its text), a sequence or a mapping (in document order).
struct Node {
  // What the node holds.
  enum class Kind { null, scalar, sequence, mapping };
  Kind kind = Kind::null;
  std::string text;           // Scalar text; empty otherwise.
  std::vector<Node> items;    // Sequence items.
  std::vector<Entry> entries; // Mapping entries, keys distinct, in document order.
  Origin origin;              // Where the value starts.
  bool unresolved = false;    // A reference in it could not be resolved (already reported).

  // True for a null value.
  [[nodiscard]] bool is_null() const { return kind == Kind::null; }
  // True for a scalar.
  [[nodiscard]] bool is_scalar() const { return kind == Kind::scalar; }
  // True for a sequence.
  [[nodiscard]] bool is_sequence() const { return kind == Kind::sequence; }
  // True for a mapping.
  [[nodiscard]] bool is_mapping() const { return kind == Kind::mapping; }
  // The entry with this key in a mapping, or nullptr.
  [[nodiscard]] const Entry* find(std::string_view key) const;
  // The entry with this key in a mapping, or nullptr.
  Entry* find(std::string_view key);
  // Removes the entry with this key from a mapping, if present.
  void erase(std::string_view key);
};

// One key of a mapping with its value.
struct Entry {
  std::string key;
  Origin key_origin; // Where the key was written.
  Node value;
};

// A scalar node with the given text and origin.
Node make_scalar(std::string text, Origin origin);

// An empty mapping node with the given origin.
Node make_mapping(Origin origin);

// The offset of the first byte of `text` that is not part of well-formed UTF-8 (no overlong forms, surrogates or
// code points past U+10FFFF), or npos when it is all UTF-8.
std::size_t invalid_utf8_offset(std::string_view text);

// Parses one YAML document. Text that is not UTF-8 is reported with the line and column of the first bad byte. Syntax
// errors, duplicate keys, non-scalar keys and extra documents are appended to `errors`; an empty document yields a null
// node with line 0.
Node parse_yaml(const std::string& text, const std::string& file, std::vector<Diagnostic>& errors);

// Sets every origin in the subtree (values and keys) to `origin`.
void set_origin(Node& node, const Origin& origin);

// "a string", "a list", "a mapping" or "null", for messages.
std::string describe_kind(const Node& node);

// A compact one-line rendering: the text of a scalar, "[a, b]" or "{k: v}" otherwise.
std::string flow_text(const Node& node);

// A diagnostic at `origin` for `key_path`.
Diagnostic make_diagnostic(const Origin& origin, std::string key_path, std::string message, std::string hint = {});

// Writes a JSON document (objects in their order) as block-style YAML that parse_yaml reads back to the same
// strings; multi-line strings become literal blocks.
std::string emit_yaml(const nlohmann::ordered_json& document);

// Sorts diagnostics into document order (line, then column); those without a line keep their order at the end.
void sort_by_position(std::vector<Diagnostic>& diagnostics);

} // namespace jobman::config::detail
