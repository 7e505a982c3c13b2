// The versions of the TPU API the mock answers under: v2 (every method) and v2alpha1 (the methods gcloud's alpha
// commands call so far). One world serves both; a v2alpha1 reply is the v2 reply with v2alpha1's field names and enum
// values.
#pragma once

#include <nlohmann/json.hpp>
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
// method under v2; under v2alpha1 queuedResources.get, nodes.get, nodes.patch, nodes.getGuestAttributes and
// operations.get.
bool serves_method(ApiVersion version, std::string_view method);

// Rewrites the v2 reply of `method` in `version`'s terms: for v2alpha1, a NodeSpec's multisliceParams is
// multiNodeParams, a Node's apiVersion V2 is V2_ALPHA1, and an Operation's @type URLs name google.cloud.tpu.v2alpha1
// (its Node or QueuedResource response rewritten too). Nothing changes for v2, or for a method or field it does not
// know.
void reply_in_version(ApiVersion version, std::string_view method, nlohmann::json& body);

} // namespace jobman::mock
