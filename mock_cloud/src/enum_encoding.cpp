#include "mock_cloud/enum_encoding.hpp"

#include <map>
#include <string>
#include <utility>

namespace jobman::mock {
namespace {

using EnumValues = std::map<std::string, int, std::less<>>;

// What a field of a message holds: an enum, or a message with enums somewhere below (repeated or not).
struct Field {
  const EnumValues* values = nullptr;
  std::string_view message;
};
using Message = std::map<std::string_view, Field, std::less<>>;

// The messages of the TPU v2 API that have an enum at some depth, by the fields that lead to one.
const std::map<std::string_view, Message, std::less<>>& messages() {
  // The numbers of google.cloud.tpu.v2's enums (cloud_tpu.proto). Some have gaps: numbers retired upstream stay unused.
  static const EnumValues kNodeState{{"STATE_UNSPECIFIED", 0}, {"CREATING", 1},  {"READY", 2},      {"RESTARTING", 3},
                                     {"REIMAGING", 4},         {"DELETING", 5},  {"REPAIRING", 6},  {"STOPPED", 8},
                                     {"STOPPING", 9},          {"STARTING", 10}, {"PREEMPTED", 11}, {"TERMINATED", 12},
                                     {"HIDING", 13},           {"HIDDEN", 14},   {"UNHIDING", 15},  {"UNKNOWN", 16}};
  static const EnumValues kNodeHealth{{"HEALTH_UNSPECIFIED", 0},
                                      {"HEALTHY", 1},
                                      {"TIMEOUT", 3},
                                      {"UNHEALTHY_TENSORFLOW", 4},
                                      {"UNHEALTHY_MAINTENANCE", 5}};
  static const EnumValues kApiVersion{
      {"API_VERSION_UNSPECIFIED", 0}, {"V1_ALPHA1", 1}, {"V1", 2}, {"V2_ALPHA1", 3}, {"V2", 4}};
  static const EnumValues kQueuedResourceState{
      {"STATE_UNSPECIFIED", 0}, {"CREATING", 1}, {"ACCEPTED", 2},   {"PROVISIONING", 3}, {"FAILED", 4},
      {"DELETING", 5},          {"ACTIVE", 6},   {"SUSPENDING", 7}, {"SUSPENDED", 8},    {"WAITING_FOR_RESOURCES", 9}};
  static const EnumValues kStateInitiator{{"STATE_INITIATOR_UNSPECIFIED", 0}, {"USER", 1}, {"SERVICE", 2}};
  static const EnumValues kSymptomType{
      {"SYMPTOM_TYPE_UNSPECIFIED", 0}, {"LOW_MEMORY", 1},        {"OUT_OF_MEMORY", 2}, {"EXECUTE_TIMED_OUT", 3},
      {"MESH_BUILD_FAIL", 4},          {"HBM_OUT_OF_MEMORY", 5}, {"PROJECT_ABUSE", 6}};
  static const EnumValues kDiskMode{{"DISK_MODE_UNSPECIFIED", 0}, {"READ_WRITE", 1}, {"READ_ONLY", 2}};
  static const EnumValues kAcceleratorType{{"TYPE_UNSPECIFIED", 0}, {"V2", 2},   {"V3", 4},  {"V4", 7},
                                           {"V5LITE_POD", 9},       {"V5P", 10}, {"V6E", 11}};
  static const std::map<std::string_view, Message, std::less<>> kMessages{
      {"Node",
       {{"state", {&kNodeState, {}}},
        {"health", {&kNodeHealth, {}}},
        {"apiVersion", {&kApiVersion, {}}},
        {"symptoms", {nullptr, "Symptom"}},
        {"dataDisks", {nullptr, "AttachedDisk"}},
        {"acceleratorConfig", {nullptr, "AcceleratorConfig"}}}},
      {"Symptom", {{"symptomType", {&kSymptomType, {}}}}},
      {"AttachedDisk", {{"mode", {&kDiskMode, {}}}}},
      {"AcceleratorConfig", {{"type", {&kAcceleratorType, {}}}}},
      {"AcceleratorType", {{"acceleratorConfigs", {nullptr, "AcceleratorConfig"}}}},
      {"QueuedResource", {{"tpu", {nullptr, "Tpu"}}, {"state", {nullptr, "QueuedResourceState"}}}},
      {"Tpu", {{"nodeSpec", {nullptr, "NodeSpec"}}}},
      {"NodeSpec", {{"node", {nullptr, "Node"}}}},
      {"QueuedResourceState", {{"state", {&kQueuedResourceState, {}}}, {"stateInitiator", {&kStateInitiator, {}}}}},
      {"Operation", {{"response", {nullptr, "Any"}}}},
      {"ListNodesResponse", {{"nodes", {nullptr, "Node"}}}},
      {"ListQueuedResourcesResponse", {{"queuedResources", {nullptr, "QueuedResource"}}}},
      {"ListAcceleratorTypesResponse", {{"acceleratorTypes", {nullptr, "AcceleratorType"}}}},
      {"ListOperationsResponse", {{"operations", {nullptr, "Operation"}}}},
  };
  return kMessages;
}

// The message an Any holds, by its type URL; empty for one without enums.
std::string_view any_message(const nlohmann::json& any) {
  const auto type = any.find("@type");
  if (type == any.end() || !type->is_string()) {
    return {};
  }
  const std::string& url = type->get_ref<const std::string&>();
  for (const std::string_view name : {"Node", "QueuedResource"}) {
    if (url == "type.googleapis.com/google.cloud.tpu.v2." + std::string(name)) {
      return name;
    }
  }
  return {};
}

void encode(std::string_view message_name, nlohmann::json& value);

void encode_field(const Field& field, nlohmann::json& value) {
  if (value.is_array()) {
    for (auto& item : value) {
      encode_field(field, item);
    }
    return;
  }
  if (field.values != nullptr) {
    if (value.is_string()) {
      const auto number = field.values->find(value.get_ref<const std::string&>());
      if (number != field.values->end()) {
        value = number->second;
      }
    }
    return;
  }
  encode(field.message == "Any" && value.is_object() ? any_message(value) : field.message, value);
}

void encode(std::string_view message_name, nlohmann::json& value) {
  const auto message = messages().find(message_name);
  if (message == messages().end() || !value.is_object()) {
    return;
  }
  for (const auto& [name, field] : message->second) {
    const auto member = value.find(std::string(name));
    if (member != value.end()) {
      encode_field(field, *member);
    }
  }
}

// The message a /v2 method answers with: "nodes.get" a Node, "nodes.list" a ListNodesResponse, a mutation an
// Operation.
std::string reply_message(std::string_view method) {
  static const std::map<std::string_view, std::pair<std::string_view, std::string_view>, std::less<>> kResources{
      {"nodes", {"Node", "ListNodesResponse"}},
      {"queuedResources", {"QueuedResource", "ListQueuedResourcesResponse"}},
      {"operations", {"Operation", "ListOperationsResponse"}},
      {"acceleratorTypes", {"AcceleratorType", "ListAcceleratorTypesResponse"}},
  };
  const auto dot = method.find('.');
  if (dot == std::string_view::npos) {
    return {};
  }
  const auto resource = kResources.find(method.substr(0, dot));
  if (resource == kResources.end()) {
    return {};
  }
  const std::string_view verb = method.substr(dot + 1);
  if (verb == "get") {
    return std::string(resource->second.first);
  }
  if (verb == "list") {
    return std::string(resource->second.second);
  }
  for (const std::string_view mutation : {"create", "delete", "reset", "patch", "start", "stop"}) {
    if (verb == mutation) {
      return "Operation";
    }
  }
  return {}; // operations.cancel and operations.delete answer Empty, getGuestAttributes has no enums.
}

} // namespace

bool wants_enum_numbers(std::string_view alt) {
  // "json;enum-encoding=int": options after the format, separated by ';'.
  std::size_t start = 0;
  while (start <= alt.size()) {
    const auto end = std::min(alt.find(';', start), alt.size());
    if (alt.substr(start, end - start) == "enum-encoding=int") {
      return true;
    }
    start = end + 1;
  }
  return false;
}

void encode_enums_as_numbers(std::string_view method, nlohmann::json& body) {
  encode(reply_message(method), body);
}

} // namespace jobman::mock
