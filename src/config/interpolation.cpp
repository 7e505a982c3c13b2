#include "interpolation.hpp"

#include "jobman/config/accelerator.hpp"
#include "jobman/util/strings.hpp"
#include "schema.hpp"

#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

namespace jobman::config::detail {

namespace {

// What a ${...} holds: a dotted reference or a resolver call such as oc.env:NAME.
enum class TokenKind { reference, resolver };

// One ${...} found in a text.
struct Token {
  std::size_t end = 0; // Index just past the closing brace.
  TokenKind kind = TokenKind::reference;
  std::string body; // Between the braces.
};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// "a.b", "tpu.name", "ssh.identities.0.private_key": two or more components, the first starting with a letter.
bool is_dotted_path(std::string_view text) {
  if (text.empty() || !((text[0] >= 'a' && text[0] <= 'z') || (text[0] >= 'A' && text[0] <= 'Z') || text[0] == '_')) {
    return false;
  }
  bool has_dot = false;
  char previous = '.';
  for (const char c : text) {
    if (c == '.') {
      if (previous == '.') {
        return false;
      }
      has_dot = true;
    } else if (!is_name_char(c)) {
      return false;
    }
    previous = c;
  }
  return has_dot && previous != '.';
}

// The token at `pos` (text[pos] == '$', text[pos + 1] == '{'); nullopt when what follows is for the shell.
std::optional<Token> token_at(std::string_view text, std::size_t pos) {
  if (pos + 1 >= text.size() || text[pos] != '$' || text[pos + 1] != '{') {
    return std::nullopt;
  }
  // The brace that closes this one: a ${...} may hold others (${oc.env:A,${tpu.zone}}).
  std::size_t close = pos + 2;
  for (int depth = 1; close < text.size(); ++close) {
    if (text[close] == '$' && close + 1 < text.size() && text[close + 1] == '{') {
      ++depth;
      ++close;
    } else if (text[close] == '}' && --depth == 0) {
      break;
    }
  }
  if (close >= text.size()) {
    return std::nullopt;
  }
  const std::string_view body = text.substr(pos + 2, close - pos - 2);
  // ${.key} and ${..key}: relative to the mapping the value is in, and to its parent.
  const auto dots = body.find_first_not_of('.');
  if (dots != std::string_view::npos && dots > 0 &&
      (is_dotted_path(body.substr(dots)) || is_dotted_path("a." + std::string(body.substr(dots))))) {
    return Token{close + 1, TokenKind::reference, std::string(body)};
  }
  if (is_dotted_path(body)) {
    return Token{close + 1, TokenKind::reference, std::string(body)};
  }
  const auto colon = body.find(':');
  if (colon != std::string_view::npos && is_dotted_path(body.substr(0, colon))) {
    return Token{close + 1, TokenKind::resolver, std::string(body)};
  }
  return std::nullopt;
}

std::string unquote(std::string_view text) {
  text = util::trim(text);
  if (text.size() >= 2 && (text.front() == '\'' || text.front() == '"') && text.back() == text.front()) {
    text = text.substr(1, text.size() - 2);
  }
  return std::string(text);
}

// How much resolving references may add to a document: far more than any config needs, little enough that a few
// lines of references doubling each other cannot exhaust memory.
constexpr std::size_t max_growth_bytes = std::size_t{1} << 20;

// The bytes a value holds, counting 16 for each node, for the growth budget.
std::size_t size_of(const Node& node) {
  std::size_t size = node.text.size() + 16;
  for (const auto& item : node.items) {
    size += size_of(item);
  }
  for (const auto& entry : node.entries) {
    size += entry.key.size() + size_of(entry.value);
  }
  return size;
}

// Resolves references depth first, remembering each node's state so that every node is resolved once
// and every problem reported once.
class Resolver {
public:
  Resolver(Node& root, const ReferenceDefaults& defaults, std::vector<Diagnostic>& errors)
      : root_(root), defaults_(defaults), errors_(errors) {}

  void run() { resolve(root_, "", ""); }

private:
  enum class State { active, done, failed };
  struct Frame {
    const Node* node;
    std::string path;    // Dotted, as references write it.
    std::string display; // As diagnostics write it ("ssh.identities[0]").
  };

