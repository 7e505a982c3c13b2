// The list parameters of the catalog methods (filter, orderBy, paging), in the simple forms Google documents.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::mock {

// What a list call asked for besides its parent.
struct ListQuery {
  int page_size = 0;      // 0: the default page.
  std::string page_token; // Opaque; from an earlier page's nextPageToken.
  std::string filter;     // AIP-160 subset: `field=value`, `field!=value`, `field:value`, joined by AND.
  std::string order_by;   // `field [asc|desc]`, comma-separated.
};

// One comparison of a filter.
struct FilterTerm {
  // How the field is compared with the value.
  enum class Op { equals, not_equals, has };
  std::string field; // A top-level string field of the resource.
  Op op = Op::equals;
  std::string value; // Unquoted; `=` and `!=` take a leading or trailing `*` as a wildcard.
};

// One key of an ordering.
struct OrderKey {
  std::string field;       // A top-level string field of the resource.
  bool descending = false; // `desc`.
};

// Parses `text` into terms over `fields`; nullopt with `why` set when it uses anything else (OR, NOT, parentheses,
// numbers, other fields), so that a filter the mock cannot apply is refused rather than ignored.
std::optional<std::vector<FilterTerm>> parse_filter(std::string_view text, const std::set<std::string>& fields,
                                                    std::string* why);

// True when `item` satisfies every term.
bool filter_matches(const std::vector<FilterTerm>& terms, const nlohmann::json& item);

// Parses an orderBy over `fields`; nullopt with `why` set when it names another field or direction.
std::optional<std::vector<OrderKey>> parse_order_by(std::string_view text, const std::set<std::string>& fields,
                                                    std::string* why);

// Sorts `items` by `keys` (stable: ties keep their order).
void sort_items(std::vector<nlohmann::json>& items, const std::vector<OrderKey>& keys);

} // namespace jobman::mock
