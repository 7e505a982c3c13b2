#include "mock_cloud/partial_response.hpp"

#include <map>
#include <memory>
#include <string>

namespace jobman::mock {

namespace {

using nlohmann::json;

// A selection tree: a member with no children keeps the whole value below it.
struct Selection {
  bool everything = false;                                   // '*' at this level, or a leaf.
  std::map<std::string, std::unique_ptr<Selection>> members; // Selected members and what to keep below each.
};

// Recursive-descent parser of the `fields` grammar: list := item (',' item)*; item := path ['(' list ')'];
// path := name ('/' name)*.
class Parser {
public:
  explicit Parser(std::string_view text) : text_(text) {}

  // Parses the whole text into `root`; false on a syntax error.
  bool parse(Selection& root) { return list(root) && pos_ == text_.size(); }

private:
  bool list(Selection& into) {
    do {
      skip_spaces();
      if (!item(into)) {
        return false;
      }
      skip_spaces();
    } while (eat(','));
    return true;
  }

  bool item(Selection& into) {
    Selection* at = &into;
    for (;;) {
      auto name = identifier();
      if (name.empty()) {
        return false;
      }
      if (name == "*") {
        at->everything = true;
        return true;
      }
      auto& child = at->members[name];
      if (!child) {
        child = std::make_unique<Selection>();
      }
      at = child.get();
      if (!eat('/')) {
        break;
      }
    }
    if (eat('(')) {
      if (!list(*at) || !eat(')')) {
        return false;
      }
    } else {
      at->everything = true;
    }
    return true;
  }

  std::string identifier() {
    std::size_t start = pos_;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      bool name_char = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                       c == '@' || c == '.' || c == '-' || c == '*';
      if (!name_char) {
        break;
      }
      ++pos_;
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void skip_spaces() {
    while (pos_ < text_.size() && text_[pos_] == ' ') {
      ++pos_;
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

json keep_selected(const json& value, const Selection& selection) {
  if (selection.everything && selection.members.empty()) {
    return value;
  }
  if (value.is_array()) {
    json out = json::array();
    for (const auto& element : value) {
      out.push_back(keep_selected(element, selection));
    }
    return out;
  }
  if (!value.is_object()) {
    return value;
  }
  if (selection.everything) {
    json out = value;
    for (const auto& [name, below] : selection.members) {
      if (auto it = value.find(name); it != value.end()) {
        out[name] = keep_selected(*it, *below);
      }
    }
    return out;
  }
  json out = json::object();
  for (const auto& [name, below] : selection.members) {
    if (auto it = value.find(name); it != value.end()) {
      out[name] = keep_selected(*it, *below);
    }
  }
  return out;
}

} // namespace

std::optional<json> select_fields(const json& value, std::string_view fields) {
  Selection root;
  if (!Parser(fields).parse(root)) {
    return std::nullopt;
  }
  return keep_selected(value, root);
}

} // namespace jobman::mock
