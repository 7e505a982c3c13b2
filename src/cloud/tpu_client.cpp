#include "jobman/cloud/tpu_client.hpp"

#include "jobman/util/json_text.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cctype>
#include <mutex>
#include <random>
#include <set>
#include <spdlog/spdlog.h>
#include <thread>

namespace jobman::cloud {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// One API call, for the request and for messages.
struct Call {
  std::string method;      // "queuedResources.create".
  std::string resource;    // The resource or parent it acts on.
  std::string http_method; // GET, POST, DELETE.
  std::string url;         // Absolute, with the query string.
  std::string body;        // JSON text for POST.
};

// A successful answer, or one of the statuses the caller accepted.
struct Answer {
  int status = 0;
  json body;
};

// The API a method belongs to, as messages name it: "compute.projects.get" is the Compute API's, "oslogin.users..."
// OS Login's, the rest the TPU API's.
std::string api_label(const std::string& method) {
  if (method.starts_with("compute.")) {
    return "Compute API";
  }
  if (method.starts_with("oslogin.")) {
    return "OS Login API";
  }
  if (method.starts_with("storage.")) {
    return "Cloud Storage";
  }
  return "TPU API";
}

// "TPU API: <method> <resource>: <STATUS> (<http>): <message>" from a google.rpc error body.
ApiError api_error(const Call& call, const HttpResponse& response) {
  const std::string prefix = api_label(call.method) + ": " + call.method + " " + call.resource + ": ";
  if (response.failure != TransportFailure::none) {
    return {prefix + "cannot reach " + call.url.substr(0, call.url.find('?')) + " (" + to_string(response.failure) +
                "): " + response.error,
            0, ""};
  }
  const auto body = util::parse_json_bounded(response.body);
  std::string status;
  std::string message;
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const auto& error = body["error"];
    if (error.contains("status") && error["status"].is_string()) {
      status = error["status"].get<std::string>();
    }
    if (error.contains("message") && error["message"].is_string()) {
      message = error["message"].get<std::string>();
    }
  }
  if (message.empty()) {
    message = response.body.substr(0, 200);
    std::replace(message.begin(), message.end(), '\n', ' ');
  }
  const std::string code = status.empty() ? "HTTP " + std::to_string(response.status)
                                          : status + " (" + std::to_string(response.status) + ")";
  return {prefix + code + (message.empty() ? "" : ": " + message), response.status, status};
}

// `url` with one '/' at its end.
std::string with_slash(std::string url) {
  while (!url.empty() && url.back() == '/') {
    url.pop_back();
  }
  return url + "/";
}

// An account for a users/{user} path: an email as it is, anything else percent-encoded.
std::string user_path(const std::string& account) {
  const bool plain = !account.empty() && std::all_of(account.begin(), account.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '@' || c == '.' || c == '-' || c == '_' || c == '+';
  });
  return plain ? account : url_encode(account);
}

std::string normalise_endpoint(std::string url) {
  while (!url.empty() && url.back() == '/') {
    url.pop_back();
  }
  if (url.size() < 3 || url.compare(url.size() - 3, 3, "/v2") != 0) {
    url += "/v2";
  }
  return url + "/";
}

} // namespace

std::string resolve_tpu_endpoint(std::string_view configured) {
  if (auto env = util::getenv_nonempty("JOBMAN_API_ENDPOINT")) {
    return normalise_endpoint(*env);
  }
  if (!configured.empty()) {
    return normalise_endpoint(std::string(configured));
  }
  return kDefaultTpuEndpoint;
}

std::string resolve_storage_endpoint(std::string_view tpu_endpoint) {
  const auto scheme = tpu_endpoint.find("://");
  if (scheme == std::string_view::npos) {
    return kDefaultStorageEndpoint;
  }
  const auto origin = tpu_endpoint.substr(0, tpu_endpoint.find('/', scheme + 3));
  auto host = std::string(origin.substr(scheme + 3));
  if (host.starts_with('[')) {
    host = host.substr(1, host.find(']') - 1);
  } else {
    host = host.substr(0, host.find(':'));
  }
  in_addr v4{};
  in6_addr v6{};
  const bool loopback = host == "localhost" ||
                        (::inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127) ||
                        (::inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6));
  return loopback ? std::string(origin) + "/storage/v1/" : kDefaultStorageEndpoint;
}

