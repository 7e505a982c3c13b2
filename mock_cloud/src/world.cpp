#include "mock_cloud/world.hpp"

#include "jobman/config/accelerator.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/world_store.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <functional>
#include <regex>
#include <sstream>

namespace jobman::mock {

using nlohmann::json;

namespace {

constexpr const char* kOperationMetadataType = "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata";
constexpr const char* kQueuedResourceType = "type.googleapis.com/google.cloud.tpu.v2.QueuedResource";
constexpr const char* kEmptyType = "type.googleapis.com/google.protobuf.Empty";
constexpr int kDefaultPageSize = 50;
constexpr int kMaxPageSize = 1000;

// Resource ids as the API accepts them (RFC 1035 labels).
bool valid_id(const std::string& id) {
  static const std::regex pattern("[a-z]([-a-z0-9]{0,61}[a-z0-9])?");
  return std::regex_match(id, pattern);
}

// "3600s" or "1.5s" (protobuf Duration JSON) into seconds.
std::optional<double> parse_proto_duration(const json& value) {
  if (!value.is_string()) {
    return std::nullopt;
  }
  auto text = value.get<std::string>();
  if (text.size() < 2 || text.back() != 's') {
    return std::nullopt;
  }
  try {
    std::size_t used = 0;
    double seconds = std::stod(text.substr(0, text.size() - 1), &used);
    if (used != text.size() - 1 || !std::isfinite(seconds) || seconds < 0) {
      return std::nullopt;
    }
    return seconds;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// "2026-11-22T05:00:47Z" or with fractional seconds, into epoch milliseconds.
std::optional<std::int64_t> parse_rfc3339_utc(const json& value) {
  if (!value.is_string()) {
    return std::nullopt;
  }
  auto text = value.get<std::string>();
  std::tm tm{};
  const char* rest = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) {
    return std::nullopt;
  }
  while (*rest == '.' || (*rest >= '0' && *rest <= '9')) {
    ++rest;
  }
  if (std::string(rest) != "Z") {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(::timegm(&tm)) * 1000;
}

std::string encode_page_token(std::size_t offset) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string plain = "offset:" + std::to_string(offset);
  std::string out;
  unsigned bits = 0;
  int count = 0;
  for (unsigned char c : plain) {
    bits = (bits << 8) | c;
    count += 8;
    while (count >= 6) {
      count -= 6;
      out += digits[(bits >> count) & 63U];
    }
  }
  if (count > 0) {
    out += digits[(bits << (6 - count)) & 63U];
  }
  return out;
}

std::optional<std::size_t> decode_page_token(const std::string& token) {
  static const std::string digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string plain;
  unsigned bits = 0;
  int count = 0;
  for (char c : token) {
    auto pos = digits.find(c);
    if (pos == std::string::npos) {
      return std::nullopt;
    }
    bits = (bits << 6) | static_cast<unsigned>(pos);
    count += 6;
    if (count >= 8) {
      count -= 8;
      plain += static_cast<char>((bits >> count) & 255U);
    }
  }
  if (plain.rfind("offset:", 0) != 0) {
    return std::nullopt;
  }
  try {
    std::size_t used = 0;
    auto offset = std::stoull(plain.substr(7), &used);
    if (used != plain.size() - 7) {
      return std::nullopt;
    }
    return static_cast<std::size_t>(offset);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// One page of `items` under `field`, with nextPageToken unless it is the last page.
// The resource called `name` in `items`, rendered; a 404 naming it as `kind` when there is none.
template <typename Map, typename Render>
Reply find_reply(const Map& items, const std::string& name, std::string_view kind, Render render) {
  auto it = items.find(name);
  if (it == items.end()) {
    return error_reply(404, std::string(kind) + " '" + name + "' was not found");
  }
  return {200, render(*it->second)};
}

// The resources in `items` whose names start with `prefix`, in name order.
template <typename Map> auto under_prefix(const Map& items, const std::string& prefix) {
  std::vector<const typename Map::mapped_type::element_type*> out;
  for (const auto& [name, item] : items) {
    if (name.rfind(prefix, 0) == 0) {
      out.push_back(item.get());
    }
  }
  return out;
}

// One page of `count` items; only the items on the page are rendered, so a page costs its size, not the list's.
Reply page(std::size_t count, const std::function<json(std::size_t)>& render, const char* field, int page_size,
           const std::string& token) {
  std::size_t offset = 0;
  if (!token.empty()) {
    auto decoded = decode_page_token(token);
    if (!decoded || *decoded > count) {
      return error_reply(400, "Invalid page token: '" + token + "'");
    }
    offset = *decoded;
  }
  if (page_size < 0) {
    return error_reply(400, "pageSize must not be negative");
  }
  auto size = static_cast<std::size_t>(page_size == 0 ? kDefaultPageSize : std::min(page_size, kMaxPageSize));
  json out = json::object();
  out[field] = json::array();
  for (std::size_t i = offset; i < count && i < offset + size; ++i) {
    out[field].push_back(render(i));
  }
  if (offset + size < count) {
    out["nextPageToken"] = encode_page_token(offset + size);
  }
  if (out[field].empty()) {
    out.erase(field);
  }
  return {200, out};
}

std::string pool_key(const std::string& zone, const std::string& generation, Tier tier) {
  return zone + "/" + generation + "/" + std::string(tier_name(tier));
}

} // namespace

std::string status_name(int http_status) {
  switch (http_status) {
  case 400: return "INVALID_ARGUMENT";
  case 401: return "UNAUTHENTICATED";
  case 403: return "PERMISSION_DENIED";
  case 404: return "NOT_FOUND";
  case 409: return "ALREADY_EXISTS";
  case 411: return "INVALID_ARGUMENT";
  case 412: return "FAILED_PRECONDITION";
  case 429: return "RESOURCE_EXHAUSTED";
  case 499: return "CANCELLED";
  case 501: return "UNIMPLEMENTED";
  case 503: return "UNAVAILABLE";
  case 504: return "DEADLINE_EXCEEDED";
  default: return http_status >= 500 ? "INTERNAL" : "UNKNOWN";
  }
}

Reply error_reply(int http_status, const std::string& message) {
  // Messages quote the request (ids, zones, projects), which may hold any bytes; a reply is JSON, so UTF-8 only.
  const std::string text =
      json::parse(json(message).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
  return {http_status, {{"error", {{"code", http_status}, {"message", text}, {"status", status_name(http_status)}}}}};
}

namespace {

// True when `text` is UTF-8, so that a resource named with it can be sent as JSON.
bool is_utf8(const std::string& text) {
  try {
    (void)json(text).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// FAILED_PRECONDITION travels as HTTP 400 with its own status name.
Reply failed_precondition(const std::string& message) {
  Reply reply = error_reply(400, message);
  reply.body["error"]["status"] = "FAILED_PRECONDITION";
  return reply;
}

} // namespace

struct World::Pool {
  std::string zone;
  std::string generation;
  Tier tier = Tier::spot;
  int chips = 0;
  int quota = 0;
  int used = 0;
};

struct World::QueuedResource {
  std::string name; // projects/P/locations/Z/queuedResources/ID
  std::string project;
  std::string zone;
  std::string id;
  json request; // The QueuedResource as the client sent it, minus output-only fields.
  std::string state = "CREATING";
  std::string initiator = "USER";
  std::string accelerator;
  std::string generation;
  Tier tier = Tier::spot;
  int chips = 0;
  int hosts = 0;
  std::string node_name;
  std::int64_t create_ms = 0;
  std::int64_t next_ms = 0;
  std::int64_t queued_seq = 0;
  std::int64_t valid_until_ms = 0;
  std::int64_t preempt_ms = 0;
  std::int64_t maintenance_ms = 0;
  bool holds_capacity = false;
  json failed_error;
  std::string create_op;
  std::string delete_op;
};

struct World::Node {
  std::string name; // projects/P/locations/Z/nodes/ID
  std::string project;
  std::string zone;
  std::string id;
  std::string queued_resource;
  json spec; // The Node from the request's nodeSpec.
  std::string accelerator;
  Tier tier = Tier::spot;
  std::string state = "CREATING";
  std::string health;
  std::int64_t create_ms = 0;
  std::int64_t next_ms = 0;
  std::string numeric_id;
  std::vector<std::pair<std::string, std::string>> endpoints; // internal, external
  bool faulty = false;
  std::string delete_op;
};

struct World::Operation {
  std::string name;
  std::string verb;
  std::string target;
  std::int64_t create_ms = 0;
  std::int64_t end_ms = 0;
  bool done = false;
  json response;
  json error;
};

World::World(MockConfig config, double time_scale, std::uint64_t seed)
    : config_(std::move(config)), time_scale_(time_scale > 0 ? time_scale : 1), rng_(seed) {
  for (const auto& zone : config_.zones) {
    for (const auto& [generation, tiers] : zone.pools) {
      for (const auto& [tier, pool] : tiers) {
        auto entry = std::make_unique<Pool>();
        entry->zone = zone.name;
        entry->generation = generation;
        entry->tier = tier;
        entry->chips = pool.chips;
        entry->quota = pool.quota;
        pools_[pool_key(zone.name, generation, tier)] = std::move(entry);
      }
    }
  }
  next_host_ = static_cast<std::uint32_t>(rng_() % 40000);
}

World::~World() = default;

void World::attach_store(const std::filesystem::path& file, std::int64_t now_ms) {
  auto store = std::make_unique<WorldStore>(file);
  auto contents = store->load();
  if (!contents.globals.is_null()) {
    json snapshot = contents.globals;
    snapshot["requestIds"] = contents.request_ids;
    for (auto& record : contents.records) {
      snapshot[record.value("kind", "")].push_back(std::move(record));
    }
    restore(snapshot);
  }
  std::lock_guard lock(mutex_);
  store_ = std::move(store);
  if (contents.globals.is_null()) {
    // A new database: everything the world already holds is written by the persist below.
    for (const auto& [name, qr] : queued_resources_) {
      changed_.insert(name);
    }
    for (const auto& [name, node] : nodes_) {
      changed_.insert(name);
    }
    for (const auto& [name, op] : operations_) {
      changed_.insert(name);
    }
    new_request_ids_.assign(request_ids_.begin(), request_ids_.end());
  }
  touch_locked();
  tick_locked(now_ms);
  persist_locked();
}

double World::scaled_ms(double seconds) const {
  return seconds * 1000.0 / time_scale_;
}

double World::draw_delay_ms(const DelayDistribution& delay) {
  double seconds = delay.a;
  switch (delay.kind) {
  case DelayDistribution::Kind::fixed: break;
  case DelayDistribution::Kind::uniform:
    seconds = std::uniform_real_distribution<double>(delay.a, delay.b)(rng_);
    break;
  case DelayDistribution::Kind::lognormal:
    seconds = delay.a * std::exp(delay.b * std::normal_distribution<double>(0.0, 1.0)(rng_));
    break;
  }
  return scaled_ms(seconds);
}

std::int64_t World::draw_exponential_ms(double mean_seconds) {
  if (mean_seconds <= 0) {
    return 0;
  }
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  double ms = -std::log(1.0 - u) * scaled_ms(mean_seconds);
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(ms));
}

World::Pool* World::pool_for(const std::string& zone, const std::string& generation, Tier tier) {
  auto it = pools_.find(pool_key(zone, generation, tier));
  return it == pools_.end() ? nullptr : it->second.get();
}

int World::zone_index(const std::string& zone) const {
  for (std::size_t i = 0; i < config_.zones.size(); ++i) {
    if (config_.zones[i].name == zone) {
      return static_cast<int>(i);
    }
  }
  return 255;
}

std::string World::location(const std::string& project, const std::string& zone) const {
  return "projects/" + project + "/locations/" + zone;
}

Reply World::check_location(const std::string& zone) const {
  if (config_.find_zone(zone) == nullptr) {
    return error_reply(404, "Location '" + zone + "' is not served by this mock cloud (see its config's zones)");
  }
  return {200, {}};
}

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

void World::release_capacity(QueuedResource& qr) {
  if (!qr.holds_capacity) {
    return;
  }
  if (auto* pool = pool_for(qr.zone, qr.generation, qr.tier)) {
    pool->used = std::max(0, pool->used - qr.chips);
  }
  qr.holds_capacity = false;
  touch_locked(qr.name);
}

void World::start_suspending(QueuedResource& qr, const std::string& node_state, std::int64_t now) {
  qr.state = "SUSPENDING";
  qr.initiator = "SERVICE";
  qr.next_ms = now + static_cast<std::int64_t>(scaled_ms(config_.suspending_seconds));
  qr.preempt_ms = 0;
  qr.maintenance_ms = 0;
  if (auto it = nodes_.find(qr.node_name); it != nodes_.end()) {
    it->second->state = node_state;
    touch_locked(it->first);
    announce_lost_locked(it->first);
  }
  touch_locked(qr.name);
}

void World::tick(std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  persist_locked();
}

std::int64_t World::next_event_locked() const {
  std::int64_t next = INT64_MAX;
  auto consider = [&next](std::int64_t t) {
    if (t > 0) {
      next = std::min(next, t);
    }
  };
  for (const auto& [name, qr] : queued_resources_) {
    if (qr->state == "CREATING" || qr->state == "PROVISIONING" || qr->state == "SUSPENDING" ||
        qr->state == "DELETING") {
      consider(qr->next_ms);
    } else if (qr->state == "WAITING_FOR_RESOURCES") {
      consider(qr->valid_until_ms);
    } else if (qr->state == "ACTIVE") {
      consider(qr->preempt_ms);
      consider(qr->maintenance_ms);
    }
  }
  for (const auto& [name, node] : nodes_) {
    if (node->state == "DELETING" && !node->delete_op.empty()) {
      consider(node->next_ms);
    }
  }
  return next;
}

void World::set_listener(SliceListener* listener) {
  std::lock_guard lock(mutex_);
  listener_ = listener;
  for (const auto& [name, node] : nodes_) {
    if (node->state == "READY") {
      announce_ready_locked(*node);
    }
  }
}

void World::announce_ready_locked(const Node& node) {
  if (listener_ == nullptr) {
    return;
  }
  SliceHosts slice;
  slice.node_name = node.name;
  slice.numeric_id = node.numeric_id;
  slice.hosts = static_cast<int>(node.endpoints.size());
  slice.faulty = node.faulty;
  listener_->slice_ready(slice);
}

void World::announce_lost_locked(const std::string& node_name) {
  if (listener_ != nullptr) {
    listener_->slice_lost(node_name);
  }
}

void World::touch_locked() {
  dirty_ = true;
  due_ms_ = 0;
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

void World::touch_locked(const std::string& name) {
  changed_.insert(name);
  touch_locked();
}

void World::tick_locked(std::int64_t now) {
  // Nothing changed since the last tick and no timer is due yet: every step would be a no-op, so skip the walk.
  // This keeps reads O(1) in the number of slices.
  if (now < due_ms_) {
    return;
  }
  // Replays every timed event up to `now` at its own time, so sparse ticks give the same history as frequent ones.
  for (int guard = 0; guard < 100'000; ++guard) {
    auto next = next_event_locked();
    if (next > now) {
      break;
    }
    step_locked(next);
  }
  step_locked(now);
  // Admission ran last and found nothing more to admit; until something changes (touch_locked) or the next timer
  // fires, another step would change nothing.
  due_ms_ = next_event_locked();
}

void World::step_locked(std::int64_t now) {
  for (auto it = queued_resources_.begin(); it != queued_resources_.end();) {
    auto& qr = *it->second;
    auto node_it = nodes_.find(qr.node_name);
    Node* node = node_it == nodes_.end() ? nullptr : node_it->second.get();
    if (qr.state == "CREATING" && now >= qr.next_ms) {
      qr.state = "WAITING_FOR_RESOURCES";
      qr.queued_seq = next_sequence_++;
      touch_locked(qr.name);
      auto response = queued_resource_json(qr);
      response["@type"] = kQueuedResourceType;
      finish_operation(qr.create_op, now, response);
    } else if (qr.state == "WAITING_FOR_RESOURCES" && qr.valid_until_ms > 0 && now >= qr.valid_until_ms) {
      qr.state = "FAILED";
      qr.initiator = "SERVICE";
      qr.failed_error = {{"code", 4},
                         {"message", "The queued resource could not be provisioned before its validUntil deadline "
                                     "(queueingPolicy); capacity was not available in time."}};
      touch_locked(qr.name);
    } else if (qr.state == "PROVISIONING" && now >= qr.next_ms) {
      qr.state = "ACTIVE";
      if (node != nullptr) {
        node->state = "READY";
        node->health = "HEALTHY";
        touch_locked(node->name);
        announce_ready_locked(*node);
      }
      if (qr.tier == Tier::spot) {
        auto delay = draw_exponential_ms(config_.spot_mean_seconds_between_preemptions);
        qr.preempt_ms = delay > 0 ? now + delay : 0;
      } else {
        auto delay = draw_exponential_ms(config_.maintenance_mean_seconds_between_events);
        qr.maintenance_ms = delay > 0 ? now + delay : 0;
      }
      touch_locked(qr.name);
    } else if (qr.state == "ACTIVE" && qr.preempt_ms > 0 && now >= qr.preempt_ms) {
      start_suspending(qr, "PREEMPTED", now);
    } else if (qr.state == "ACTIVE" && qr.maintenance_ms > 0 && now >= qr.maintenance_ms) {
      start_suspending(qr, "TERMINATED", now);
    } else if (qr.state == "SUSPENDING" && now >= qr.next_ms) {
      qr.state = "SUSPENDED";
      release_capacity(qr);
      touch_locked(qr.name);
    } else if (qr.state == "DELETING" && now >= qr.next_ms) {
      release_capacity(qr);
      if (node != nullptr && node->queued_resource == qr.name) {
        if (!node->delete_op.empty()) {
          finish_operation(node->delete_op, now, {{"@type", kEmptyType}}); // The node went with its resource.
        }
        touch_locked(node->name);
        announce_lost_locked(node->name);
        nodes_.erase(node_it);
      }
      finish_operation(qr.delete_op, now, {{"@type", kEmptyType}});
      if (!qr.create_op.empty()) {
        finish_operation(qr.create_op, now,
                         {{"error", {{"code", 10}, {"message", "The queued resource was deleted while creating."}}}});
      }
      touch_locked(qr.name);
      it = queued_resources_.erase(it);
      continue;
    }
    ++it;
  }
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    auto& node = *it->second;
    if (node.state == "DELETING" && !node.delete_op.empty() && now >= node.next_ms) {
      finish_operation(node.delete_op, now, {{"@type", kEmptyType}});
      if (auto qr_it = queued_resources_.find(node.queued_resource); qr_it != queued_resources_.end()) {
        auto& qr = *qr_it->second;
        if (qr.state != "DELETING" && qr.state != "FAILED") {
          qr.state = "SUSPENDED";
          qr.initiator = "USER";
          qr.preempt_ms = 0;
          qr.maintenance_ms = 0;
          release_capacity(qr);
        }
        qr.node_name.clear();
        touch_locked(qr.name);
      }
      touch_locked(node.name);
      announce_lost_locked(node.name);
      it = nodes_.erase(it);
      continue;
    }
    ++it;
  }
  admit_locked(now);
}

void World::admit_locked(std::int64_t now) {
  std::vector<QueuedResource*> waiting;
  for (auto& [name, qr] : queued_resources_) {
    if (qr->state == "WAITING_FOR_RESOURCES") {
      waiting.push_back(qr.get());
    }
  }
  std::sort(waiting.begin(), waiting.end(),
            [](const QueuedResource* a, const QueuedResource* b) { return a->queued_seq < b->queued_seq; });
  std::map<std::string, bool> blocked; // A pool whose head does not fit admits nobody behind it (strict FIFO).
  for (auto* qr : waiting) {
    auto key = pool_key(qr->zone, qr->generation, qr->tier);
    if (blocked[key]) {
      continue;
    }
    auto* pool = pool_for(qr->zone, qr->generation, qr->tier);
    if (pool == nullptr || pool->chips - pool->used < qr->chips) {
      blocked[key] = true;
      continue;
    }
    pool->used += qr->chips;
    qr->holds_capacity = true;
    qr->state = "PROVISIONING";
    qr->next_ms = now + static_cast<std::int64_t>(draw_delay_ms(config_.provisioning_for(qr->generation)));
    auto node = std::make_unique<Node>();
    const auto& spec = qr->request["tpu"]["nodeSpec"][0];
    node->id = spec["nodeId"].get<std::string>();
    node->name = location(qr->project, qr->zone) + "/nodes/" + node->id;
    node->project = qr->project;
    node->zone = qr->zone;
    node->queued_resource = qr->name;
    node->spec = spec.value("node", json::object());
    node->accelerator = qr->accelerator;
    node->tier = qr->tier;
    node->create_ms = now;
    node->numeric_id = std::to_string(1'000'000'000'000'000ULL + rng_() % 8'000'000'000'000'000ULL);
    int zi = zone_index(qr->zone);
    for (int h = 0; h < qr->hosts; ++h) {
      std::uint32_t n = next_host_++;
      std::string internal =
          "10." + std::to_string(zi) + "." + std::to_string((n / 254) % 256) + "." + std::to_string(n % 254 + 1);
      auto r = rng_();
      std::string external = "34." + std::to_string(r % 256) + "." + std::to_string((r >> 8) % 256) + "." +
                             std::to_string((r >> 16) % 254 + 1);
      node->endpoints.emplace_back(internal, external);
    }
    qr->node_name = node->name;
    touch_locked(qr->name);
    touch_locked(node->name);
    nodes_[node->name] = std::move(node);
  }
}

json World::queued_resource_json(const QueuedResource& qr) const {
  json out = qr.request;
  out["name"] = qr.name;
  out["createTime"] = util::format_utc(qr.create_ms);
  auto& spec = out["tpu"]["nodeSpec"][0];
  spec["parent"] = location(qr.project, qr.zone);
  spec["node"]["acceleratorType"] = qr.accelerator;
  json state = {{"state", qr.state}, {"stateInitiator", qr.initiator}};
  static const std::map<std::string, std::string> data_keys = {
      {"CREATING", "creatingData"},   {"ACCEPTED", "acceptedData"}, {"PROVISIONING", "provisioningData"},
      {"DELETING", "deletingData"},   {"ACTIVE", "activeData"},     {"SUSPENDING", "suspendingData"},
      {"SUSPENDED", "suspendedData"}, {"FAILED", "failedData"}};
  if (auto it = data_keys.find(qr.state); it != data_keys.end()) {
    state[it->second] = json::object();
  }
  if (qr.state == "FAILED" && !qr.failed_error.is_null()) {
    state["failedData"]["error"] = qr.failed_error;
  }
  out["state"] = state;
  return out;
}

json World::node_json(const Node& node) const {
  json out = node.spec.is_object() ? node.spec : json::object();
  out["name"] = node.name;
  out["id"] = node.numeric_id;
  out["acceleratorType"] = node.accelerator;
  out["state"] = node.state;
  if (!node.health.empty()) {
    out["health"] = node.health;
  }
  out["createTime"] = util::format_utc(node.create_ms);
  out["apiVersion"] = "V2";
  out["queuedResource"] = node.queued_resource;
  json endpoints = json::array();
  for (const auto& [internal, external] : node.endpoints) {
    endpoints.push_back({{"ipAddress", internal}, {"port", 8470}, {"accessConfig", {{"externalIp", external}}}});
  }
  out["networkEndpoints"] = endpoints;
  json scheduling = out.value("schedulingConfig", json::object());
  if (!scheduling.is_object()) {
    scheduling = json::object();
  }
  if (node.tier == Tier::spot) {
    scheduling["spot"] = true;
  } else {
    scheduling.erase("spot");
  }
  if (scheduling.empty()) {
    out.erase("schedulingConfig");
  } else {
    out["schedulingConfig"] = scheduling;
  }
  return out;
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

Reply World::create_queued_resource(const std::string& project, const std::string& zone, const std::string& id,
                                    const std::string& request_id, const json& body, std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  if (!is_utf8(project)) {
    return error_reply(400, "Invalid project '" + project + "': not UTF-8 text");
  }
  auto loc = location(project, zone);
  const auto name = loc + "/queuedResources/" + id;
  const auto request_key = "create " + name + " " + request_id;
  if (const auto* op = operation_for_request(request_id.empty() ? "" : request_key)) {
    return {200, operation_json(*op)};
  }
  if (id.empty()) {
    return error_reply(400, "queuedResourceId is required");
  }
  if (!valid_id(id)) {
    return error_reply(400, "Invalid queuedResourceId '" + id +
                                "': use lowercase letters, digits and hyphens, starting with a letter (at most 63)");
  }
  if (!body.is_object()) {
    return error_reply(400, "The request body must be a QueuedResource JSON object");
  }
  if (queued_resources_.count(name) != 0) {
    return error_reply(409, "Queued resource '" + name + "' already exists");
  }
  const json* specs = nullptr;
  if (body.contains("tpu") && body["tpu"].is_object() && body["tpu"].contains("nodeSpec")) {
    specs = &body["tpu"]["nodeSpec"];
  }
  if (specs == nullptr || !specs->is_array() || specs->empty()) {
    return error_reply(400, "tpu.nodeSpec must list one node");
  }
  if (specs->size() != 1) {
    return error_reply(400, "tpu.nodeSpec: the mock cloud supports one node per queued resource (no multislice)");
  }
  const json& spec = (*specs)[0];
  if (!spec.is_object() || !spec.contains("nodeId") || !spec["nodeId"].is_string() ||
      !valid_id(spec["nodeId"].get<std::string>())) {
    return error_reply(400, "tpu.nodeSpec[0].nodeId is missing or not a valid id");
  }
  if (spec.contains("parent") && spec["parent"] != loc) {
    return error_reply(400, "tpu.nodeSpec[0].parent must be '" + loc + "'");
  }
  if (!spec.contains("node") || !spec["node"].is_object() || !spec["node"].contains("acceleratorType") ||
      !spec["node"]["acceleratorType"].is_string()) {
    return error_reply(400, "tpu.nodeSpec[0].node.acceleratorType is required");
  }
  std::string why;
  auto accelerator = config::find_accelerator(spec["node"]["acceleratorType"].get<std::string>(), &why);
  if (!accelerator) {
    return error_reply(400,
                       "Unknown accelerator type '" + spec["node"]["acceleratorType"].get<std::string>() + "': " + why);
  }
  bool has_spot = body.contains("spot");
  if (has_spot && body.contains("guaranteed")) {
    return error_reply(400, "A queued resource cannot be both spot and guaranteed");
  }
  const auto& node_body = spec["node"];
  bool node_spot = false;
  if (node_body.contains("schedulingConfig") && node_body["schedulingConfig"].is_object() &&
      node_body["schedulingConfig"].contains("spot")) {
    const auto& spot = node_body["schedulingConfig"]["spot"];
    if (!spot.is_boolean()) {
      return error_reply(400, "tpu.nodeSpec[0].node.schedulingConfig.spot must be true or false");
    }
    node_spot = spot.get<bool>();
  }
  Tier tier = has_spot || node_spot ? Tier::spot : Tier::on_demand;
  std::int64_t valid_until = 0;
  if (body.contains("queueingPolicy")) {
    const auto& policy = body["queueingPolicy"];
    if (!policy.is_object()) {
      return error_reply(400, "queueingPolicy must be an object");
    }
    if (policy.contains("validUntilDuration")) {
      auto seconds = parse_proto_duration(policy["validUntilDuration"]);
      if (!seconds) {
        return error_reply(400, "queueingPolicy.validUntilDuration must be a duration such as \"3600s\"");
      }
      valid_until = now_ms + std::max<std::int64_t>(1, static_cast<std::int64_t>(scaled_ms(*seconds)));
    }
    if (policy.contains("validUntilTime")) {
      auto when = parse_rfc3339_utc(policy["validUntilTime"]);
      if (!when) {
        return error_reply(400, "queueingPolicy.validUntilTime must be an RFC 3339 UTC time");
      }
      valid_until = *when;
    }
  }
  std::string node_name = loc + "/nodes/" + spec["nodeId"].get<std::string>();
  if (nodes_.count(node_name) != 0) {
    return error_reply(409, "Node '" + node_name + "' already exists");
  }
  for (const auto& [other_name, other] : queued_resources_) {
    if (other->project == project && other->zone == zone &&
        other->request["tpu"]["nodeSpec"][0]["nodeId"] == spec["nodeId"] && other->state != "DELETING") {
      std::string message = "Node '";
      message.append(node_name).append("' is already requested by queued resource '").append(other_name).append("'");
      return error_reply(409, message);
    }
  }
  auto* pool = pool_for(zone, accelerator->generation->name, tier);
  if (pool == nullptr) {
    return error_reply(400, "Accelerator type " + accelerator->name + " (" + std::string(tier_name(tier)) +
                                ") is not offered in zone " + zone);
  }
  if (auto r = check_quota(project, *pool, accelerator->chips); !r.ok()) {
    return r;
  }
  auto qr = std::make_unique<QueuedResource>();
  qr->name = name;
  qr->project = project;
  qr->zone = zone;
  qr->id = id;
  qr->request = body;
  for (const char* output_only : {"name", "createTime", "state"}) {
    qr->request.erase(output_only);
  }
  for (const char* output_only : {"name", "state", "health", "networkEndpoints", "createTime", "queuedResource", "id",
                                  "apiVersion", "symptoms", "multisliceNode"}) {
    qr->request["tpu"]["nodeSpec"][0]["node"].erase(output_only);
  }
  qr->accelerator = accelerator->name;
  qr->generation = accelerator->generation->name;
  qr->tier = tier;
  qr->chips = accelerator->chips;
  qr->hosts = accelerator->hosts;
  qr->node_name = node_name;
  qr->create_ms = now_ms;
  qr->next_ms = now_ms + static_cast<std::int64_t>(scaled_ms(config_.creating_seconds));
  qr->valid_until_ms = valid_until;
  qr->create_op = new_operation(project, zone, "create", name, now_ms);
  auto op_name = qr->create_op;
  queued_resources_[name] = std::move(qr);
  ++queued_resources_created_;
  if (!request_id.empty()) {
    remember_request_id(request_key, op_name);
  }
  touch_locked(name);
  tick_locked(now_ms);
  persist_locked();
  return {200, operation_json(*operations_[op_name])};
}

Reply World::check_quota(const std::string& project, const Pool& pool, int chips) const {
  int held = 0;
  for (const auto& [name, other] : queued_resources_) {
    if (other->project == project && other->zone == pool.zone && other->generation == pool.generation &&
        other->tier == pool.tier && other->state != "FAILED" && other->state != "SUSPENDED" &&
        other->state != "DELETING") {
      held += other->chips;
    }
  }
  if (held + chips <= pool.quota) {
    return {200, {}};
  }
  return error_reply(429, "Quota exceeded: " + std::to_string(chips) + " " + pool.generation + " " +
                              std::string(tier_name(pool.tier)) + " chips requested in " + pool.zone + ", " +
                              std::to_string(held) + " of the quota of " + std::to_string(pool.quota) +
                              " already in use");
}

Reply World::get_queued_resource(const std::string& project, const std::string& zone, const std::string& id,
                                 std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  persist_locked();
  return find_reply(queued_resources_, location(project, zone) + "/queuedResources/" + id, "Queued resource",
                    [this](const QueuedResource& qr) { return queued_resource_json(qr); });
}

Reply World::list_queued_resources(const std::string& project, const std::string& zone, int page_size,
                                   const std::string& page_token, std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  persist_locked();
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  const auto items = under_prefix(queued_resources_, location(project, zone) + "/");
  return page(
      items.size(), [&](std::size_t i) { return queued_resource_json(*items[i]); }, "queuedResources", page_size,
      page_token);
}

Reply World::delete_queued_resource(const std::string& project, const std::string& zone, const std::string& id,
                                    bool force, const std::string& request_id, std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  auto loc = location(project, zone);
  const auto name = loc + "/queuedResources/" + id;
  const auto request_key = "delete " + name + " " + request_id;
  if (const auto* op = operation_for_request(request_id.empty() ? "" : request_key)) {
    persist_locked();
    return {200, operation_json(*op)};
  }
  auto it = queued_resources_.find(name);
  if (it == queued_resources_.end()) {
    persist_locked();
    return error_reply(404, "Queued resource '" + name + "' was not found");
  }
  auto& qr = *it->second;
  if (qr.state == "DELETING") {
    persist_locked();
    return {200, operation_json(*operations_[qr.delete_op])};
  }
  if ((qr.state == "ACTIVE" || qr.state == "PROVISIONING") && !force) {
    persist_locked();
    return failed_precondition("Queued resource '" + name + "' is " + qr.state +
                               " and has a node; delete it with force=true");
  }
  qr.state = "DELETING";
  qr.initiator = "USER";
  qr.preempt_ms = 0;
  qr.maintenance_ms = 0;
  qr.next_ms = now_ms + static_cast<std::int64_t>(scaled_ms(config_.deleting_seconds));
  if (auto node = nodes_.find(qr.node_name); node != nodes_.end() && node->second->queued_resource == qr.name) {
    node->second->state = "DELETING";
    node->second->health.clear();
    touch_locked(node->first);
    announce_lost_locked(node->first);
  }
  qr.delete_op = new_operation(project, zone, "delete", name, now_ms);
  if (!request_id.empty()) {
    remember_request_id(request_key, qr.delete_op);
  }
  auto op_name = qr.delete_op;
  touch_locked(name);
  tick_locked(now_ms);
  persist_locked();
  return {200, operation_json(*operations_[op_name])};
}

Reply World::reset_queued_resource(const std::string& project, const std::string& zone, const std::string& id,
                                   std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  auto name = location(project, zone) + "/queuedResources/" + id;
  auto it = queued_resources_.find(name);
  if (it == queued_resources_.end()) {
    persist_locked();
    return error_reply(404, "Queued resource '" + name + "' was not found");
  }
  auto& qr = *it->second;
  if (qr.state != "SUSPENDED" && qr.state != "FAILED") {
    persist_locked();
    return failed_precondition("Queued resource '" + name + "' is " + qr.state +
                               "; only a SUSPENDED or FAILED queued resource can be reset");
  }
  if (const auto* pool = pool_for(qr.zone, qr.generation, qr.tier)) {
    if (auto r = check_quota(project, *pool, qr.chips); !r.ok()) {
      persist_locked();
      return r;
    }
  }
  if (auto node = nodes_.find(qr.node_name); node != nodes_.end() && node->second->queued_resource == qr.name) {
    touch_locked(node->first);
    announce_lost_locked(node->first);
    nodes_.erase(node);
  }
  qr.node_name = location(project, zone) + "/nodes/" + qr.request["tpu"]["nodeSpec"][0]["nodeId"].get<std::string>();
  release_capacity(qr);
  qr.state = "WAITING_FOR_RESOURCES";
  qr.initiator = "USER";
  qr.failed_error = nullptr;
  qr.queued_seq = next_sequence_++;
  qr.valid_until_ms = 0;
  if (auto policy = qr.request.find("queueingPolicy"); policy != qr.request.end() && policy->is_object()) {
    if (auto seconds = parse_proto_duration(policy->value("validUntilDuration", json()))) {
      qr.valid_until_ms = now_ms + std::max<std::int64_t>(1, static_cast<std::int64_t>(scaled_ms(*seconds)));
    }
  }
  auto op_name = new_operation(project, zone, "reset", name, now_ms);
  auto response = queued_resource_json(qr);
  response["@type"] = kQueuedResourceType;
  finish_operation(op_name, now_ms, response);
  touch_locked(name);
  tick_locked(now_ms);
  persist_locked();
  return {200, operation_json(*operations_[op_name])};
}

Reply World::get_node(const std::string& project, const std::string& zone, const std::string& id, std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  persist_locked();
  return find_reply(nodes_, location(project, zone) + "/nodes/" + id, "Node",
                    [this](const Node& node) { return node_json(node); });
}

Reply World::list_nodes(const std::string& project, const std::string& zone, int page_size,
                        const std::string& page_token, std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  persist_locked();
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  const auto items = under_prefix(nodes_, location(project, zone) + "/");
  return page(
      items.size(), [&](std::size_t i) { return node_json(*items[i]); }, "nodes", page_size, page_token);
}

Reply World::delete_node(const std::string& project, const std::string& zone, const std::string& id,
                         std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  auto name = location(project, zone) + "/nodes/" + id;
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    persist_locked();
    return error_reply(404, "Node '" + name + "' was not found");
  }
  auto& node = *it->second;
  if (node.state == "DELETING" && !node.delete_op.empty()) {
    persist_locked();
    return {200, operation_json(*operations_[node.delete_op])};
  }
  if (node.state == "DELETING") {
    persist_locked();
    return failed_precondition("Node '" + name + "' is being deleted with its queued resource");
  }
  node.state = "DELETING";
  node.health.clear();
  announce_lost_locked(name);
  node.next_ms = now_ms + static_cast<std::int64_t>(scaled_ms(config_.deleting_seconds));
  node.delete_op = new_operation(project, zone, "delete", name, now_ms);
  // The node's queued resource loses its slice: it suspends until the node is gone, and never provisions or gets
  // preempted meanwhile (its own timers would otherwise bring the node back to READY).
  if (auto qr = queued_resources_.find(node.queued_resource);
      qr != queued_resources_.end() && (qr->second->state == "PROVISIONING" || qr->second->state == "ACTIVE")) {
    qr->second->state = "SUSPENDING";
    qr->second->initiator = "USER";
    qr->second->next_ms = node.next_ms;
    qr->second->preempt_ms = 0;
    qr->second->maintenance_ms = 0;
    touch_locked(qr->first);
  }
  auto op_name = node.delete_op;
  touch_locked(name);
  tick_locked(now_ms);
  persist_locked();
  return {200, operation_json(*operations_[op_name])};
}

Reply World::get_operation(const std::string& project, const std::string& zone, const std::string& id,
                           std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  persist_locked();
  return find_reply(operations_, location(project, zone) + "/operations/" + id, "Operation",
                    [this](const Operation& op) { return operation_json(op); });
}

Reply World::list_operations(const std::string& project, const std::string& zone, int page_size,
                             const std::string& page_token, std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  persist_locked();
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  auto ops = under_prefix(operations_, location(project, zone) + "/");
  std::stable_sort(ops.begin(), ops.end(),
                   [](const Operation* a, const Operation* b) { return a->create_ms < b->create_ms; });
  return page(
      ops.size(), [&](std::size_t i) { return operation_json(*ops[i]); }, "operations", page_size, page_token);
}

Reply World::preempt_node(const std::string& project, const std::string& zone, const std::string& id,
                          std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  auto name = location(project, zone) + "/nodes/" + id;
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    persist_locked();
    return error_reply(404, "Node '" + name + "' was not found");
  }
  auto qr = queued_resources_.find(it->second->queued_resource);
  if (it->second->state != "READY" || qr == queued_resources_.end() || qr->second->state != "ACTIVE") {
    persist_locked();
    return failed_precondition("Node '" + name + "' is " + it->second->state + "; only a READY node can be preempted");
  }
  start_suspending(*qr->second, "PREEMPTED", now_ms);
  persist_locked();
  return {200, node_json(*it->second)};
}

Reply World::mark_node_faulty(const std::string& project, const std::string& zone, const std::string& id,
                              std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  auto name = location(project, zone) + "/nodes/" + id;
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    persist_locked();
    return error_reply(404, "Node '" + name + "' was not found");
  }
  it->second->faulty = true;
  touch_locked(name);
  if (listener_ != nullptr) {
    listener_->slice_faulty(name);
  }
  persist_locked();
  return {200, {{"node", name}, {"faulty", true}}};
}

bool World::node_faulty(const std::string& project, const std::string& zone, const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = nodes_.find(location(project, zone) + "/nodes/" + id);
  return it != nodes_.end() && it->second->faulty;
}

void World::set_faults(const FaultSettings& faults) {
  std::lock_guard lock(mutex_);
  faults_ = faults.rate <= 0 ? FaultSettings{} : faults;
}

FaultDecision World::decide_fault() {
  std::lock_guard lock(mutex_);
  FaultDecision decision;
  if (faults_.rate <= 0) {
    return decision;
  }
  decision.latency_ms = faults_.latency_ms;
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  if (u < faults_.rate && !faults_.codes.empty()) {
    decision.fail_status = faults_.codes[rng_() % faults_.codes.size()];
  }
  return decision;
}

Reply World::set_capacity(const std::string& zone, const std::string& generation, Tier tier, int chips,
                          std::optional<int> quota, std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  bool known = std::any_of(config::tpu_generations().begin(), config::tpu_generations().end(),
                           [&](const auto& g) { return g.name == generation; });
  if (!known) {
    return error_reply(400, "Unknown TPU generation '" + generation + "'");
  }
  if (chips < 0 || (quota && *quota < 0)) {
    return error_reply(400, "chips and quota must not be negative");
  }
  auto key = pool_key(zone, generation, tier);
  auto& pool = pools_[key];
  if (!pool) {
    pool = std::make_unique<Pool>();
    pool->zone = zone;
    pool->generation = generation;
    pool->tier = tier;
    pool->quota = chips;
  }
  pool->chips = chips;
  if (quota) {
    pool->quota = *quota;
  }
  touch_locked();
  tick_locked(now_ms);
  persist_locked();
  return {200,
          {{"zone", zone},
           {"generation", generation},
           {"tier", tier_name(tier)},
           {"chips", pool->chips},
           {"quota", pool->quota},
           {"inUse", pool->used}}};
}

void World::count_request(const std::string& method, int status) {
  std::lock_guard lock(mutex_);
  ++request_counts_[method][std::to_string(status)];
}

json World::metrics(std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  tick_locked(now_ms);
  persist_locked();
  json out;
  out["requests"] = json::object();
  for (const auto& [method, by_status] : request_counts_) {
    for (const auto& [status, count] : by_status) {
      out["requests"][method][status] = count;
    }
  }
  out["queuedResources"] = json::object();
  for (const auto& [name, qr] : queued_resources_) {
    out["queuedResources"][qr->state] = out["queuedResources"].value(qr->state, 0) + 1;
  }
  out["nodes"] = json::object();
  out["faultyNodes"] = json::array();
  for (const auto& [name, node] : nodes_) {
    out["nodes"][node->state] = out["nodes"].value(node->state, 0) + 1;
    if (node->faulty) {
      out["faultyNodes"].push_back(name);
    }
  }
  out["capacity"] = json::array();
  for (const auto& [key, pool] : pools_) {
    out["capacity"].push_back({{"zone", pool->zone},
                               {"generation", pool->generation},
                               {"tier", tier_name(pool->tier)},
                               {"chips", pool->chips},
                               {"quota", pool->quota},
                               {"inUse", pool->used}});
  }
  out["faults"] = {{"rate", faults_.rate}, {"codes", faults_.codes}, {"latency_ms", faults_.latency_ms}};
  out["queuedResourcesCreated"] = queued_resources_created_;
  out["processes_running"] = 0;
  return out;
}

json World::snapshot() {
  std::lock_guard lock(mutex_);
  return snapshot_locked();
}

json World::globals_locked() const {
  json out;
  out["version"] = 1;
  out["nextSequence"] = next_sequence_;
  out["nextHost"] = next_host_;
  std::ostringstream rng;
  rng << rng_;
  out["rng"] = rng.str();
  out["pools"] = json::array();
  for (const auto& [key, pool] : pools_) {
    out["pools"].push_back({{"zone", pool->zone},
                            {"generation", pool->generation},
                            {"tier", tier_name(pool->tier)},
                            {"chips", pool->chips},
                            {"quota", pool->quota}});
  }
  return out;
}

json World::record_of(const QueuedResource& qr) {
  return {{"kind", "queuedResources"},
          {"name", qr.name},
          {"project", qr.project},
          {"zone", qr.zone},
          {"id", qr.id},
          {"request", qr.request},
          {"state", qr.state},
          {"initiator", qr.initiator},
          {"accelerator", qr.accelerator},
          {"generation", qr.generation},
          {"tier", tier_name(qr.tier)},
          {"chips", qr.chips},
          {"hosts", qr.hosts},
          {"node", qr.node_name},
          {"createMs", qr.create_ms},
          {"nextMs", qr.next_ms},
          {"queuedSeq", qr.queued_seq},
          {"validUntilMs", qr.valid_until_ms},
          {"preemptMs", qr.preempt_ms},
          {"maintenanceMs", qr.maintenance_ms},
          {"holdsCapacity", qr.holds_capacity},
          {"failedError", qr.failed_error},
          {"createOp", qr.create_op},
          {"deleteOp", qr.delete_op}};
}

json World::record_of(const Node& node) {
  json endpoints = json::array();
  for (const auto& [internal, external] : node.endpoints) {
    endpoints.push_back({internal, external});
  }
  return {{"kind", "nodes"},
          {"name", node.name},
          {"project", node.project},
          {"zone", node.zone},
          {"id", node.id},
          {"queuedResource", node.queued_resource},
          {"spec", node.spec},
          {"accelerator", node.accelerator},
          {"tier", tier_name(node.tier)},
          {"state", node.state},
          {"health", node.health},
          {"createMs", node.create_ms},
          {"nextMs", node.next_ms},
          {"numericId", node.numeric_id},
          {"endpoints", endpoints},
          {"faulty", node.faulty},
          {"deleteOp", node.delete_op}};
}

json World::record_of(const Operation& op) {
  return {{"kind", "operations"}, {"name", op.name},          {"verb", op.verb},
          {"target", op.target},  {"createMs", op.create_ms}, {"endMs", op.end_ms},
          {"done", op.done},      {"response", op.response},  {"error", op.error}};
}

json World::snapshot_locked() const {
  json out = globals_locked();
  out["requestIds"] = request_ids_;
  out["queuedResources"] = json::array();
  for (const auto& [name, qr] : queued_resources_) {
    out["queuedResources"].push_back(record_of(*qr));
  }
  out["nodes"] = json::array();
  for (const auto& [name, node] : nodes_) {
    out["nodes"].push_back(record_of(*node));
  }
  out["operations"] = json::array();
  for (const auto& [name, op] : operations_) {
    out["operations"].push_back(record_of(*op));
  }
  return out;
}

void World::restore(const json& snapshot) {
  std::lock_guard lock(mutex_);
  auto tier_of = [](const json& value) { return value.get<std::string>() == "spot" ? Tier::spot : Tier::on_demand; };
  next_sequence_ = snapshot.value("nextSequence", std::int64_t{1});
  next_host_ = snapshot.value("nextHost", std::uint32_t{0});
  request_ids_ = snapshot.value("requestIds", std::map<std::string, std::string>{});
  for (const auto& p : snapshot.value("pools", json::array())) {
    auto tier = tier_of(p["tier"]);
    auto& pool = pools_[pool_key(p["zone"], p["generation"], tier)];
    if (!pool) {
      pool = std::make_unique<Pool>();
    }
    pool->zone = p["zone"];
    pool->generation = p["generation"];
    pool->tier = tier;
    pool->chips = p["chips"];
    pool->quota = p["quota"];
    pool->used = 0;
  }
  queued_resources_.clear();
  nodes_.clear();
  operations_.clear();
  for (const auto& q : snapshot.value("queuedResources", json::array())) {
    auto qr = std::make_unique<QueuedResource>();
    qr->name = q["name"];
    qr->project = q["project"];
    qr->zone = q["zone"];
    qr->id = q["id"];
    qr->request = q["request"];
    qr->state = q["state"];
    qr->initiator = q["initiator"];
    qr->accelerator = q["accelerator"];
    qr->generation = q["generation"];
    qr->tier = tier_of(q["tier"]);
    qr->chips = q["chips"];
    qr->hosts = q["hosts"];
    qr->node_name = q["node"];
    qr->create_ms = q["createMs"];
    qr->next_ms = q["nextMs"];
    qr->queued_seq = q["queuedSeq"];
    qr->valid_until_ms = q["validUntilMs"];
    qr->preempt_ms = q["preemptMs"];
    qr->maintenance_ms = q["maintenanceMs"];
    qr->holds_capacity = q["holdsCapacity"];
    qr->failed_error = q["failedError"];
    qr->create_op = q["createOp"];
    qr->delete_op = q["deleteOp"];
    if (qr->holds_capacity) {
      if (auto* pool = pool_for(qr->zone, qr->generation, qr->tier)) {
        pool->used += qr->chips;
      }
    }
    auto name = qr->name;
    queued_resources_[name] = std::move(qr);
  }
  for (const auto& n : snapshot.value("nodes", json::array())) {
    auto node = std::make_unique<Node>();
    node->name = n["name"];
    node->project = n["project"];
    node->zone = n["zone"];
    node->id = n["id"];
    node->queued_resource = n["queuedResource"];
    node->spec = n["spec"];
    node->accelerator = n["accelerator"];
    node->tier = tier_of(n["tier"]);
    node->state = n["state"];
    node->health = n["health"];
    node->create_ms = n["createMs"];
    node->next_ms = n["nextMs"];
    node->numeric_id = n["numericId"];
    for (const auto& e : n["endpoints"]) {
      node->endpoints.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    }
    node->faulty = n["faulty"];
    node->delete_op = n["deleteOp"];
    auto name = node->name;
    nodes_[name] = std::move(node);
  }
  for (const auto& o : snapshot.value("operations", json::array())) {
    auto op = std::make_unique<Operation>();
    op->name = o["name"];
    op->verb = o["verb"];
    op->target = o["target"];
    op->create_ms = o["createMs"];
    op->end_ms = o["endMs"];
    op->done = o["done"];
    op->response = o["response"];
    op->error = o["error"];
    auto name = op->name;
    operations_[name] = std::move(op);
  }
  if (snapshot.contains("rng")) {
    // The generator's state, so a restarted world draws the same delays the original would have.
    std::istringstream in(snapshot["rng"].get<std::string>());
    in >> rng_;
  }
  touch_locked();
}

void World::persist_locked() {
  if (!dirty_ || !store_) {
    return;
  }
  WorldStore::Changes changes;
  changes.globals = globals_locked().dump();
  for (const auto& name : changed_) {
    if (auto qr = queued_resources_.find(name); qr != queued_resources_.end()) {
      changes.upserts.emplace_back(name, record_of(*qr->second).dump());
    } else if (auto node = nodes_.find(name); node != nodes_.end()) {
      changes.upserts.emplace_back(name, record_of(*node->second).dump());
    } else if (auto op = operations_.find(name); op != operations_.end()) {
      changes.upserts.emplace_back(name, record_of(*op->second).dump());
    } else {
      changes.removed.push_back(name);
    }
  }
  changes.request_ids = std::move(new_request_ids_);
  store_->save(changes);
  changed_.clear();
  new_request_ids_.clear();
  dirty_ = false;
}

} // namespace jobman::mock