  bool resolve(Node& node, const std::string& path, const std::string& display) {
    if (const auto it = state_.find(&node); it != state_.end()) {
      if (it->second == State::active) {
        report_cycle(node, path);
      }
      return it->second == State::done;
    }
    state_[&node] = State::active;
    stack_.push_back(Frame{&node, path, display});
    bool ok = true;
    switch (node.kind) {
    case Node::Kind::null: break;
    case Node::Kind::scalar:
      ok = resolve_scalar(node, display);
      node.unresolved = !ok;
      break;
    case Node::Kind::sequence:
      for (std::size_t i = 0; i < node.items.size(); ++i) {
        const std::string index = std::to_string(i);
        std::string item_display = display;
        item_display.append("[").append(index).append("]");
        ok = resolve(node.items[i], join(path, index), item_display) && ok;
      }
      break;
    case Node::Kind::mapping:
      for (auto& entry : node.entries) {
        ok = resolve(entry.value, join(path, entry.key), join(display, entry.key)) && ok;
      }
      break;
    }
    stack_.pop_back();
    state_[&node] = ok ? State::done : State::failed;
    return ok;
  }

  static std::string join(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
  }

  void report_cycle(const Node& node, const std::string& path) {
    std::size_t start = 0;
    while (start < stack_.size() && stack_[start].node != &node) {
      ++start;
    }
    if (start == stack_.size() || in_reported_cycle_.contains(&node)) {
      return;
    }
    std::string chain;
    for (std::size_t i = start; i < stack_.size(); ++i) {
      chain += stack_[i].path + " -> ";
      in_reported_cycle_.insert(stack_[i].node);
    }
    chain += path;
    errors_.push_back(make_diagnostic(node.origin, stack_[start].display, "cyclic reference: " + chain));
  }

  void error(const Node& at, const std::string& display, std::string message, std::string hint = {}) {
    errors_.push_back(make_diagnostic(at.origin, display, std::move(message), std::move(hint)));
  }

  // Counts `bytes` more against the growth budget; false, reported once, when they do not fit.
  bool grow(const Node& at, const std::string& display, std::size_t bytes) {
    if (bytes <= max_growth_bytes - growth_) {
      growth_ += bytes;
      return true;
    }
    if (!too_large_reported_) {
      too_large_reported_ = true;
      error(at, display, "resolving references would make the config more than 1 MiB larger",
            "references that repeat others grow the text at each step; write the values out instead");
    }
    growth_ = max_growth_bytes;
    return false;
  }

  void mark_done(const Node& node) {
    state_[&node] = State::done;
    for (const auto& item : node.items) {
      mark_done(item);
    }
    for (const auto& entry : node.entries) {
      mark_done(entry.value);
    }
  }

  bool resolve_scalar(Node& node, const std::string& display) {
    const std::string text = node.text;
    if (text.find('$') == std::string::npos) {
      return true;
    }
    // A value that is exactly one reference takes the target's type (a list stays a list).
    if (auto whole = token_at(text, 0); whole && whole->end == text.size() && whole->kind == TokenKind::reference) {
      const Node* target = lookup(absolute(whole->body), node, display);
      if (target == nullptr || !grow(node, display, size_of(*target))) {
        return false;
      }
      Node copy = *target;
      copy.origin = node.origin;
      node = std::move(copy);
      mark_done(node);
      return finish_version(node, display);
    }
    std::string out;
    bool ok = true;
    std::size_t i = 0;
    while (i < text.size()) {
      // \${ is a literal ${ (a shell's ${HOME}, as the Python jobman's configs must write it); \\${x} is a
      // backslash before x's value.
      if (text.compare(i, 3, "\\${") == 0) {
        out += "${";
        i += 3;
        continue;
      }
      if (text.compare(i, 4, "\\\\${") == 0) {
        out += '\\';
        i += 2;
        continue;
      }
      if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '$') {
        if (auto escaped = token_at(text, i + 1)) {
          out.append(text, i + 1, escaped->end - i - 1);
          i = escaped->end;
          continue;
        }
      }
      if (auto token = token_at(text, i)) {
        if (auto value = expand(*token, node, display)) {
          if (out.size() + value->size() > text.size() + max_growth_bytes - growth_) {
            return grow(node, display, out.size() + value->size()); // Reports it.
          }
          out += *value;
        } else {
          ok = false;
        }
        i = token->end;
        continue;
      }
      out += text[i++];
    }
    if (!ok || !grow(node, display, out.size() > text.size() ? out.size() - text.size() : 0)) {
      return false;
    }
    node.text = std::move(out);
    return finish_version(node, display);
  }