struct TpuClient::Impl {
  std::shared_ptr<CachedTokenSource> tokens;
  TpuClientOptions options;
  HttpClient http;
  std::mutex random_mutex;
  std::mt19937_64 random{std::random_device{}()};

  Impl(std::shared_ptr<CachedTokenSource> token_source, TpuClientOptions client_options)
      : tokens(std::move(token_source)), options(std::move(client_options)), http(options.http) {
    options.endpoint = normalise_endpoint(options.endpoint);
    options.compute_endpoint = with_slash(options.compute_endpoint);
    options.oslogin_endpoint = with_slash(options.oslogin_endpoint);
    options.storage_endpoint = with_slash(options.storage_endpoint);
  }

  void sleep(milliseconds delay) {
    if (options.sleep) {
      options.sleep(delay);
    } else {
      std::this_thread::sleep_for(delay);
    }
  }

  double jitter() {
    if (options.jitter) {
      return options.jitter();
    }
    const std::lock_guard lock(random_mutex);
    return std::uniform_real_distribution<double>(0.0, 1.0)(random);
  }

  std::string url(const std::string& path, const std::string& query = "", ApiVersion version = ApiVersion::v2) const {
    return base(version) + path + "?prettyPrint=false" + (query.empty() ? "" : "&" + query);
  }

  // The endpoint of `version`: v2alpha1's beside v2's ("https://tpu.googleapis.com/v2alpha1/").
  std::string base(ApiVersion version) const {
    if (version == ApiVersion::v2) {
      return options.endpoint;
    }
    return options.endpoint.substr(0, options.endpoint.size() - 3) + "v2alpha1/"; // The endpoint ends in "v2/".
  }

  // A v2alpha1 call answered 404 as a whole (not one resource missing): says the endpoint may not serve the version.
  [[noreturn]] void no_v2alpha1(const ApiError& error, const std::string& what) const {
    throw ApiError(std::string(error.what()) + " (" + what + " needs the TPU API's v2alpha1: does " +
                       base(ApiVersion::v2alpha1) + " serve it?)",
                   error.http_status(), error.status());
  }

  // Sends `call` with retries; returns 2xx answers and those in `accepted`, throws ApiError for the rest.
  Answer execute(const Call& call, const std::set<int>& accepted = {}) {
    const auto start = std::chrono::steady_clock::now();
    bool refreshed_token = false;
    for (int attempt = 1;; ++attempt) {
      HttpRequest request;
      request.method = call.http_method;
      request.url = call.url;
      request.headers = {{"Authorization", "Bearer " + tokens->token()}, {"Accept", "application/json"}};
      if (call.http_method == "POST" || call.http_method == "PATCH") {
        request.headers.emplace_back("Content-Type", "application/json");
        request.body = call.body;
      }
      const HttpResponse response = options.transport ? options.transport(request) : http.send(request);
      if (response.failure == TransportFailure::none) {
        if ((response.status >= 200 && response.status < 300) || accepted.count(response.status) > 0) {
          Answer answer{response.status, util::parse_json_bounded(response.body)};
          if (!answer.body.is_object()) {
            throw ApiError(api_label(call.method) + ": " + call.method + " " + call.resource +
                               ": the answer is not a JSON object",
                           response.status, "");
          }
          return answer;
        }
        if (response.status == 401 && !refreshed_token) {
          // The token may have been revoked or expired early: fetch a new one once.
          refreshed_token = true;
          tokens->invalidate();
          continue;
        }
      }
      AttemptOutcome outcome;
      outcome.attempt = attempt;
      outcome.http_status = response.status;
      outcome.failure = response.failure;
      if (auto retry_after = response.header("Retry-After")) {
        outcome.retry_after = parse_retry_after(*retry_after, util::now_ms());
      }
      outcome.elapsed = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
      const RetryDecision decision = decide_retry(outcome, options.retry, jitter());
      ApiError error = api_error(call, response);
      if (!decision.retry) {
        throw error;
      }
      spdlog::debug("{}; retrying in {} ms (attempt {} of {})", error.what(), decision.delay.count(), attempt + 1,
                    options.retry.max_attempts);
      sleep(decision.delay);
    }
  }

