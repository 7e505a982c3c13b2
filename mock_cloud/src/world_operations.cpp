// Long-running operations: creating and finishing them, requestId replays, and operations.get and list.
#include "jobman/util/system.hpp"
#include "mock_cloud/world.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>

namespace jobman::mock {

using nlohmann::json;
using world_internal::failed_precondition;
using world_internal::find_reply;
using world_internal::page;
using world_internal::rpc_status;
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
                   {"cancelRequested", op.cancel_requested},
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

Reply World::cancel_operation(const std::string& project, const std::string& zone, const std::string& id,
                              std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    const auto name = location(project, zone) + "/operations/" + id;
    auto it = operations_.find(name);
    if (it == operations_.end()) {
      return error_reply(404, "Operation '" + name + "' was not found");
    }
    auto& op = *it->second;
    if (op.done) {
      return failed_precondition("Operation '" + name + "' has already completed and cannot be cancelled");
    }
    op.cancel_requested = true;
    touch_locked(name);
    const json cancelled = {{"error", rpc_status(1, "Operation was cancelled")}};
    // A create or start still in progress is undone; a delete or stop has begun taking hosts away and runs on.
    if (auto qr = queued_resources_.find(op.target);
        qr != queued_resources_.end() && qr->second->create_op == name && qr->second->state == "CREATING") {
      finish_operation(name, now_ms, cancelled);
      touch_locked(qr->first);
      queued_resources_.erase(qr);
    } else if (auto node = nodes_.find(op.target); node != nodes_.end() && node->second->standalone()) {
      auto& n = *node->second;
      if (n.create_op == name && n.state == "CREATING") {
        finish_operation(name, now_ms, cancelled);
        release_capacity(n);
        touch_locked(n.name);
        nodes_.erase(node);
      } else if (n.transition_op == name && n.state == "STARTING") {
        finish_operation(name, now_ms, cancelled);
        release_capacity(n);
        n.state = "STOPPED";
        n.transition_op.clear();
        touch_locked(n.name);
      }
    }
    tick_locked(now_ms);
    return {200, json::object()};
  });
}

Reply World::delete_operation(const std::string& project, const std::string& zone, const std::string& id,
                              std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    const auto name = location(project, zone) + "/operations/" + id;
    if (operations_.erase(name) == 0) {
      return error_reply(404, "Operation '" + name + "' was not found");
    }
    touch_locked(name);
    return {200, json::object()};
  });
}

} // namespace jobman::mock
