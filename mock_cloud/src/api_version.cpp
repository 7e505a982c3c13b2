#include "mock_cloud/api_version.hpp"

#include <array>
#include <optional>
#include <string>

namespace jobman::mock {
namespace {

using nlohmann::json;

constexpr std::string_view kV2TypePrefix = "type.googleapis.com/google.cloud.tpu.v2.";
constexpr std::string_view kV2alpha1TypePrefix = "type.googleapis.com/google.cloud.tpu.v2alpha1.";

// A QueuedResource's fields that v2alpha1 has and v2 does not.
constexpr std::array<std::string_view, 4> kV2alpha1QueuedResourceFields = {"provisioningModel", "runDuration",
                                                                           "bestEffort", "trafficConfig"};
// A SchedulingConfig's fields that v2alpha1 has and v2 does not.
constexpr std::array<std::string_view, 3> kV2alpha1SchedulingFields = {"provisioningModel", "reservationName",
                                                                       "terminationTimestamp"};

// Leaves out of a Node what only v2alpha1 has.
void node_in_v2(json& node) {
  if (!node.is_object()) {
    return;
  }
  if (const auto scheduling = node.find("schedulingConfig"); scheduling != node.end() && scheduling->is_object()) {
    for (const auto field : kV2alpha1SchedulingFields) {
      scheduling->erase(std::string(field));
    }
    if (scheduling->empty()) {
      node.erase(scheduling);
    }
  }
}

// Leaves out of a QueuedResource what only v2alpha1 has.
void queued_resource_in_v2(json& resource) {
  if (!resource.is_object()) {
    return;
  }
  for (const auto field : kV2alpha1QueuedResourceFields) {
    resource.erase(std::string(field));
  }
  if (const auto guaranteed = resource.find("guaranteed"); guaranteed != resource.end() && guaranteed->is_object()) {
    guaranteed->erase("reserved");
  }
  if (resource.contains("tpu") && resource["tpu"].is_object() && resource["tpu"].contains("nodeSpec") &&
      resource["tpu"]["nodeSpec"].is_array()) {
    for (auto& spec : resource["tpu"]["nodeSpec"]) {
      if (spec.is_object() && spec.contains("node")) {
        node_in_v2(spec["node"]);
      }
    }
  }
}

void operation_in_v2(json& operation) {
  if (!operation.is_object() || !operation.contains("response") || !operation["response"].is_object()) {
    return;
  }
  auto& response = operation["response"];
  const auto type = response.contains("@type") && response["@type"].is_string() ? response["@type"].get<std::string>()
                                                                                : std::string();
  if (type.ends_with(".Node")) {
    node_in_v2(response);
  } else if (type.ends_with(".QueuedResource")) {
    queued_resource_in_v2(response);
  }
}

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
  return version == ApiVersion::v2alpha1 || method != "reservations.list";
}

std::optional<std::string> queued_resource_request(ApiVersion version, nlohmann::json& body) {
  if (!body.is_object()) {
    return std::nullopt; // The world says what is wrong with it.
  }
  json no_specs = json::array();
  json& specs = body.contains("tpu") && body["tpu"].is_object() && body["tpu"].contains("nodeSpec") &&
                        body["tpu"]["nodeSpec"].is_array()
                    ? body["tpu"]["nodeSpec"]
                    : no_specs;
  if (version == ApiVersion::v2alpha1) {
    for (auto& spec : specs) {
      if (spec.is_object() && spec.contains("multiNodeParams")) {
        if (spec.contains("multisliceParams")) {
          return "Invalid JSON payload received. Unknown name \"multisliceParams\" at "
                 "'queued_resource.tpu.node_spec[0]': "
                 "Cannot find field.";
        }
        spec["multisliceParams"] = std::move(spec["multiNodeParams"]);
        spec.erase("multiNodeParams");
        if (spec["multisliceParams"].is_object()) {
          spec["multisliceParams"].erase("workloadType"); // How the slices talk: nothing the mock models.
        }
      }
    }
    return std::nullopt;
  }
  const auto unknown = [](const std::string& name, const std::string& where) {
    return "Invalid JSON payload received. Unknown name \"" + name + "\" at '" + where + "': Cannot find field.";
  };
  for (const auto field : kV2alpha1QueuedResourceFields) {
    if (body.contains(std::string(field))) {
      return unknown(std::string(field), "queued_resource");
    }
  }
  if (body.contains("guaranteed") && body["guaranteed"].is_object() && body["guaranteed"].contains("reserved")) {
    return unknown("reserved", "queued_resource.guaranteed");
  }
  for (auto& spec : specs) {
    if (spec.is_object() && spec.contains("multiNodeParams")) {
      return unknown("multiNodeParams", "queued_resource.tpu.node_spec[0]");
    }
    if (spec.is_object() && spec.contains("node") && spec["node"].is_object() &&
        spec["node"].contains("schedulingConfig") && spec["node"]["schedulingConfig"].is_object()) {
      for (const auto field : kV2alpha1SchedulingFields) {
        if (spec["node"]["schedulingConfig"].contains(std::string(field))) {
          return unknown(std::string(field), "queued_resource.tpu.node_spec[0].node.scheduling_config");
        }
      }
    }
  }
  return std::nullopt;
}

void reply_in_version(ApiVersion version, std::string_view method, nlohmann::json& body) {
  // How each kind of resource is rewritten in the version's terms.
  const bool v2 = version == ApiVersion::v2;
  void (*const node)(json&) = v2 ? node_in_v2 : node_in_v2alpha1;
  void (*const queued_resource)(json&) = v2 ? queued_resource_in_v2 : queued_resource_in_v2alpha1;
  void (*const operation)(json&) = v2 ? operation_in_v2 : operation_in_v2alpha1;
  if (method == "nodes.get") {
    node(body);
  } else if (method == "nodes.list") {
    each_of(body, "nodes", node);
  } else if (method == "queuedResources.get") {
    queued_resource(body);
  } else if (method == "queuedResources.list") {
    each_of(body, "queuedResources", queued_resource);
  } else if (method == "operations.list") {
    each_of(body, "operations", operation);
  } else if (body.is_object() && body.contains("name") && body.contains("metadata")) {
    // Every other method that answers with a resource answers with an Operation (nodes.patch, the creates, ...).
    operation(body);
  }
}

} // namespace jobman::mock