  template <typename T, typename Parse>
  std::vector<T> list(const std::string& method, const std::string& parent, const std::string& collection,
                      int page_size, Parse parse, ApiVersion version = ApiVersion::v2) {
    std::vector<T> out;
    std::string page_token;
    do {
      std::string query;
      if (page_size > 0) {
        query = "pageSize=" + std::to_string(page_size);
      }
      if (!page_token.empty()) {
        query += (query.empty() ? "" : "&") + std::string("pageToken=") + url_encode(page_token);
      }
      const Answer answer = execute(Call{method, parent, "GET", url(parent + "/" + collection, query, version), ""});
      if (answer.body.contains(collection) && answer.body[collection].is_array()) {
        for (const auto& item : answer.body[collection]) {
          out.push_back(parse(item));
        }
      }
      std::string next;
      if (answer.body.contains("nextPageToken")) {
        if (!answer.body["nextPageToken"].is_string()) {
          throw ApiError("TPU API: " + method + " " + parent + ": nextPageToken is not a string", answer.status, "");
        }
        next = answer.body["nextPageToken"].get<std::string>();
      }
      if (!next.empty() && next == page_token) {
        throw ApiError("TPU API: " + method + " " + parent + ": the server repeated page token " + next, 200, "");
      }
      page_token = next;
    } while (!page_token.empty());
    return out;
  }

  // POSTs a create of `collection`/`id` under `where`, with a request id kept across retries where the method
  // binds one (Google refuses a query parameter the method lacks, and nodes.create has no requestId); fills
  // `result.operation`, or after a 409 ALREADY_EXISTS `result.existing` with what `look_up` finds.
  template <typename Result, typename LookUp>
  void create(const std::string& method, const Location& where, const std::string& collection,
              const std::string& id_parameter, const std::string& id, bool with_request_id, const json& body,
              Result& result, LookUp look_up, ApiVersion version = ApiVersion::v2) {
    const std::string parent = where.name();
    std::string query = id_parameter + "=" + url_encode(id);
    if (with_request_id) {
      query += "&requestId=" + new_request_id(); // The same for every retry of this create.
    }
    const Call call{method, parent + "/" + collection + "/" + id, "POST",
                    url(parent + "/" + collection, query, version), body.dump()};
    const Answer answer = execute(call, {409});
    if (answer.status != 409) {
      result.operation = parse_operation(answer.body);
      return;
    }
    result.existing = look_up();
    if (!result.existing) {
      // It existed a moment ago and is gone now (deleted meanwhile): report the conflict as the server put it.
      HttpResponse conflict;
      conflict.status = 409;
      conflict.body = answer.body.dump();
      throw api_error(call, conflict);
    }
  }

  std::optional<Operation> remove(const std::string& method, const std::string& name, const std::string& query) {
    const Answer answer = execute(Call{method, name, "DELETE", url(name, query), ""}, {404});
    if (answer.status == 404) {
      return std::nullopt;
    }
    return parse_operation(answer.body);
  }
};

TpuClient::TpuClient(std::shared_ptr<CachedTokenSource> tokens, TpuClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(tokens), std::move(options))) {}

TpuClient::~TpuClient() = default;

const std::string& TpuClient::endpoint() const {
  return impl_->options.endpoint;
}

std::string TpuClient::account() {
  return impl_->tokens->account();
}

bool needs_v2alpha1(const json& body) {
  if (!body.is_object()) {
    return false;
  }
  const auto guaranteed = body.find("guaranteed");
  if (body.contains("provisioningModel") || body.contains("runDuration") || body.contains("bestEffort") ||
      (guaranteed != body.end() && guaranteed->is_object() && guaranteed->contains("reserved"))) {
    return true;
  }
  const auto spec = json::json_pointer("/tpu/nodeSpec/0");
  return body.contains(spec) && body.at(spec).is_object() && body.at(spec).contains(kMultiNodeParams);
}