  // The text a token inside a longer value stands for; nullopt after reporting (or on a reported failure).
  std::optional<std::string> expand(const Token& token, const Node& at, const std::string& display) {
    const std::string written = "${" + token.body + "}";
    if (token.kind == TokenKind::reference) {
      const Node* target = lookup(absolute(token.body), at, display);
      if (target == nullptr) {
        return std::nullopt;
      }
      if (target->is_sequence() || target->is_mapping()) {
        error(at, display, "cannot put " + written + " inside text: it is " + describe_kind(*target),
              "a value that is only " + written + " takes its type");
        return std::nullopt;
      }
      return target->text;
    }
    const auto colon = token.body.find(':');
    const std::string resolver = token.body.substr(0, colon);
    const std::string args = token.body.substr(colon + 1);
    if (resolver == "oc.select") {
      // ${oc.select:key,default}: the key's value when the document has it, else the default.
      const auto comma = args.find(',');
      const std::string key = absolute(std::string(util::trim(std::string_view(args).substr(0, comma))));
      if (present(key)) {
        const Node* target = lookup(key, at, display);
        if (target == nullptr) {
          return std::nullopt;
        }
        if (target->is_sequence() || target->is_mapping()) {
          error(at, display, "cannot put " + written + " inside text: it is " + describe_kind(*target));
          return std::nullopt;
        }
        return target->text;
      }
      return with_references(comma == std::string::npos ? "" : unquote(std::string_view(args).substr(comma + 1)), at,
                             display);
    }
    if (resolver != "oc.env") {
      error(at, display, "unsupported resolver '" + resolver + "' in " + written,
            "jobman supports ${oc.env:NAME}, ${oc.env:NAME,default} and ${oc.select:key,default}; write $" + written +
                " for the literal text");
      return std::nullopt;
    }
    if (defaults_.environment == EnvironmentCalls::mark) {
      defaults_.marked->push_back(written);
      return environment_marker(defaults_.marked->size() - 1);
    }
    const std::string name = environment_variable(written);
    if (name.empty()) {
      error(at, display, written + " names no environment variable", "write ${oc.env:NAME}");
      return std::nullopt;
    }
    bool bad_text = false;
    auto value = environment_value(written, [&](const std::string& variable) -> std::optional<std::string> {
      const char* set = std::getenv(variable.c_str());
      if (set == nullptr) {
        return std::nullopt;
      }
      if (invalid_utf8_offset(set) != std::string_view::npos) {
        bad_text = true;
        return std::nullopt;
      }
      if (defaults_.read != nullptr) {
        (*defaults_.read)[variable] = set;
      }
      return std::string(set);
    });
    if (bad_text) {
      error(at, display, written + ": environment variable " + name + " is not UTF-8 text");
      return std::nullopt;
    }
    if (!value) {
      error(at, display, written + ": environment variable " + name + " is not set",
            "set it, or give a default: ${oc.env:" + name + ",default}");
      return value;
    }
    return with_references(*value, at, display);
  }

  // A default given inside a call, itself resolved (${oc.env:A,${tpu.zone}}).
  std::optional<std::string> with_references(const std::string& text, const Node& at, const std::string& display) {
    if (!has_reference(text) && text.find("\\${") == std::string::npos) {
      return text;
    }
    Node inner = make_scalar(text, at.origin);
    if (!resolve_scalar(inner, display)) {
      return std::nullopt;
    }
    return inner.text;
  }

  // The absolute path of a reference: ${.key} names a key of the mapping the value is in, each further dot one
  // level up (${..key}). Empty when it climbs above the document.
  std::string absolute(const std::string& body) const {
    const auto dots = body.find_first_not_of('.');
    if (dots == 0 || dots == std::string::npos || stack_.empty()) {
      return body;
    }
    auto parts = util::split(stack_.back().path, '.');
    if (dots > parts.size()) {
      return body.substr(dots);
    }
    parts.resize(parts.size() - dots);
    std::string out;
    for (const auto& part : parts) {
      out += part + ".";
    }
    return out + body.substr(dots);
  }

