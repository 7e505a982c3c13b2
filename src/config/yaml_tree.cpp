#include "yaml_tree.hpp"

#include "jobman/util/strings.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

namespace jobman::config::detail {

const Entry* Node::find(std::string_view key) const {
  for (const auto& entry : entries) {
    if (entry.key == key) {
      return &entry;
    }
  }
  return nullptr;
}

Entry* Node::find(std::string_view key) {
  for (auto& entry : entries) {
    if (entry.key == key) {
      return &entry;
    }
  }
  return nullptr;
}

void Node::erase(std::string_view key) {
  std::erase_if(entries, [&](const Entry& entry) { return entry.key == key; });
}

Node make_scalar(std::string text, Origin origin) {
  Node node;
  node.kind = Node::Kind::scalar;
  node.text = std::move(text);
  node.origin = std::move(origin);
  return node;
}

Node make_mapping(Origin origin) {
  Node node;
  node.kind = Node::Kind::mapping;
  node.origin = std::move(origin);
  return node;
}

Diagnostic make_diagnostic(const Origin& origin, std::string key_path, std::string message, std::string hint) {
  return Diagnostic{SourceLocation{origin.file, origin.line, origin.column, std::move(key_path)}, std::move(message),
                    std::move(hint)};
}

namespace {

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

Origin origin_of(const YAML::Mark& mark, const std::string& file) {
  if (mark.is_null() || mark.line < 0) {
    return Origin{file, 0, 0};
  }
  return Origin{file, mark.line + 1, mark.column + 1};
}

// Converts yaml-cpp's tree, reporting duplicate and non-scalar keys. `fallback` locates empty values.
Node convert(const YAML::Node& in, const std::string& file, const std::string& path, const Origin* fallback,
             std::vector<Diagnostic>& errors) {
  Node out;
  out.origin = origin_of(in.Mark(), file);
  switch (in.Type()) {
  case YAML::NodeType::Undefined:
  case YAML::NodeType::Null:
    out.kind = Node::Kind::null;
    // An empty value ("key:") carries the mark of the next token; point at its key instead.
    if (fallback != nullptr && (out.origin.line != fallback->line || out.origin.line == 0)) {
      out.origin = *fallback;
    }
    break;
  case YAML::NodeType::Scalar:
    out.kind = Node::Kind::scalar;
    out.text = in.Scalar();
    break;
  case YAML::NodeType::Sequence: {
    out.kind = Node::Kind::sequence;
    std::size_t index = 0;
    for (const auto& item : in) {
      out.items.push_back(convert(item, file, path + "[" + std::to_string(index) + "]", &out.origin, errors));
      ++index;
    }
    break;
  }
  case YAML::NodeType::Map: {
    out.kind = Node::Kind::mapping;
    std::vector<Node> merged;                          // The values of `<<: *anchor` merge keys, in order.
    std::unordered_map<std::string, std::size_t> seen; // Key to its index in out.entries.
    const auto add = [&](Entry entry) {
      seen.emplace(entry.key, out.entries.size());
      out.entries.push_back(std::move(entry));
    };
    for (auto it = in.begin(); it != in.end(); ++it) {
      const Origin key_origin = origin_of(it->first.Mark(), file);
      if (!it->first.IsScalar()) {
        const Node key = convert(it->first, file, path, &key_origin, errors);
        errors.push_back(make_diagnostic(key_origin, path, "a key must be a plain name, not " + describe_kind(key)));
        continue;
      }
      const std::string key = it->first.Scalar();
      if (key == "<<" && it->first.Tag() != "!") {
        Node source = convert(it->second, file, path, &key_origin, errors);
        if (source.is_mapping()) {
          merged.push_back(std::move(source));
        } else if (source.is_sequence() && std::all_of(source.items.begin(), source.items.end(),
                                                       [](const Node& n) { return n.is_mapping(); })) {
          merged.insert(merged.end(), source.items.begin(), source.items.end());
        } else {
          errors.push_back(
              make_diagnostic(key_origin, path,
                              "a merge key (<<) takes a mapping or a list of mappings, not " + describe_kind(source)));
        }
        continue;
      }
      const std::string key_path = child_path(path, key);
      if (const auto first = seen.find(key); first != seen.end()) {
        errors.push_back(
            make_diagnostic(key_origin, key_path, "duplicate key",
                            "first defined at line " + std::to_string(out.entries[first->second].key_origin.line)));
        continue;
      }
      add(Entry{key, key_origin, convert(it->second, file, key_path, &key_origin, errors)});
    }
    // As YAML's merge key has it: keys written in the mapping win, then the sources in order.
    for (const Node& source : merged) {
      for (const Entry& entry : source.entries) {
        if (!seen.contains(entry.key)) {
          add(entry);
        }
      }
    }
    break;
  }
  }
  return out;
}

// A tab in the leading whitespace of the line, if any: its 0-based column.
std::optional<int> leading_tab(std::string_view line) {
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\t') {
      return static_cast<int>(i);
    }
    if (line[i] != ' ') {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// The most values a document may have, aliases expanded: far above any config, far below what exhausts memory.
constexpr std::size_t max_yaml_values = 100'000;

// The parser's events for the first documents: how many there are (up to 2), where the second begins, and how many
// values the first has once aliases are expanded (saturating above max_yaml_values).
class DocumentShape final : public YAML::EventHandler {
public:
  int documents = 0;
  YAML::Mark second_document = YAML::Mark::null_mark(); // Where the second document's root value begins.
  std::size_t values = 0;                               // In the first document.
  std::optional<YAML::Mark> cycle; // An alias inside the collection it names, in the first document.

  void OnDocumentStart(const YAML::Mark& /*mark*/) override { ++documents; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { value(mark, anchor, 1); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (documents == 1 && !cycle &&
        std::any_of(open_.begin(), open_.end(), [&](const auto& open) { return open.first == anchor; })) {
      cycle = mark; // yaml-cpp makes this node contain itself.
    }
    const auto it = sizes_.find(anchor);
    add(mark, it == sizes_.end() ? 1 : it->second);
  }
  void OnScalar(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                const std::string& /*value*/) override {
    value(mark, anchor, 1);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value /*style*/) override {
    start(mark, anchor);
  }
  void OnSequenceEnd() override { end(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value /*style*/) override {
    start(mark, anchor);
  }
  void OnMapEnd() override { end(); }

private:
  void add(const YAML::Mark& mark, std::size_t count) {
    if (documents == 2 && second_document.is_null()) {
      second_document = mark;
    }
    if (documents == 1) {
      values = std::min(values + count, max_yaml_values + 1);
    }
  }
  void value(const YAML::Mark& mark, YAML::anchor_t anchor, std::size_t count) {
    add(mark, count);
    if (anchor != YAML::NullAnchor) {
      sizes_[anchor] = count;
    }
  }
  void start(const YAML::Mark& mark, YAML::anchor_t anchor) {
    add(mark, 1);
    open_.emplace_back(anchor, values);
  }
  void end() {
    if (open_.empty()) {
      return;
    }
    const auto [anchor, before] = open_.back();
    open_.pop_back();
    if (anchor != YAML::NullAnchor) {
      sizes_[anchor] = values - before + 1;
    }
  }

  std::map<YAML::anchor_t, std::size_t> sizes_;              // Values under each anchor, itself included.
  std::vector<std::pair<YAML::anchor_t, std::size_t>> open_; // Collections being read: anchor, values before them.
};

// yaml-cpp's messages for tabs are obscure ("illegal map value"); name the tab when one is nearby.
Diagnostic syntax_error(const YAML::Exception& e, const std::string& text, const std::string& file) {
  const auto lines = [&] {
    std::vector<std::string_view> out;
    std::string_view rest = text;
    while (true) {
      const auto pos = rest.find('\n');
      out.push_back(rest.substr(0, pos));
      if (pos == std::string_view::npos) {
        return out;
      }
      rest.remove_prefix(pos + 1);
    }
  }();
  if (!e.mark.is_null() && e.mark.line >= 0) {
    for (int line = e.mark.line; line >= 0 && line >= e.mark.line - 1; --line) {
      if (static_cast<std::size_t>(line) < lines.size()) {
        if (auto column = leading_tab(lines[static_cast<std::size_t>(line)])) {
          return make_diagnostic(Origin{file, line + 1, *column + 1}, "",
                                 "YAML syntax error: tab character in indentation", "YAML indents with spaces only");
        }
      }
    }
  }
  return make_diagnostic(origin_of(e.mark, file), "", "YAML syntax error: " + e.msg);
}

} // namespace

std::size_t invalid_utf8_offset(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    unsigned char low = 0x80;  // Bounds of the second byte, which rule out overlong forms, surrogates and
    unsigned char high = 0xbf; // code points past U+10FFFF.
    if (byte >= 0xc2 && byte <= 0xdf) {
      length = 2;
    } else if (byte >= 0xe0 && byte <= 0xef) {
      length = 3;
      low = byte == 0xe0 ? 0xa0 : 0x80;
      high = byte == 0xed ? 0x9f : 0xbf;
    } else if (byte >= 0xf0 && byte <= 0xf4) {
      length = 4;
      low = byte == 0xf0 ? 0x90 : 0x80;
      high = byte == 0xf4 ? 0x8f : 0xbf;
    } else {
      return i;
    }
    if (i + length > text.size()) {
      return i;
    }
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if (k == 1 ? (next < low || next > high) : (next < 0x80 || next > 0xbf)) {
        return i;
      }
    }
    i += length;
  }
  return std::string_view::npos;
}

Node parse_yaml(const std::string& text, const std::string& file, std::vector<Diagnostic>& errors) {
  // Every value ends up in JSON (the store, --json), which holds UTF-8 only. A NUL byte is refused too: YAML text has
  // none, and yaml-cpp reads text that starts with one as UTF-16 or UTF-32, whose lone surrogates it passes on as
  // bytes that are not UTF-8.
  const auto nul = text.find('\0');
  if (const auto bad = std::min(invalid_utf8_offset(text), nul); bad != std::string_view::npos) {
    const auto line_start = text.rfind('\n', bad == 0 ? 0 : bad - 1);
    const std::size_t column = line_start == std::string::npos || bad == 0 ? bad : bad - line_start - 1;
    static const char* hex = "0123456789abcdef";
    const auto byte = static_cast<unsigned char>(text[bad]);
    errors.push_back(make_diagnostic(
        Origin{file,
               static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n')) + 1,
               static_cast<int>(column) + 1},
        "",
        bad == nul ? std::string("a NUL byte, which YAML text cannot hold")
                   : std::string("not UTF-8 text: byte 0x") + hex[byte >> 4] + hex[byte & 0xf],
        bad == nul ? "remove it, and save the file as UTF-8" : "save the file as UTF-8"));
    return Node{Node::Kind::null, {}, {}, {}, Origin{file, 0, 0}, false};
  }
  // yaml-cpp's LoadAll never returns for a ',' outside a flow collection after a document (it yields empty documents
  // forever), so a first pass over the events counts the documents, stopping at the second, and sizes the tree.
  DocumentShape shape;
  YAML::Node document;
  try {
    std::istringstream stream(text);
    YAML::Parser parser(stream);
    while (shape.documents < 2 && parser.HandleNextDocument(shape)) {
    }
    if (shape.documents > 0 && shape.values <= max_yaml_values && !shape.cycle) {
      document = YAML::Load(text);
    }
  } catch (const YAML::Exception& e) {
    errors.push_back(syntax_error(e, text, file));
    return Node{Node::Kind::null, {}, {}, {}, Origin{file, 0, 0}, false};
  }
  if (shape.documents == 0) {
    return Node{Node::Kind::null, {}, {}, {}, Origin{file, 0, 0}, false};
  }
  if (shape.documents > 1) {
    const Origin at = origin_of(shape.second_document, file);
    const auto offset = static_cast<std::size_t>(std::max(0, shape.second_document.pos));
    if (offset < text.size() && text[offset] == ',') {
      errors.push_back(make_diagnostic(at, "", "YAML syntax error: ',' outside a flow collection",
                                       "a ',' separates items only inside [...] or {...}"));
    } else {
      errors.push_back(make_diagnostic(at, "", "a config holds one YAML document, found a second one",
                                       "remove the '---' separator"));
    }
  }
  if (shape.cycle) {
    errors.push_back(make_diagnostic(origin_of(*shape.cycle, file), "",
                                     "an alias (*name) inside the value it names would make it contain itself"));
    return Node{Node::Kind::null, {}, {}, {}, Origin{file, 0, 0}, false};
  }
  if (shape.values > max_yaml_values) {
    errors.push_back(make_diagnostic(Origin{file, 1, 1}, "",
                                     "the document has more than " + std::to_string(max_yaml_values) +
                                         " values once its aliases (*name) are expanded",
                                     "write the values out, or use fewer aliases"));
    return Node{Node::Kind::null, {}, {}, {}, Origin{file, 0, 0}, false};
  }
  const Origin top{file, 1, 1};
  return convert(document, file, "", &top, errors);
}

void set_origin(Node& node, const Origin& origin) {
  node.origin = origin;
  for (auto& item : node.items) {
    set_origin(item, origin);
  }
  for (auto& entry : node.entries) {
    entry.key_origin = origin;
    set_origin(entry.value, origin);
  }
}

std::string describe_kind(const Node& node) {
  switch (node.kind) {
  case Node::Kind::null: return "null";
  case Node::Kind::scalar: return "'" + node.text + "'";
  case Node::Kind::sequence: return "a list";
  case Node::Kind::mapping: return "a mapping";
  }
  return "?";
}

std::string flow_text(const Node& node) {
  switch (node.kind) {
  case Node::Kind::null: return "null";
  case Node::Kind::scalar: return node.text;
  case Node::Kind::sequence: {
    std::string out = "[";
    for (std::size_t i = 0; i < node.items.size(); ++i) {
      out += (i > 0 ? ", " : "") + flow_text(node.items[i]);
    }
    return out + "]";
  }
  case Node::Kind::mapping: {
    std::string out = "{";
    for (std::size_t i = 0; i < node.entries.size(); ++i) {
      out += (i > 0 ? ", " : "") + node.entries[i].key + ": " + flow_text(node.entries[i].value);
    }
    return out + "}";
  }
  }
  return {};
}

void sort_by_position(std::vector<Diagnostic>& diagnostics) {
  std::stable_sort(diagnostics.begin(), diagnostics.end(), [](const Diagnostic& a, const Diagnostic& b) {
    const auto key = [](const Diagnostic& d) {
      return std::pair(d.where.line == 0 ? INT_MAX : d.where.line, d.where.line == 0 ? 0 : d.where.column);
    };
    return key(a) < key(b);
  });
}

// ---- Emitting ----

namespace {

bool is_plain_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '/' || c == '-' || c == '+' || c == '=' || c == '@' || c == '~' || c == ' ';
}

// True when a plain scalar would read back as something other than a string in YAML 1.1 or 1.2.
bool looks_typed(std::string_view text) {
  static const std::set<std::string, std::less<>> words{"null", "~", "true", "false", "yes",   "no",    "on",
                                                        "off",  "y", "n",    ".inf",  "-.inf", "+.inf", ".nan"};
  if (words.contains(util::to_lower(text))) {
    return true;
  }
  const char first = text.front();
  const bool numeric_start =
      (first >= '0' && first <= '9') || ((first == '-' || first == '+' || first == '.') && text.size() > 1 &&
                                         ((text[1] >= '0' && text[1] <= '9') || text[1] == '.'));
  return numeric_start && text.find_first_not_of("0123456789abcdefABCDEFxXoO._+-:") == std::string_view::npos;
}

bool plain_safe(std::string_view text) {
  if (text.empty() || text.front() == ' ' || text.back() == ' ' || text.front() == '@' || text == "-" ||
      text.starts_with("- ") || text.find("  ") != std::string_view::npos) {
    return false;
  }
  return std::all_of(text.begin(), text.end(), is_plain_char) && !looks_typed(text);
}

std::string double_quoted(std::string_view text) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    case '\r': out += "\\r"; break;
    default:
      if (byte < 0x20 || byte == 0x7f) {
        out += "\\x";
        out += hex[byte >> 4];
        out += hex[byte & 0xf];
      } else {
        out += c;
      }
    }
  }
  return out + "\"";
}