CreateResult TpuClient::create_queued_resource(const Location& where, const std::string& id, const json& body) {
  CreateResult result;
  const auto version = needs_v2alpha1(body) ? ApiVersion::v2alpha1 : ApiVersion::v2;
  try {
    impl_->create(
        "queuedResources.create", where, "queuedResources", "queuedResourceId", id, true, body, result,
        [&] { return get_queued_resource(where, id, version); }, version);
  } catch (const ApiError& e) {
    if (version == ApiVersion::v2alpha1 && e.http_status() == 404) {
      impl_->no_v2alpha1(e, "a queued resource with provisioningModel, runDuration, bestEffort, a reservation or "
                            "several slices (multiNodeParams)");
    }
    throw;
  }
  return result;
}

NodeCreateResult TpuClient::create_node(const Location& where, const std::string& id, const json& body) {
  NodeCreateResult result;
  // A retried create that did happen answers 409, and then the node is looked up: that is what stands in for the
  // request id nodes.create does not take.
  impl_->create("nodes.create", where, "nodes", "nodeId", id, false, body, result, [&] { return get_node(where, id); });
  return result;
}

std::optional<QueuedResource> TpuClient::get_queued_resource(const Location& where, const std::string& id,
                                                             ApiVersion version) {
  const std::string name = where.name() + "/queuedResources/" + id;
  const Answer answer =
      impl_->execute(Call{"queuedResources.get", name, "GET", impl_->url(name, "", version), ""}, {404});
  if (answer.status == 404) {
    return std::nullopt;
  }
  return parse_queued_resource(answer.body);
}

std::vector<QueuedResource> TpuClient::list_queued_resources(const Location& where, int page_size, ApiVersion version) {
  try {
    return impl_->list<QueuedResource>("queuedResources.list", where.name(), "queuedResources", page_size,
                                       parse_queued_resource, version);
  } catch (const ApiError& e) {
    if (version == ApiVersion::v2alpha1 && e.http_status() == 404) {
      impl_->no_v2alpha1(e, "reading a flex-start slice's termination time");
    }
    throw;
  }
}

std::vector<Reservation> TpuClient::list_reservations(const Location& where) {
  const auto parse = [](const json& item) {
    Reservation out;
    out.raw = item;
    if (!item.is_object()) {
      return out;
    }
    out.name = item.value("name", "");
    out.state = item.contains("state") && item["state"].is_string() ? item["state"].get<std::string>() : "";
    if (const auto standard = item.find("standard"); standard != item.end() && standard->is_object()) {
      out.type = standard->contains("resourceType") && (*standard)["resourceType"].is_string()
                     ? (*standard)["resourceType"].get<std::string>()
                     : "";
      const auto number = [](const json& value) -> long long {
        if (value.is_number_integer()) {
          return value.get<long long>();
        }
        return value.is_string() ? util::parse_int(value.get<std::string>()).value_or(0) : 0; // int64 as a string.
      };
      if (standard->contains("size")) {
        out.chips = number((*standard)["size"]);
      }
      if (const auto usage = standard->find("usage");
          usage != standard->end() && usage->is_object() && usage->contains("total")) {
        out.in_use = number((*usage)["total"]);
      }
    }
    return out;
  };
  try {
    return impl_->list<Reservation>("reservations.list", where.name(), "reservations", 0, parse, ApiVersion::v2alpha1);
  } catch (const ApiError& e) {
    if (e.http_status() == 404) {
      impl_->no_v2alpha1(e, "reservations.list");
    }
    throw;
  }
}

std::optional<Operation> TpuClient::delete_queued_resource(const Location& where, const std::string& id,
                                                           DeleteMode mode) {
  const std::string query =
      std::string(mode == DeleteMode::force ? "force=true&" : "") + "requestId=" + new_request_id();
  return impl_->remove("queuedResources.delete", where.name() + "/queuedResources/" + id, query);
}

