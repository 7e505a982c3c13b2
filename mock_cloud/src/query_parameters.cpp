// The query parameters each TPU v2 method binds (from the discovery document) and the check against a request's.
#include "mock_cloud/query_parameters.hpp"

#include "jobman/util/strings.hpp"

#include <algorithm>
#include <array>
#include <httplib.h>
#include <map>

namespace jobman::mock {

namespace {

using Names = std::vector<std::string_view>;

// Google's system parameters: every method takes them, with or without a leading '$'.
constexpr std::array<std::string_view, 11> kSystemParameters = {
    "$.xgafv",     "access_token", "alt",       "callback",   "fields",         "key",
    "oauth_token", "prettyPrint",  "quotaUser", "uploadType", "upload_protocol"};

const std::map<std::string_view, Names>& method_table() {
  static const std::map<std::string_view, Names> table = {
      {"locations.list", {"filter", "pageSize", "pageToken"}},
      {"locations.get", {}},
      {"locations.generateServiceIdentity", {}},
      {"acceleratorTypes.list", {"filter", "orderBy", "pageSize", "pageToken"}},
      {"acceleratorTypes.get", {}},
      {"runtimeVersions.list", {"filter", "orderBy", "pageSize", "pageToken"}},
      {"runtimeVersions.get", {}},
      {"nodes.create", {"nodeId"}},
      {"nodes.delete", {}},
      {"nodes.get", {}},
      {"nodes.getGuestAttributes", {}},
      {"nodes.list", {"pageSize", "pageToken"}},
      {"nodes.patch", {"updateMask"}},
      {"nodes.start", {}},
      {"nodes.stop", {}},
      {"operations.cancel", {}},
      {"operations.delete", {}},
      {"operations.get", {}},
      {"operations.list", {"filter", "pageSize", "pageToken"}},
      {"queuedResources.create", {"queuedResourceId", "requestId"}},
      {"queuedResources.delete", {"force", "requestId"}},
      {"queuedResources.get", {}},
      {"queuedResources.list", {"pageSize", "pageToken"}},
      {"queuedResources.reset", {}},
      // Compute Engine's (compute v1 discovery document).
      {"compute.projects.get", {}},
      {"compute.projects.setCommonInstanceMetadata", {"requestId"}},
      {"compute.globalOperations.get", {}},
      {"compute.globalOperations.wait", {}},
      // OS Login's (oslogin v1).
      {"oslogin.users.getLoginProfile", {"projectId", "systemId"}},
      {"oslogin.users.importSshPublicKey", {"projectId", "regions"}},
  };
  return table;
}

bool is_system_parameter(std::string_view name) {
  if (name.starts_with('$') && name != "$.xgafv") {
    name.remove_prefix(1);
  }
  return std::find(kSystemParameters.begin(), kSystemParameters.end(), name) != kSystemParameters.end();
}

} // namespace

std::optional<Names> method_query_parameters(std::string_view method) {
  const auto& table = method_table();
  const auto it = table.find(method);
  if (it == table.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::optional<std::string> unbound_query_parameter(std::string_view method, std::string_view query) {
  const auto bound = method_query_parameters(method);
  if (!bound) {
    return std::nullopt;
  }
  for (const std::string& pair : util::split(query, '&')) {
    if (pair.empty()) {
      continue;
    }
    const std::string name = httplib::detail::decode_url(pair.substr(0, pair.find('=')), true);
    if (!is_system_parameter(name) && std::find(bound->begin(), bound->end(), name) == bound->end()) {
      return name;
    }
  }
  return std::nullopt;
}

std::string unbound_parameter_message(const std::string& name) {
  return "Invalid JSON payload received. Unknown name \"" + name + "\": Cannot bind query parameter. Field '" + name +
         "' could not be found in request message.";
}

} // namespace jobman::mock
