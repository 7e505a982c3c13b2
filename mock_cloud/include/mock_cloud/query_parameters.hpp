// Which query parameters each method of the TPU v2 API binds. Google's front end refuses a parameter that the
// method's request message has no field for ("Cannot bind query parameter"), so a client that sends one works
// against a lenient mock and fails against Google; the mock refuses it as Google does.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::mock {

// The query parameters `method` ("nodes.create") binds besides the system parameters, as in the discovery document
// (path parameters excluded); nullopt for a method the table does not know.
std::optional<std::vector<std::string_view>> method_query_parameters(std::string_view method);

// The first parameter in the raw query string (`a=1&b=2`, without '?') that neither `method` nor the system
// parameters (alt, fields, key, prettyPrint, quotaUser, $.xgafv, ... with or without a leading '$') bind; nullopt when
// all of them bind, or when the method is not in the table.
std::optional<std::string> unbound_query_parameter(std::string_view method, std::string_view query);

// Google's message for a parameter that does not bind.
std::string unbound_parameter_message(const std::string& name);

} // namespace jobman::mock
