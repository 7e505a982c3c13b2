#include "jobman/cloud/tpu_client.hpp"
#include "jobman/util/system.hpp"

#include <array>
#include <map>
#include <string_view>

namespace jobman::cloud {
namespace {

using nlohmann::json;

constexpr std::array<const char*, 10> kQueuedResourceStates = {
    "STATE_UNSPECIFIED", "CREATING", "ACCEPTED",   "PROVISIONING", "FAILED",
    "DELETING",          "ACTIVE",   "SUSPENDING", "SUSPENDED",    "WAITING_FOR_RESOURCES"};
constexpr std::array<const char*, 3> kStateInitiators = {"STATE_INITIATOR_UNSPECIFIED", "USER", "SERVICE"};
constexpr std::array<const char*, 16> kNodeStates = {
    "STATE_UNSPECIFIED", "CREATING", "READY",     "RESTARTING", "REIMAGING", "DELETING", "REPAIRING", "STOPPED",
    "STOPPING",          "STARTING", "PREEMPTED", "TERMINATED", "HIDING",    "HIDDEN",   "UNHIDING",  "UNKNOWN"};
constexpr std::array<const char*, 5> kNodeHealths = {"HEALTH_UNSPECIFIED", "HEALTHY", "TIMEOUT", "UNHEALTHY_TENSORFLOW",
                                                     "UNHEALTHY_MAINTENANCE"};

template <typename Enum, std::size_t N>
Enum parse_enum(const json& object, const char* key, const std::array<const char*, N>& names) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_string()) {
    return Enum{};
  }
  const auto& text = object[key].get_ref<const std::string&>();
  for (std::size_t i = 0; i < N; ++i) {
    if (text == names[i]) {
      return static_cast<Enum>(i);
    }
  }
  return Enum{};
}

template <typename Enum, std::size_t N> const char* enum_name(Enum value, const std::array<const char*, N>& names) {
  const auto index = static_cast<std::size_t>(value);
  return index < N ? names[index] : names[0];
}

std::string string_at(const json& object, const char* key) {
  if (object.is_object() && object.contains(key) && object[key].is_string()) {
    return object[key].get<std::string>();
  }
  return {};
}

// The string members of the object at `key` (labels); others are skipped.
std::map<std::string, std::string> string_map_at(const json& object, const char* key) {
  std::map<std::string, std::string> out;
  if (object.is_object() && object.contains(key) && object[key].is_object()) {
    for (const auto& [name, value] : object[key].items()) {
      if (value.is_string()) {
        out.emplace(name, value.get<std::string>());
      }
    }
  }
  return out;
}

std::optional<RpcStatus> parse_status(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_object()) {
    return std::nullopt;
  }
  const auto& status = object[key];
  RpcStatus out;
  if (status.contains("code") && status["code"].is_number_integer()) {
    out.code = status["code"].get<int>();
  }
  out.message = string_at(status, "message");
  return out;
}

} // namespace

const char* to_string(QueuedResourceState state) {
  return enum_name(state, kQueuedResourceStates);
}
const char* to_string(StateInitiator initiator) {
  return enum_name(initiator, kStateInitiators);
}
const char* to_string(NodeState state) {
  return enum_name(state, kNodeStates);
}
const char* to_string(NodeHealth health) {
  return enum_name(health, kNodeHealths);
}