std::optional<Node> TpuClient::get_node(const Location& where, const std::string& id) {
  const std::string name = where.name() + "/nodes/" + id;
  const Answer answer = impl_->execute(Call{"nodes.get", name, "GET", impl_->url(name), ""}, {404});
  if (answer.status == 404) {
    return std::nullopt;
  }
  return parse_node(answer.body);
}

std::vector<Node> TpuClient::list_nodes(const Location& where, int page_size) {
  return impl_->list<Node>("nodes.list", where.name(), "nodes", page_size, parse_node);
}

std::optional<Operation> TpuClient::delete_node(const Location& where, const std::string& id) {
  return impl_->remove("nodes.delete", where.name() + "/nodes/" + id, ""); // nodes.delete binds no requestId.
}

Operation TpuClient::patch_node(const Location& where, const std::string& id, const json& fields,
                                const std::string& update_mask) {
  const std::string name = where.name() + "/nodes/" + id;
  return parse_operation(impl_
                             ->execute(Call{"nodes.patch", name, "PATCH",
                                            impl_->url(name, "updateMask=" + url_encode(update_mask)), fields.dump()})
                             .body);
}

std::vector<std::string> TpuClient::guest_attribute(const Location& where, const std::string& id,
                                                    const std::string& namespace_key) {
  std::vector<std::string> values;
  for (const auto& worker : guest_attributes(where, id, namespace_key)) {
    const auto found = worker.find(namespace_key);
    values.push_back(found == worker.end() ? std::string() : found->second);
  }
  return values;
}

std::vector<std::map<std::string, std::string>>
TpuClient::guest_attributes(const Location& where, const std::string& id, const std::string& query_path) {
  const std::string name = where.name() + "/nodes/" + id;
  const json request = {{"queryPath", query_path}};
  const Answer answer = impl_->execute(
      Call{"nodes.getGuestAttributes", name, "POST", impl_->url(name + ":getGuestAttributes"), request.dump()},
      {400, 404});
  std::vector<std::map<std::string, std::string>> workers;
  if (answer.status == 400 || answer.status == 404 || !answer.body.contains("guestAttributes") ||
      !answer.body["guestAttributes"].is_array()) {
    return workers;
  }
  for (const auto& worker : answer.body["guestAttributes"]) {
    std::map<std::string, std::string> attributes;
    const json* items = nullptr;
    if (worker.is_object() && worker.contains("queryValue") && worker["queryValue"].is_object() &&
        worker["queryValue"].contains("items") && worker["queryValue"]["items"].is_array()) {
      items = &worker["queryValue"]["items"];
    }
    for (const auto& item : items != nullptr ? *items : json::array()) {
      if (item.is_object() && item.contains("value") && item["value"].is_string()) {
        attributes[item.value("namespace", "") + "/" + item.value("key", "")] = item["value"].get<std::string>();
      }
    }
    workers.push_back(std::move(attributes));
  }
  return workers;
}

namespace {

// A string member of a catalog entry ("type" of an AcceleratorType, "version" of a RuntimeVersion); "" when absent.
std::function<std::string(const json&)> string_member(const char* key) {
  return [key](const json& item) {
    return item.is_object() && item.contains(key) && item[key].is_string() ? item[key].get<std::string>()
                                                                           : std::string();
  };
}

} // namespace

std::vector<std::string> TpuClient::list_locations(const std::string& project) {
  return impl_->list<std::string>("locations.list", "projects/" + project, "locations", 0, string_member("locationId"));
}

std::vector<std::string> TpuClient::list_accelerator_types(const Location& where) {
  return impl_->list<std::string>("acceleratorTypes.list", where.name(), "acceleratorTypes", 0, string_member("type"));
}

std::vector<std::string> TpuClient::list_runtime_versions(const Location& where) {
  return impl_->list<std::string>("runtimeVersions.list", where.name(), "runtimeVersions", 0, string_member("version"));
}

