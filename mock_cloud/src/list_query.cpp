// filter and orderBy for the catalog lists: the comparisons Google's list filters are usually written with.
#include "mock_cloud/list_query.hpp"

#include "jobman/util/strings.hpp"

#include <algorithm>
#include <cctype>

namespace jobman::mock {

using nlohmann::json;

namespace {

// A token of a filter: a word (field, value or AND), a quoted value, or an operator.
struct Token {
  std::string text;
  bool quoted = false;
  bool op = false;
};

bool special(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0 || c == '=' || c == '!' || c == ':' || c == '(' || c == ')' ||
         c == '<' || c == '>' || c == '"';
}

std::optional<std::vector<Token>> tokenize(std::string_view text, std::string* why) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      ++i;
    } else if (c == '"') {
      const auto end = text.find('"', i + 1);
      if (end == std::string_view::npos) {
        *why = "an unterminated quoted value";
        return std::nullopt;
      }
      out.push_back({std::string(text.substr(i + 1, end - i - 1)), true, false});
      i = end + 1;
    } else if (c == '!' && i + 1 < text.size() && text[i + 1] == '=') {
      out.push_back({"!=", false, true});
      i += 2;
    } else if (c == '=' || c == ':') {
      out.push_back({std::string(1, c), false, true});
      ++i;
    } else if (special(c)) {
      *why = "'" + std::string(1, c) + "' (only field=value, field!=value and field:value joined by AND)";
      return std::nullopt;
    } else {
      auto start = i;
      while (i < text.size() && !special(text[i])) {
        ++i;
      }
      out.push_back({std::string(text.substr(start, i - start)), false, false});
    }
  }
  return out;
}

// `value` against a pattern with an optional leading or trailing `*`.
bool wildcard_equals(const std::string& value, const std::string& pattern) {
  const bool head = !pattern.empty() && pattern.front() == '*';
  const bool tail = pattern.size() > 1 && pattern.back() == '*';
  std::string core = pattern.substr(head ? 1 : 0, pattern.size() - (head ? 1 : 0) - (tail ? 1 : 0));
  if (head && tail) {
    return value.find(core) != std::string::npos;
  }
  if (head) {
    return value.size() >= core.size() && value.compare(value.size() - core.size(), core.size(), core) == 0;
  }
  if (tail) {
    return value.rfind(core, 0) == 0;
  }
  return value == pattern;
}

std::string field_text(const json& item, const std::string& field) {
  auto it = item.find(field);
  return it != item.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string known_fields(const std::set<std::string>& fields) {
  return util::join(std::vector<std::string>(fields.begin(), fields.end()), ", ");
}

} // namespace

std::optional<std::vector<FilterTerm>> parse_filter(std::string_view text, const std::set<std::string>& fields,
                                                    std::string* why) {
  std::string reason;
  auto tokens = tokenize(text, &reason);
  std::vector<FilterTerm> terms;
  for (std::size_t i = 0; tokens && i < tokens->size(); i += 4) {
    const auto& t = *tokens;
    if (i + 2 >= t.size() || t[i].op || t[i].quoted || !t[i + 1].op || t[i + 2].op) {
      reason = "expected field=value, field!=value or field:value";
      tokens.reset();
      break;
    }
    if (fields.count(t[i].text) == 0) {
      reason = "unknown field '" + t[i].text + "' (known: " + known_fields(fields) + ")";
      tokens.reset();
      break;
    }
    FilterTerm term;
    term.field = t[i].text;
    term.op = t[i + 1].text == "="   ? FilterTerm::Op::equals
              : t[i + 1].text == ":" ? FilterTerm::Op::has
                                     : FilterTerm::Op::not_equals;
    term.value = t[i + 2].text;
    terms.push_back(std::move(term));
    if (i + 3 < t.size() && (t[i + 3].text != "AND" || t[i + 3].quoted || i + 4 >= t.size())) {
      reason = "terms must be joined by AND";
      tokens.reset();
      break;
    }
  }
  if (!tokens) {
    if (why != nullptr) {
      *why = "Unsupported filter '" + std::string(text) + "': " + reason;
    }
    return std::nullopt;
  }
  return terms;
}

bool filter_matches(const std::vector<FilterTerm>& terms, const json& item) {
  return std::all_of(terms.begin(), terms.end(), [&](const FilterTerm& term) {
    const auto value = field_text(item, term.field);
    switch (term.op) {
    case FilterTerm::Op::equals: return wildcard_equals(value, term.value);
    case FilterTerm::Op::not_equals: return !wildcard_equals(value, term.value);
    case FilterTerm::Op::has: return value.find(term.value) != std::string::npos;
    }
    return false;
  });
}

std::optional<std::vector<OrderKey>> parse_order_by(std::string_view text, const std::set<std::string>& fields,
                                                    std::string* why) {
  std::vector<OrderKey> keys;
  if (util::trim(text).empty()) {
    return keys;
  }
  for (const auto& part : util::split(text, ',')) {
    const auto words = util::split(util::trim(part), ' ');
    std::vector<std::string> parts;
    for (const auto& word : words) {
      if (!word.empty()) {
        parts.push_back(word);
      }
    }
    const bool direction_ok = parts.size() == 1 || (parts.size() == 2 && (parts[1] == "asc" || parts[1] == "desc"));
    if (parts.empty() || !direction_ok || fields.count(parts[0]) == 0) {
      if (why != nullptr) {
        *why = "Unsupported orderBy '" + std::string(text) + "': expected a comma-separated list of fields (" +
               known_fields(fields) + "), each optionally followed by asc or desc";
      }
      return std::nullopt;
    }
    keys.push_back({parts[0], parts.size() == 2 && parts[1] == "desc"});
  }
  return keys;
}

void sort_items(std::vector<json>& items, const std::vector<OrderKey>& keys) {
  std::stable_sort(items.begin(), items.end(), [&](const json& a, const json& b) {
    for (const auto& key : keys) {
      const auto x = field_text(a, key.field);
      const auto y = field_text(b, key.field);
      if (x != y) {
        return key.descending ? y < x : x < y;
      }
    }
    return false;
  });
}

} // namespace jobman::mock
