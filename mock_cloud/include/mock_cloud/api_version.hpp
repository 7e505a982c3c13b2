// The versions of the TPU API the mock answers under: v2 and v2alpha1, which adds reservations.list and the
// provisioning models (provisioningModel, runDuration, bestEffort, guaranteed.reserved, a node's
// schedulingConfig.provisioningModel, reservationName and terminationTimestamp). One world serves both: it renders
// every field, a v2 reply leaves out v2alpha1's own, and a v2alpha1 reply uses v2alpha1's field names and enum values.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace jobman::mock {

// A version of the TPU API, as the first segment of a path names it.
enum class ApiVersion { v2, v2alpha1 };

// The regular expression of a TPU API route's first segment, matching every version and capturing nothing:
// "/(?:v2|v2alpha1)".
inline constexpr const char* kTpuVersionRoute = "/(?:v2|v2alpha1)";

// The version a request path names: v2alpha1 for "/v2alpha1/...", v2 otherwise.
ApiVersion api_version_of(std::string_view path);

// The path segment of `version`: "v2" or "v2alpha1".
std::string_view api_version_name(ApiVersion version);

// True when the TPU method `method` ("nodes.get", "queuedResources.get", ...) is served under `version`: every
// method under v2alpha1, every one but reservations.list under v2.
bool serves_method(ApiVersion version, std::string_view method);

// A QueuedResource a client sent under `version`, in the world's terms: under v2alpha1 a NodeSpec's multiNodeParams
// is multisliceParams; under v2 a field only v2alpha1 has is refused, as Google's front end refuses an unknown name.
// Returns the refusal's message, or nullopt when the request is accepted.
std::optional<std::string> queued_resource_request(ApiVersion version, nlohmann::json& body);

// Rewrites the world's reply of `method` in `version`'s terms: for v2alpha1, a NodeSpec's multisliceParams is
// multiNodeParams, a Node's apiVersion V2 is V2_ALPHA1, and an Operation's @type URLs name google.cloud.tpu.v2alpha1
// (its Node or QueuedResource response rewritten too); for v2, v2alpha1's own fields are left out. Nothing changes
// for a method or field it does not know.
void reply_in_version(ApiVersion version, std::string_view method, nlohmann::json& body);

} // namespace jobman::mock