std::map<std::string, std::string> TpuClient::project_metadata(const std::string& project) {
  const std::string name = "projects/" + project;
  const Answer answer = impl_->execute(
      Call{"compute.projects.get", name, "GET", impl_->options.compute_endpoint + name + "?prettyPrint=false", ""});
  std::map<std::string, std::string> out;
  const auto& common = answer.body.contains("commonInstanceMetadata") ? answer.body["commonInstanceMetadata"] : json();
  if (common.is_object() && common.contains("items") && common["items"].is_array()) {
    for (const auto& item : common["items"]) {
      if (item.is_object() && item.contains("key") && item["key"].is_string() && item.contains("value") &&
          item["value"].is_string()) {
        out[item["key"].get<std::string>()] = item["value"].get<std::string>();
      }
    }
  }
  return out;
}

std::optional<Bucket> TpuClient::get_bucket(const std::string& name) {
  const Answer answer = impl_->execute(
      Call{"storage.buckets.get", "b/" + name, "GET",
           impl_->options.storage_endpoint + "b/" + url_encode(name) + "?projection=noAcl&prettyPrint=false", ""},
      {404});
  if (answer.status == 404) {
    return std::nullopt;
  }
  if (!answer.body.is_object()) {
    throw Error("storage.buckets.get b/" + name + ": the answer is not a JSON object");
  }
  Bucket bucket;
  bucket.name = answer.body.value("name", name);
  bucket.location = answer.body.value("location", "");
  bucket.location_type = answer.body.value("locationType", "");
  bucket.storage_class = answer.body.value("storageClass", "");
  if (const auto placement = answer.body.find("customPlacementConfig");
      placement != answer.body.end() && placement->is_object() && placement->contains("dataLocations") &&
      (*placement)["dataLocations"].is_array()) {
    for (const auto& region : (*placement)["dataLocations"]) {
      if (region.is_string()) {
        bucket.data_locations.push_back(region.get<std::string>());
      }
    }
  }
  return bucket;
}

std::string TpuClient::import_ssh_public_key(const std::string& account, const std::string& project,
                                             const std::string& public_key) {
  const std::string name = "users/" + user_path(account);
  const json body = {{"key", public_key}};
  const Answer answer = impl_->execute(Call{"oslogin.users.importSshPublicKey", name, "POST",
                                            impl_->options.oslogin_endpoint + name + ":importSshPublicKey?projectId=" +
                                                url_encode(project) + "&prettyPrint=false",
                                            body.dump()});
  const auto& profile = answer.body.contains("loginProfile") ? answer.body["loginProfile"] : json();
  const auto& accounts =
      profile.is_object() && profile.contains("posixAccounts") ? profile["posixAccounts"] : json::array();
  std::string username;
  for (const auto& posix : accounts.is_array() ? accounts : json::array()) {
    if (!posix.is_object() || !posix.contains("username") || !posix["username"].is_string()) {
      continue;
    }
    // The primary one when the profile holds several.
    if (username.empty() || posix.value("primary", false)) {
      username = posix["username"].get<std::string>();
    }
  }
  if (username.empty()) {
    throw Error("OS Login API: the login profile of " + account + " has no POSIX account in project " + project +
                " (does the account have roles/compute.osLogin there?)");
  }
  return username;
}

Operation TpuClient::get_operation(const std::string& name) {
  return parse_operation(impl_->execute(Call{"operations.get", name, "GET", impl_->url(name), ""}).body);
}

Operation TpuClient::wait_operation(const std::string& name, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto delay = impl_->options.poll_initial;
  for (;;) {
    Operation operation = get_operation(name);
    if (operation.done) {
      return operation;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      throw Error("TPU API: operations.get " + name + ": not done after " + std::to_string(timeout.count() / 1000) +
                  " s");
    }
    impl_->sleep(std::min(delay, std::chrono::duration_cast<milliseconds>(deadline - now)));
    delay = std::min(impl_->options.poll_max, milliseconds(delay.count() * 3 / 2 + 1));
  }
}

} // namespace jobman::cloud