std::string string_text(std::string_view text) {
  return plain_safe(text) ? std::string(text) : double_quoted(text);
}

std::string scalar_text(const nlohmann::ordered_json& value) {
  if (value.is_null()) {
    return "null";
  }
  if (value.is_string()) {
    return string_text(value.get_ref<const std::string&>());
  }
  return value.dump();
}

bool is_scalar(const nlohmann::ordered_json& value) {
  return !value.is_object() && !value.is_array();
}

// A literal block (" |2-" and its lines, content indented by indent + 2), when it reads back exactly.
std::optional<std::string> literal_block(const std::string& text, int indent) {
  if (text.find_first_not_of(" \t\n") == std::string::npos) {
    return std::nullopt;
  }
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\n' && c != '\t') || byte == 0x7f) {
      return std::nullopt;
    }
  }
  std::string body = text;
  std::string chomp;
  if (!body.ends_with('\n')) {
    chomp = "-";
  } else if (body.ends_with("\n\n")) {
    chomp = "+";
  }
  if (body.ends_with('\n')) {
    body.pop_back();
  }
  const auto render = [&](int content_indent) {
    std::string out = " |2" + chomp + "\n";
    std::size_t start = 0;
    while (true) {
      const auto end = body.find('\n', start);
      const std::string_view line = std::string_view(body).substr(start, end == std::string::npos ? end : end - start);
      if (!line.empty()) {
        out += std::string(static_cast<std::size_t>(content_indent), ' ');
        out += line;
      }
      out += '\n';
      if (end == std::string::npos) {
        return out;
      }
      start = end + 1;
    }
  };
  // Check the rendering by reading it back at the top level, where the indicator means the same.
  try {
    const YAML::Node check = YAML::Load("k:" + render(2));
    if (!check["k"].IsScalar() || check["k"].Scalar() != text) {
      return std::nullopt;
    }
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
  return render(indent + 2);
}

