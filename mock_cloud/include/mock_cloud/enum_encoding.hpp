// Google's `$alt=json;enum-encoding=int` system parameter: the reply's enum fields as their proto numbers. google-gax
// asks for it on every call over its HTTP/JSON transport, so that a client older than the API still reads new values.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace jobman::mock {

// True when an `$alt` (or `alt`) parameter asks for enum numbers: "json;enum-encoding=int".
bool wants_enum_numbers(std::string_view alt);

// Rewrites the enum strings of the reply of the /v2 method `method` ("queuedResources.get", "nodes.list",
// "operations.get", ...) as the numbers of the TPU v2 protos, an Operation's response included. Values and methods
// it does not know are left as they are.
void encode_enums_as_numbers(std::string_view method, nlohmann::json& body);

} // namespace jobman::mock
