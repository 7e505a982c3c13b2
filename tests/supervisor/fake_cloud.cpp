#include "fake_cloud.hpp"

#include "jobman/config/accelerator.hpp"

#include <algorithm>

namespace jobman::test {

namespace {

constexpr const char* kProject = "test-project";

std::string parent(const std::string& zone) {
  return std::string("projects/") + kProject + "/locations/" + zone;
}

bool has_node(cloud::QueuedResourceState state) {
  return state == cloud::QueuedResourceState::active || state == cloud::QueuedResourceState::suspending ||
         state == cloud::QueuedResourceState::suspended || state == cloud::QueuedResourceState::deleting;
}

// The ids of a slice's nodes: its node's, or a multislice one's NODE_ID-0 ... NODE_ID-(count-1).
std::vector<std::string> node_ids(const FakeSlice& s) {
  if (s.node_count <= 1) {
    return {s.node_id};
  }
  std::vector<std::string> ids;
  for (int n = 0; n < s.node_count; ++n) {
    ids.push_back(s.node_id + "-" + std::to_string(n));
  }
  return ids;
}

// The index of the slice's node named `id`, or -1.
int node_index(const FakeSlice& s, const std::string& id) {
  const auto ids = node_ids(s);
  const auto found = std::find(ids.begin(), ids.end(), id);
  return found == ids.end() ? -1 : static_cast<int>(found - ids.begin());
}

} // namespace

void FakeSlices::record(const std::string& call) {
  const auto now = clock_();
  for (auto& s : slices_) {
    if (s.state == cloud::QueuedResourceState::waiting_for_resources && s.valid_until_ms > 0 &&
        now >= s.valid_until_ms) {
      s.state = cloud::QueuedResourceState::failed;
      s.failed_error = cloud::RpcStatus{4, "could not be provisioned before its validUntil deadline"};
    }
  }
  calls_.push_back(call);
  if (call.rfind("create", 0) == 0 || call.rfind("delete", 0) == 0 || call.rfind("patch", 0) == 0) {
    mutations_.push_back(call);
  }
  for (auto it = failures_.begin(); it != failures_.end(); ++it) {
    if (call.rfind(it->first, 0) == 0) {
      const auto [status, message] = it->second;
      failures_.erase(it);
      throw cloud::ApiError("TPU API: " + call + ": " + message + " (" + std::to_string(status) + ")", status,
                            status == 429 ? "RESOURCE_EXHAUSTED" : "");
    }
  }
}

void FakeSlices::set_capacity(const std::string& zone, bool capacity) {
  const std::lock_guard lock(mutex_);
  capacity_[zone] = capacity;
}

void FakeSlices::fail_next(const std::string& call, int http_status, const std::string& message) {
  const std::lock_guard lock(mutex_);
  failures_.push_back({call, {http_status, message}});
}

FakeSlice& FakeSlices::named(const std::string& id) {
  for (auto& s : slices_) {
    if (s.id == id) {
      return s;
    }
  }
  throw Error("no fake slice " + id);
}

FakeSlice* FakeSlices::find(const std::string& zone, const std::string& id, bool node_only) {
  for (auto& s : slices_) {
    if (s.zone == zone && (node_only ? s.node_only && s.id == id : s.id == id && !s.node_only)) {
      return &s;
    }
  }
  return nullptr;
}

void FakeSlices::grant(const std::string& id) {
  const std::lock_guard lock(mutex_);
  auto& s = named(id);
  s.state = cloud::QueuedResourceState::active;
  s.node = cloud::NodeState::ready;
  create_errors_[s.id] = std::nullopt;
  if (s.run_seconds > 0) {
    s.termination_ms = clock_() + s.run_seconds * 1000;
  }
}

void FakeSlices::end_run(const std::string& id) {
  const std::lock_guard lock(mutex_);
  auto& s = named(id);
  s.state = cloud::QueuedResourceState::suspended;
  s.node.reset();
}

void FakeSlices::preempt(const std::string& id) {
  const std::lock_guard lock(mutex_);
  auto& s = named(id);
  s.state = cloud::QueuedResourceState::suspended;
  s.node = cloud::NodeState::preempted;
}

void FakeSlices::set_state(const std::string& id, cloud::QueuedResourceState state) {
  const std::lock_guard lock(mutex_);
  auto& s = named(id);
  s.state = state;
  if (!has_node(state)) {
    s.node.reset();
  } else if (!s.node) {
    s.node = cloud::NodeState::ready;
  }
}

void FakeSlices::fail(const std::string& id, int code, const std::string& message) {
  const std::lock_guard lock(mutex_);
  auto& s = named(id);
  if (s.node_only) {
    create_errors_[s.id] = cloud::RpcStatus{code, message};
    s.node.reset();
    return;
  }
  s.state = cloud::QueuedResourceState::failed;
  s.failed_error = cloud::RpcStatus{code, message};
  s.node.reset();
}

void FakeSlices::set_health(const std::string& id, cloud::NodeHealth health,
                            std::optional<cloud::UpcomingMaintenance> maintenance) {
  const std::lock_guard lock(mutex_);
  auto& s = named(id);
  s.health = health;
  s.maintenance = std::move(maintenance);
}

void FakeSlices::set_node_health(const std::string& id, const std::string& node_id, cloud::NodeHealth health) {
  const std::lock_guard lock(mutex_);
  named(id).node_health[node_id] = health;
}

void FakeSlices::set_physical_hosts(const std::string& id, std::vector<std::string> hosts) {
  const std::lock_guard lock(mutex_);
  named(id).physical_hosts = std::move(hosts);
}

void FakeSlices::set_next_physical_hosts(std::vector<std::vector<std::string>> each) {
  const std::lock_guard lock(mutex_);
  next_hosts_ = std::move(each);
}

void FakeSlices::vanish(const std::string& id) {
  const std::lock_guard lock(mutex_);
  std::erase_if(slices_, [&](const FakeSlice& s) { return s.id == id; });
}

std::optional<FakeSlice> FakeSlices::slice(const std::string& id) const {
  const std::lock_guard lock(mutex_);
  for (const auto& s : slices_) {
    if (s.id == id) {
      return s;
    }
  }
  return std::nullopt;
}

std::vector<FakeSlice> FakeSlices::slices() const {
  const std::lock_guard lock(mutex_);
  return slices_;
}

std::vector<std::string> FakeSlices::take_calls() {
  const std::lock_guard lock(mutex_);
  return std::exchange(calls_, {});
}

std::vector<std::string> FakeSlices::mutations() const {
  const std::lock_guard lock(mutex_);
  return mutations_;
}

cloud::QueuedResource FakeSlices::as_queued_resource(const FakeSlice& s, cloud::ApiVersion version) const {
  cloud::QueuedResource qr;
  qr.name = parent(s.zone) + "/queuedResources/" + s.id;
  qr.state = s.state;
  qr.failed_error = s.failed_error;
  qr.node_ids = node_ids(s);
  qr.node_labels = s.labels;
  qr.spot = s.spot;
  if (version == cloud::ApiVersion::v2alpha1) {
    qr.termination_ms = s.termination_ms;
  }
  return qr;
}

cloud::Node FakeSlices::as_node(const FakeSlice& s, int index) const {
  cloud::Node node;
  const auto id = node_ids(s).at(static_cast<std::size_t>(index));
  node.name = parent(s.zone) + "/nodes/" + id;
  node.state = s.node.value_or(cloud::NodeState::creating);
  const auto health = s.node_health.find(id);
  node.health = health == s.node_health.end() ? s.health : health->second;
  node.upcoming_maintenance = s.maintenance;
  node.accelerator_type = s.accelerator;
  node.labels = s.labels;
  node.metadata = s.metadata;
  if (!s.node_only) {
    node.queued_resource = parent(s.zone) + "/queuedResources/" + s.id;
  }
  for (int w = 0; w < s.hosts; ++w) {
    node.network_endpoints.push_back({"127.0." + std::to_string(index) + "." + std::to_string(w + 2), {}});
  }
  return node;
}

cloud::CreateResult FakeSlices::create_queued_resource(const std::string& zone, const std::string& id,
                                                       const nlohmann::json& body) {
  const std::lock_guard lock(mutex_);
  record("create qr " + zone + "/" + id);
  if (auto* existing = find(zone, id, false)) {
    return {std::nullopt, as_queued_resource(*existing)};
  }
  FakeSlice s;
  s.zone = zone;
  s.id = id;
  const auto& spec = body.at("tpu").at("nodeSpec").at(0);
  const auto multi = spec.find(spec.contains("multiNodeParams") ? "multiNodeParams" : "multisliceParams");
  if (multi != spec.end()) {
    s.node_id = multi->value("nodeIdPrefix", id);
    s.node_count = multi->at("nodeCount").get<int>();
  } else {
    s.node_id = spec.at("nodeId").get<std::string>();
  }
  s.accelerator = spec.at("node").value("acceleratorType", "");
  if (const auto type = config::find_accelerator(s.accelerator)) {
    s.hosts = std::max(1, type->hosts);
  }
  if (spec.at("node").contains("labels")) {
    s.labels = spec.at("node").at("labels").get<std::map<std::string, std::string>>();
  }
  if (spec.at("node").contains("metadata")) {
    s.metadata = spec.at("node").at("metadata").get<std::map<std::string, std::string>>();
  }
  s.spot = body.contains("spot");
  s.request = body;
  if (body.contains("runDuration")) {
    s.run_seconds = std::stoll(body["runDuration"].value("maxRunDuration", "0s"));
  }
  if (body.contains("queueingPolicy")) {
    const auto duration = body["queueingPolicy"].value("validUntilDuration", "0s");
    s.valid_until_ms = clock_() + std::stoll(duration) * 1000;
  }
  if (!next_hosts_.empty()) {
    s.physical_hosts = next_hosts_.front();
    next_hosts_.erase(next_hosts_.begin());
  }
  if (capacity_[zone]) {
    s.state = cloud::QueuedResourceState::active;
    s.node = cloud::NodeState::ready;
    if (s.run_seconds > 0) {
      s.termination_ms = clock_() + s.run_seconds * 1000;
    }
  }
  slices_.push_back(s);
  cloud::Operation op;
  op.name = parent(zone) + "/operations/create-" + id;
  return {op, std::nullopt};
}

std::optional<cloud::QueuedResource> FakeSlices::get_queued_resource(const std::string& zone, const std::string& id) {
  const std::lock_guard lock(mutex_);
  record("get qr " + zone + "/" + id);
  const auto* s = find(zone, id, false);
  return s == nullptr ? std::nullopt : std::optional(as_queued_resource(*s));
}

std::vector<cloud::QueuedResource> FakeSlices::list_queued_resources(const std::string& zone,
                                                                     cloud::ApiVersion version) {
  const std::lock_guard lock(mutex_);
  record("list qr " + zone + (version == cloud::ApiVersion::v2alpha1 ? " v2alpha1" : ""));
  std::vector<cloud::QueuedResource> listed;
  for (const auto& s : slices_) {
    if (s.zone == zone && !s.node_only) {
      listed.push_back(as_queued_resource(s, version));
    }
  }
  return listed;
}

std::optional<cloud::Operation> FakeSlices::remove(const std::string& zone, const std::string& id, bool node_only) {
  const std::lock_guard lock(mutex_);
  record(std::string(node_only ? "delete node " : "delete qr ") + zone + "/" + id);
  if (find(zone, id, node_only) == nullptr) {
    return std::nullopt;
  }
  std::erase_if(slices_, [&](const FakeSlice& s) { return s.zone == zone && s.id == id && s.node_only == node_only; });
  cloud::Operation op;
  op.name = parent(zone) + "/operations/delete-" + id;
  op.done = true;
  return op;
}

std::optional<cloud::Operation> FakeSlices::delete_queued_resource(const std::string& zone, const std::string& id) {
  return remove(zone, id, false);
}

cloud::NodeCreateResult FakeSlices::create_node(const std::string& zone, const std::string& id,
                                                const nlohmann::json& body) {
  const std::lock_guard lock(mutex_);
  record("create node " + zone + "/" + id);
  if (auto* existing = find(zone, id, true); existing != nullptr && existing->node) {
    return {std::nullopt, as_node(*existing)};
  }
  std::erase_if(slices_, [&](const FakeSlice& s) { return s.zone == zone && s.id == id && s.node_only; });
  FakeSlice s;
  s.zone = zone;
  s.id = id;
  s.node_id = id;
  s.node_only = true;
  s.accelerator = body.value("acceleratorType", "");
  if (const auto type = config::find_accelerator(s.accelerator)) {
    s.hosts = std::max(1, type->hosts);
  }
  if (body.contains("labels")) {
    s.labels = body.at("labels").get<std::map<std::string, std::string>>();
  }
  if (body.contains("metadata")) {
    s.metadata = body.at("metadata").get<std::map<std::string, std::string>>();
  }
  s.spot = body.contains("schedulingConfig") && body["schedulingConfig"].value("spot", false);
  if (capacity_[zone]) {
    s.node = cloud::NodeState::ready;
    create_errors_[id] = std::nullopt;
  } else {
    s.node = cloud::NodeState::creating;
    create_errors_.erase(id);
  }
  slices_.push_back(s);
  cloud::Operation op;
  op.name = parent(zone) + "/operations/create-" + id;
  return {op, std::nullopt};
}

std::optional<cloud::Node> FakeSlices::get_node(const std::string& zone, const std::string& id) {
  const std::lock_guard lock(mutex_);
  record("get node " + zone + "/" + id);
  for (const auto& s : slices_) {
    if (const int index = node_index(s, id); s.zone == zone && index >= 0 && s.node) {
      return as_node(s, index);
    }
  }
  return std::nullopt;
}

std::vector<cloud::Node> FakeSlices::list_nodes(const std::string& zone) {
  const std::lock_guard lock(mutex_);
  record("list node " + zone);
  std::vector<cloud::Node> listed;
  for (const auto& s : slices_) {
    for (int index = 0; s.zone == zone && s.node && index < s.node_count; ++index) {
      listed.push_back(as_node(s, index));
    }
  }
  return listed;
}

std::optional<cloud::Operation> FakeSlices::delete_node(const std::string& zone, const std::string& id) {
  return remove(zone, id, true);
}

std::vector<std::map<std::string, std::string>> FakeSlices::guest_attributes(const std::string& zone,
                                                                             const std::string& id) {
  const std::lock_guard lock(mutex_);
  record("guest " + zone + "/" + id);
  std::vector<std::map<std::string, std::string>> workers;
  for (const auto& s : slices_) {
    if (const int index = node_index(s, id); s.zone == zone && index >= 0) {
      // Every host has booted: it publishes its SSH host key (the supervisor waits for every host's), and the
      // machine it runs on where the test named one (a multislice slice's machines run across its nodes).
      const auto first = static_cast<std::size_t>(index * s.hosts);
      const auto count = s.node_count > 1 ? static_cast<std::size_t>(s.hosts)
                                          : std::max(static_cast<std::size_t>(s.hosts), s.physical_hosts.size());
      for (std::size_t w = 0; w < count; ++w) {
        std::map<std::string, std::string> published;
        if (static_cast<int>(w) < s.hosts - s.silent_hosts) {
          published["hostkeys/ssh-ed25519"] = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5" + id + "w" + std::to_string(w);
        }
        if (first + w < s.physical_hosts.size()) {
          published["host/physical_host"] = s.physical_hosts[first + w];
        }
        workers.push_back(std::move(published));
      }
    }
  }
  return workers;
}

cloud::Operation FakeSlices::set_node_metadata(const std::string& zone, const std::string& id,
                                               const std::map<std::string, std::string>& metadata) {
  const std::lock_guard lock(mutex_);
  record("patch node " + zone + "/" + id);
  for (auto& s : slices_) {
    if (s.zone == zone && node_index(s, id) >= 0 && s.node) {
      s.metadata = metadata;
      cloud::Operation op;
      op.name = parent(zone) + "/operations/patch-" + id;
      op.done = true;
      return op;
    }
  }
  throw cloud::ApiError("TPU API: nodes.patch " + id + ": NOT_FOUND (404)", 404, "NOT_FOUND");
}

std::map<std::string, std::string> FakeSlices::project_metadata() {
  const std::lock_guard lock(mutex_);
  record("get project");
  return project_metadata_;
}

std::string FakeSlices::os_login_user(const std::string& public_key) {
  const std::lock_guard lock(mutex_);
  record("import key");
  const auto found = os_login_users_.find(public_key);
  if (found == os_login_users_.end()) {
    throw cloud::ApiError("OS Login API: oslogin.users.importSshPublicKey: PERMISSION_DENIED (403)", 403,
                          "PERMISSION_DENIED");
  }
  return found->second;
}

void FakeSlices::set_metadata(const std::string& id, std::map<std::string, std::string> metadata) {
  const std::lock_guard lock(mutex_);
  named(id).metadata = std::move(metadata);
}

void FakeSlices::set_silent_hosts(const std::string& id, int count) {
  const std::lock_guard lock(mutex_);
  named(id).silent_hosts = count;
}

void FakeSlices::set_project_metadata(std::map<std::string, std::string> metadata) {
  const std::lock_guard lock(mutex_);
  project_metadata_ = std::move(metadata);
}

void FakeSlices::set_os_login_user(const std::string& public_key, const std::string& user) {
  const std::lock_guard lock(mutex_);
  os_login_users_[public_key] = user;
}

cloud::Operation FakeSlices::get_operation(const std::string& name) {
  const std::lock_guard lock(mutex_);
  record("get operation " + name.substr(name.rfind('/') + 1));
  const std::string id = name.substr(name.rfind("/create-") + 8);
  cloud::Operation op;
  op.name = name;
  const auto it = create_errors_.find(id);
  if (it != create_errors_.end()) {
    op.done = true;
    op.error = it->second;
  }
  return op;
}

} // namespace jobman::test