std::optional<std::string> flow_sequence(const nlohmann::ordered_json& array) {
  std::string out = "[";
  for (std::size_t i = 0; i < array.size(); ++i) {
    const auto& item = array[i];
    if (!is_scalar(item) || (item.is_string() && item.get_ref<const std::string&>().find('\n') != std::string::npos)) {
      return std::nullopt;
    }
    out += (i > 0 ? ", " : "") + scalar_text(item);
  }
  out += "]";
  if (out.size() > 80) {
    return std::nullopt;
  }
  return out;
}

void emit_mapping(std::string& out, const nlohmann::ordered_json& object, int indent);

void emit_sequence(std::string& out, const nlohmann::ordered_json& array, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  for (const auto& item : array) {
    if ((item.is_object() || item.is_array()) && !item.empty()) {
      std::string nested;
      if (item.is_object()) {
        emit_mapping(nested, item, indent + 2);
      } else {
        emit_sequence(nested, item, indent + 2);
      }
      out += pad + "- " + nested.substr(static_cast<std::size_t>(indent) + 2);
    } else if (item.is_object()) {
      out += pad + "- {}\n";
    } else if (item.is_array()) {
      out += pad + "- []\n";
    } else {
      out += pad + "- " + scalar_text(item) + "\n";
    }
  }
}

