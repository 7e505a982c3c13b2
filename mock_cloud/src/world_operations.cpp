// Long-running operations: creating and finishing them, requestId replays, and operations.get and list.
#include "jobman/util/system.hpp"
#include "mock_cloud/world.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>

namespace jobman::mock {

using nlohmann::json;
using world_internal::find_reply;
using world_internal::page;
using world_internal::under_prefix;

namespace {

constexpr const char* kOperationMetadataType = "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata";

} // namespace

std::string World::new_operation(const std::string& project, const std::string& zone, const std::string& verb,
                                 const std::string& target, std::int64_t now) {
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "%08llx-%lld", static_cast<unsigned long long>(rng_() & 0xffffffffULL),
                static_cast<long long>(next_sequence_++));
  auto op = std::make_unique<Operation>();
  op->name = location(project, zone) + "/operations/operation-" + std::to_string(now) + "-" + suffix;
  op->verb = verb;
  op->target = target;
  op->create_ms = now;
  auto name = op->name;
  operations_[name] = std::move(op);
  touch_locked(name);
  return name;
}

void World::finish_operation(const std::string& name, std::int64_t now, json response) {
  auto it = operations_.find(name);
  if (it == operations_.end() || it->second->done) {
    return;
  }
  it->second->done = true;
  it->second->end_ms = now;
  if (response.contains("error")) {
    it->second->error = response["error"];
  } else {
    it->second->response = std::move(response);
  }
  touch_locked(name);
}

const World::Operation* World::operation_for_request(const std::string& key) const {
  if (key.empty()) {
    return nullptr;
  }
  auto it = request_ids_.find(key);
  if (it == request_ids_.end()) {
    return nullptr;
  }
  auto op = operations_.find(it->second);
  return op == operations_.end() ? nullptr : op->second.get();
}

void World::remember_request_id(const std::string& key, const std::string& operation) {
  request_ids_[key] = operation;
  new_request_ids_.emplace_back(key, operation);
  dirty_ = true;
}

json World::operation_json(const Operation& op) const {
  json metadata = {{"@type", kOperationMetadataType},
                   {"createTime", util::format_utc(op.create_ms)},
                   {"target", op.target},
                   {"verb", op.verb},
                   {"cancelRequested", false},
                   {"apiVersion", "v2"}};
  if (op.done) {
    metadata["endTime"] = util::format_utc(op.end_ms);
  }
  json out = {{"name", op.name}, {"metadata", metadata}, {"done", op.done}};
  if (op.done && !op.error.is_null()) {
    out["error"] = op.error;
  } else if (op.done) {
    out["response"] = op.response;
  }
  return out;
}

Reply World::get_operation(const std::string& project, const std::string& zone, const std::string& id,
                           std::int64_t now_ms) {
  const auto lock = settle_at(now_ms);
  return find_reply(operations_, location(project, zone) + "/operations/" + id, "Operation",
                    [this](const Operation& op) { return operation_json(op); });
}

Reply World::list_operations(const std::string& project, const std::string& zone, int page_size,
                             const std::string& page_token, std::int64_t now_ms) {
  const auto lock = settle_at(now_ms);
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  auto ops = under_prefix(operations_, location(project, zone) + "/");
  std::stable_sort(ops.begin(), ops.end(),
                   [](const Operation* a, const Operation* b) { return a->create_ms < b->create_ms; });
  return page(
      ops.size(), [&](std::size_t i) { return operation_json(*ops[i]); }, "operations", page_size, page_token);
}

} // namespace jobman::mock