  // Whether the document (or a default jobman knows) has a value at `path`, without resolving anything.
  bool present(const std::string& path) {
    const Node* current = &root_;
    for (const auto& part : util::split(path, '.')) {
      const Node* next = nullptr;
      if (current->is_mapping()) {
        if (const Entry* entry = current->find(part)) {
          next = &entry->value;
        }
      } else if (current->is_sequence() && is_list_index(part) && std::stoul(part) < current->items.size()) {
        next = &current->items[std::stoul(part)];
      }
      if (next == nullptr) {
        return default_for(path, root_) != nullptr;
      }
      current = next;
    }
    return !current->is_null() || default_for(path, root_) != nullptr;
  }

  // The resolved node a reference names; nullptr when it cannot be resolved (reported once).
  const Node* lookup(const std::string& path, const Node& from, const std::string& from_display) {
    const auto parts = util::split(path, '.');
    Node* current = &root_;
    std::string walked;
    std::string walked_display;
    const std::string written = "${" + path + "}";
    for (const auto& part : parts) {
      // A scalar on the way may be a reference that becomes a mapping or a list.
      if (current->is_scalar() && !resolve(*current, walked, walked_display)) {
        return nullptr;
      }
      Node* next = nullptr;
      if (current->is_mapping()) {
        if (Entry* entry = current->find(part)) {
          next = &entry->value;
        }
      } else if (current->is_sequence() && is_list_index(part) && std::stoul(part) < current->items.size()) {
        next = &current->items[std::stoul(part)];
      }
      if (next == nullptr) {
        if (Node* fallback = default_for(path, from)) {
          return resolve(*fallback, path, path) ? fallback : nullptr;
        }
        report_missing(*current, part, walked, written, from, from_display);
        return nullptr;
      }
      if (current->is_sequence()) {
        walked_display.append("[").append(part).append("]");
      } else {
        walked_display = join(walked_display, part);
      }
      walked = join(walked, part);
      current = next;
    }
    if (current->is_null()) {
      if (Node* fallback = default_for(path, from)) {
        return resolve(*fallback, path, path) ? fallback : nullptr;
      }
    }
    return resolve(*current, path, walked_display) ? current : nullptr;
  }

  void report_missing(const Node& container, const std::string& part, const std::string& walked,
                      const std::string& written, const Node& from, const std::string& from_display) {
    const std::string what = "unresolved reference " + written + ": ";
    if (container.is_mapping()) {
      std::vector<std::string> candidates;
      std::set<std::string> seen;
      for (const auto& entry : container.entries) {
        if (seen.insert(entry.key).second) {
          candidates.push_back(entry.key);
        }
      }
      for (const auto& key : known_keys(walked)) {
        if (seen.insert(key).second) {
          candidates.push_back(key);
        }
      }
      std::string hint;
      if (auto close = util::closest_match(part, candidates)) {
        hint = "did you mean '" + *close + "'?";
      }
      error(from, from_display,
            what + (walked.empty() ? "no section '" + part + "'" : walked + " has no key '" + part + "'"), hint);
    } else if (container.is_null()) {
      error(from, from_display, what + (walked.empty() ? "the document is empty" : walked + " is null"));
    } else if (container.is_sequence()) {
      error(from, from_display,
            what + walked + " has no item '" + part + "' (it has " + std::to_string(container.items.size()) +
                " items)");
    } else {
      error(from, from_display, what + walked + " is a single value, not a mapping");
    }
  }

  // A stand-in for a key the document leaves out whose default is known, or nullptr.
  Node* default_for(const std::string& path, const Node& from) {
    if (auto it = synthetic_.find(path); it != synthetic_.end()) {
      return it->second.get();
    }
    static const std::map<std::string, std::string, std::less<>> fixed{
        {"tpu.name", "${job.name}"},       {"tpu.version", "${tpu.accelerator}"},
        {"tpu.pricing", "spot"},           {"tpu.allocation_mode", "queued-resources"},
        {"job.env_type", "none"},          {"job.loop", "true"},
        {"command.workers", "all"},        {"recovery.max_failures", "0"},
        {"recovery.poll_interval", "30s"},
    };
    std::string text;
    if (path == "tpu.zone" && !defaults_.zone.empty()) {
      text = defaults_.zone;
    } else if (auto it = fixed.find(path); it != fixed.end()) {
      text = it->second;
    } else {
      return nullptr;
    }
    auto node = std::make_unique<Node>(make_scalar(text, from.origin));
    Node* raw = node.get();
    if (path == "tpu.version") {
      version_nodes_.insert(raw);
    }
    synthetic_.emplace(path, std::move(node));
    return raw;
  }