void emit_mapping(std::string& out, const nlohmann::ordered_json& object, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  for (const auto& [key, value] : object.items()) {
    out += pad + string_text(key) + ":";
    if (value.is_object()) {
      if (value.empty()) {
        out += " {}\n";
      } else {
        out += "\n";
        emit_mapping(out, value, indent + 2);
      }
    } else if (value.is_array()) {
      if (auto flow = flow_sequence(value)) {
        out += " " + *flow + "\n";
      } else {
        out += "\n";
        emit_sequence(out, value, indent + 2);
      }
    } else if (value.is_string() && value.get_ref<const std::string&>().find('\n') != std::string::npos) {
      if (auto block = literal_block(value.get_ref<const std::string&>(), indent)) {
        out += *block;
      } else {
        out += " " + double_quoted(value.get_ref<const std::string&>()) + "\n";
      }
    } else {
      out += " " + scalar_text(value) + "\n";
    }
  }
}

} // namespace

std::string emit_yaml(const nlohmann::ordered_json& document) {
  std::string out;
  if (document.is_object()) {
    emit_mapping(out, document, 0);
  } else if (document.is_array()) {
    emit_sequence(out, document, 0);
  } else {
    out = scalar_text(document) + "\n";
  }
  return out;
}

} // namespace jobman::config::detail
