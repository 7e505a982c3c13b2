// Google's partial-response `fields` parameter: "name,state,tpu/nodeSpec(nodeId,node/acceleratorType)".
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace jobman::mock {

// Keeps only the members `fields` selects, at any depth; arrays apply the selection to each element. A path goes
// down with '/', parentheses select several members below one, '*' keeps everything at its level. Returns nullopt
// when `fields` is not well-formed. Members it names that the value lacks are simply absent.
std::optional<nlohmann::json> select_fields(const nlohmann::json& value, std::string_view fields);

} // namespace jobman::mock