QueuedResource parse_queued_resource(const json& object) {
  QueuedResource out;
  out.raw = object;
  out.name = string_at(object, "name");
  out.create_time = string_at(object, "createTime");
  out.spot = object.is_object() && object.contains("spot");
  out.provisioning_model = string_at(object, "provisioningModel");
  if (object.is_object() && object.contains("runDuration") && object["runDuration"].is_object()) {
    out.termination_ms = util::parse_utc(string_at(object["runDuration"], "terminationTime"));
  }
  if (object.is_object() && object.contains("state") && object["state"].is_object()) {
    const auto& state = object["state"];
    out.state = parse_enum<QueuedResourceState>(state, "state", kQueuedResourceStates);
    out.state_initiator = parse_enum<StateInitiator>(state, "stateInitiator", kStateInitiators);
    if (state.contains("failedData")) {
      out.failed_error = parse_status(state["failedData"], "error");
    }
  }
  if (object.is_object() && object.contains("tpu") && object["tpu"].is_object() && object["tpu"].contains("nodeSpec") &&
      object["tpu"]["nodeSpec"].is_array()) {
    for (const auto& spec : object["tpu"]["nodeSpec"]) {
      // A multislice spec (multisliceParams, or v2alpha1's multiNodeParams) names its nodes PREFIX-0 ... PREFIX-(N-1),
      // the prefix being the queued resource's id when it names none.
      const json* multi = nullptr;
      for (const char* key : {"multisliceParams", "multiNodeParams"}) {
        if (spec.is_object() && spec.contains(key) && spec[key].is_object()) {
          multi = &spec[key];
        }
      }
      if (multi != nullptr && multi->contains("nodeCount") && (*multi)["nodeCount"].is_number_integer()) {
        auto prefix = string_at(*multi, "nodeIdPrefix");
        if (prefix.empty()) {
          prefix = out.name.substr(out.name.rfind('/') + 1);
        }
        const auto count = (*multi)["nodeCount"].get<long long>();
        for (long long n = 0; n < count && n < 10'000; ++n) {
          out.node_ids.push_back(prefix + "-" + std::to_string(n));
        }
      } else {
        out.node_ids.push_back(string_at(spec, "nodeId"));
      }
      if (out.node_labels.empty() && spec.is_object() && spec.contains("node") && spec["node"].is_object()) {
        out.node_labels = string_map_at(spec["node"], "labels");
      }
    }
  }
  return out;
}

Node parse_node(const json& object) {
  Node out;
  out.raw = object;
  out.name = string_at(object, "name");
  out.create_time = string_at(object, "createTime");
  out.queued_resource = string_at(object, "queuedResource");
  out.state = parse_enum<NodeState>(object, "state", kNodeStates);
  out.health = parse_enum<NodeHealth>(object, "health", kNodeHealths);
  out.health_description = string_at(object, "healthDescription");
  if (object.is_object() && object.contains("upcomingMaintenance") && object["upcomingMaintenance"].is_object()) {
    const auto& m = object["upcomingMaintenance"];
    UpcomingMaintenance upcoming;
    upcoming.type = string_at(m, "type");
    upcoming.can_reschedule = m.contains("canReschedule") && m["canReschedule"].is_boolean() && m["canReschedule"];
    upcoming.window_start_ms = util::parse_utc(string_at(m, "windowStartTime"));
    upcoming.window_end_ms = util::parse_utc(string_at(m, "windowEndTime"));
    upcoming.latest_window_start_ms = util::parse_utc(string_at(m, "latestWindowStartTime"));
    upcoming.status = string_at(m, "maintenanceStatus");
    out.upcoming_maintenance = std::move(upcoming);
  }
  out.accelerator_type = string_at(object, "acceleratorType");
  if (object.is_object() && object.contains("networkEndpoints") && object["networkEndpoints"].is_array()) {
    for (const auto& endpoint : object["networkEndpoints"]) {
      NetworkEndpoint entry;
      entry.ip_address = string_at(endpoint, "ipAddress");
      if (endpoint.is_object() && endpoint.contains("accessConfig")) {
        entry.external_ip = string_at(endpoint["accessConfig"], "externalIp");
      }
      out.network_endpoints.push_back(std::move(entry));
    }
  }
  out.labels = string_map_at(object, "labels");
  out.metadata = string_map_at(object, "metadata");
  return out;
}

Operation parse_operation(const json& object) {
  Operation out;
  out.name = string_at(object, "name");
  out.done = object.is_object() && object.contains("done") && object["done"].is_boolean() && object["done"].get<bool>();
  out.error = parse_status(object, "error");
  if (object.is_object() && object.contains("response")) {
    out.response = object["response"];
  }
  if (object.is_object() && object.contains("metadata")) {
    out.metadata = object["metadata"];
  }
  return out;
}

} // namespace jobman::cloud