  // The default tpu.version is the accelerator's usual runtime: turn the accelerator name into it.
  bool finish_version(Node& node, const std::string& display) {
    if (!version_nodes_.contains(&node)) {
      return true;
    }
    version_nodes_.erase(&node);
    if (auto accelerator = config::find_accelerator(node.text)) {
      node.text = accelerator->generation->runtime_versions.front();
      return true;
    }
    error(node, display,
          "unresolved reference ${tpu.version}: tpu.version is not set and tpu.accelerator '" + node.text +
              "' is not a valid accelerator type");
    return false;
  }

  Node& root_;
  const ReferenceDefaults& defaults_;
  std::vector<Diagnostic>& errors_;
  std::unordered_map<const Node*, State> state_;
  std::vector<Frame> stack_;
  std::size_t growth_ = 0; // Bytes resolving has added so far, at most max_growth_bytes.
  bool too_large_reported_ = false;
  std::set<const Node*> in_reported_cycle_;
  std::map<std::string, std::unique_ptr<Node>, std::less<>> synthetic_;
  std::set<const Node*> version_nodes_;
};

} // namespace

void resolve_references(Node& root, const ReferenceDefaults& defaults, std::vector<Diagnostic>& errors) {
  Resolver(root, defaults, errors).run();
}

namespace {

constexpr std::string_view marker_open = "\uE000";
constexpr std::string_view marker_close = "\uE001";

// The arguments of an ${oc.env:...} call as written: "NAME" or "NAME,default".
std::string_view environment_arguments(std::string_view call) {
  const auto colon = call.find(':');
  return call.substr(colon + 1, call.size() - colon - 2);
}

} // namespace

std::string environment_marker(std::size_t index) {
  return std::string(marker_open) + std::to_string(index) + std::string(marker_close);
}

bool has_environment_marker(std::string_view text) {
  return text.find(marker_open) != std::string_view::npos;
}

std::string replace_environment_markers(std::string_view text, const std::function<std::string(std::size_t)>& call) {
  const std::string_view open = marker_open;
  const std::string_view close = marker_close;
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto start = text.find(open, i);
    const auto end = start == std::string_view::npos ? start : text.find(close, start + open.size());
    if (end == std::string_view::npos) {
      break;
    }
    const auto digits = text.substr(start + open.size(), end - start - open.size());
    out.append(text.substr(i, start - i));
    if (is_list_index(digits)) {
      out += call(std::stoul(std::string(digits)));
    } else {
      out.append(text.substr(start, end + close.size() - start));
    }
    i = end + close.size();
  }
  out.append(text.substr(i));
  return out;
}

std::string environment_variable(std::string_view call) {
  const auto args = environment_arguments(call);
  return std::string(util::trim(args.substr(0, args.find(','))));
}

std::optional<std::string>
environment_value(std::string_view call, const std::function<std::optional<std::string>(const std::string&)>& lookup) {
  const auto args = environment_arguments(call);
  const auto comma = args.find(',');
  const auto name = environment_variable(call);
  if (name.empty()) {
    return std::nullopt;
  }
  if (auto value = lookup(name)) {
    return value;
  }
  if (comma != std::string_view::npos) {
    return unquote(args.substr(comma + 1));
  }
  return std::nullopt;
}

bool has_reference(std::string_view text) {
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    if (token_at(text, i)) {
      return true;
    }
  }
  return false;
}

std::string escape_references(std::string_view text) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (auto token = token_at(text, i)) {
      out += '$';
      out.append(text.substr(i, token->end - i));
      i = token->end;
      continue;
    }
    out += text[i++];
  }
  return out;
}

} // namespace jobman::config::detail
