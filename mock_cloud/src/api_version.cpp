#include "mock_cloud/api_version.hpp"

#include <array>
#include <string>

namespace jobman::mock {
namespace {

using nlohmann::json;

constexpr std::string_view kV2TypePrefix = "type.googleapis.com/google.cloud.tpu.v2.";
constexpr std::string_view kV2alpha1TypePrefix = "type.googleapis.com/google.cloud.tpu.v2alpha1.";

// The v2alpha1 methods served: what `gcloud alpha compute tpus queued-resources ssh` calls.
constexpr std::array<std::string_view, 5> kV2alpha1Methods = {"queuedResources.get", "nodes.get", "nodes.patch",
                                                              "nodes.getGuestAttributes", "operations.get"};

void node_in_v2alpha1(json& node) {
  if (!node.is_object()) {
    return;
  }
  if (const auto found = node.find("apiVersion"); found != node.end() && *found == "V2") {
    *found = "V2_ALPHA1";
  }
}

void queued_resource_in_v2alpha1(json& resource) {
  if (!resource.is_object() || !resource.contains("tpu") || !resource["tpu"].is_object()) {
    return;
  }
  auto& specs = resource["tpu"]["nodeSpec"];
  if (!specs.is_array()) {
    return;
  }
  for (auto& spec : specs) {
    if (!spec.is_object()) {
      continue;
    }
    if (const auto params = spec.find("multisliceParams"); params != spec.end()) {
      spec["multiNodeParams"] = std::move(*params);
      spec.erase("multisliceParams");
    }
    if (const auto node = spec.find("node"); node != spec.end()) {
      node_in_v2alpha1(*node);
    }
  }
}

// Rewrites an Any's @type to v2alpha1's message; returns the message's name ("Node"), or "" when it is not the TPU
// API's.
std::string any_in_v2alpha1(json& any) {
  if (!any.is_object() || !any.contains("@type") || !any["@type"].is_string()) {
    return {};
  }
  const auto type = any["@type"].get<std::string>();
  if (!type.starts_with(kV2TypePrefix)) {
    return {};
  }
  auto message = type.substr(kV2TypePrefix.size());
  any["@type"] = std::string(kV2alpha1TypePrefix) + message;
  return message;
}

void operation_in_v2alpha1(json& operation) {
  if (!operation.is_object()) {
    return;
  }
  if (const auto metadata = operation.find("metadata"); metadata != operation.end()) {
    any_in_v2alpha1(*metadata);
  }
  if (const auto response = operation.find("response"); response != operation.end()) {
    const auto message = any_in_v2alpha1(*response);
    if (message == "Node") {
      node_in_v2alpha1(*response);
    } else if (message == "QueuedResource") {
      queued_resource_in_v2alpha1(*response);
    }
  }
}

// Applies `rewrite` to each element of the array `body[field]`.
template <typename Rewrite> void each_of(json& body, const char* field, Rewrite rewrite) {
  if (body.is_object() && body.contains(field) && body[field].is_array()) {
    for (auto& element : body[field]) {
      rewrite(element);
    }
  }
}

} // namespace

ApiVersion api_version_of(std::string_view path) {
  return path.starts_with("/v2alpha1/") ? ApiVersion::v2alpha1 : ApiVersion::v2;
}

std::string_view api_version_name(ApiVersion version) {
  return version == ApiVersion::v2alpha1 ? "v2alpha1" : "v2";
}

bool serves_method(ApiVersion version, std::string_view method) {
  if (version == ApiVersion::v2) {
    return true;
  }
  for (const auto served : kV2alpha1Methods) {
    if (served == method) {
      return true;
    }
  }
  return false;
}

void reply_in_version(ApiVersion version, std::string_view method, nlohmann::json& body) {
  if (version == ApiVersion::v2) {
    return;
  }
  if (method == "nodes.get") {
    node_in_v2alpha1(body);
  } else if (method == "nodes.list") {
    each_of(body, "nodes", node_in_v2alpha1);
  } else if (method == "queuedResources.get") {
    queued_resource_in_v2alpha1(body);
  } else if (method == "queuedResources.list") {
    each_of(body, "queuedResources", queued_resource_in_v2alpha1);
  } else if (method == "operations.list") {
    each_of(body, "operations", operation_in_v2alpha1);
  } else if (body.is_object() && body.contains("name") && body.contains("metadata")) {
    // Every other method that answers with a resource answers with an Operation (nodes.patch, the creates, ...).
    operation_in_v2alpha1(body);
  }
}

} // namespace jobman::mock
