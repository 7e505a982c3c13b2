#include "mock_cloud/server.hpp"

#include "jobman/util/error.hpp"
#include "jobman/util/json_text.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/admin_token.hpp"
#include "mock_cloud/api_version.hpp"
#include "mock_cloud/enum_encoding.hpp"
#include "mock_cloud/host_sshd.hpp"
#include "mock_cloud/partial_response.hpp"
#include "mock_cloud/query_parameters.hpp"
#include "mock_cloud/workload_reaper.hpp"
#include "server_internal.hpp"
#include "world_internal.hpp"

#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <pthread.h>
#include <random>
#include <unistd.h>

namespace jobman::mock {

using nlohmann::json;
using server_internal::page_size;
using server_internal::pretty_printed;
using server_internal::send_reply;

bool is_loopback_host(std::string_view host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") {
    return true;
  }
  in_addr address{};
  std::string text(host);
  if (::inet_pton(AF_INET, text.c_str(), &address) == 1) {
    return (ntohl(address.s_addr) >> 24) == 127;
  }
  return false;
}

BearerCheck::BearerCheck() : validator_([](std::string_view token) { return !token.empty(); }) {}

void BearerCheck::set_validator(Validator validator) {
  validator_ = std::move(validator);
}

bool BearerCheck::authorized(const httplib::Request& request) const {
  auto header = request.get_header_value("Authorization");
  constexpr std::string_view prefix = "Bearer ";
  if (header.size() <= prefix.size() || header.compare(0, prefix.size(), prefix) != 0) {
    return false;
  }
  auto token = util::trim(std::string_view(header).substr(prefix.size()));
  return !token.empty() && validator_(token);
}

namespace {

// Threads serving HTTP. cpp-httplib keeps a thread on each kept-alive connection until its keep-alive timeout, and
// every jobman process, gcloud and test client may hold one: its default (8 on this machine) would make
// the next caller wait seconds.
constexpr std::size_t kHttpThreads = 64;

// The request's query string as sent, without the '?'.
std::string_view raw_query(const httplib::Request& req) {
  const auto query_start = req.target.find('?');
  return query_start == std::string::npos ? std::string_view() : std::string_view(req.target).substr(query_start + 1);
}

// The `$alt` (or `alt`) system parameter, read from the raw query: cpp-httplib cuts a value at its first unencoded
// '=', and google-gax sends "$alt=json%3Benum-encoding=int".
std::string alt_parameter(const httplib::Request& req) {
  for (const std::string& pair : util::split(raw_query(req), '&')) {
    const auto eq = pair.find('=');
    if (eq == std::string::npos) {
      continue;
    }
    const std::string name = httplib::detail::decode_url(pair.substr(0, eq), true);
    if (name == "$alt" || name == "alt") {
      return httplib::detail::decode_url(pair.substr(eq + 1), true);
    }
  }
  return {};
}

// A bool query parameter: "true" in any case (gcloud's apitools sends "True"), or "1".
bool flag(const httplib::Request& req, const char* name) {
  auto value = req.get_param_value(name);
  return util::to_lower(value) == "true" || value == "1";
}

// The worker an admin call on a node's hosts names with {"worker": W}, into `worker` (untouched without one); false
// when the body is not an object (an empty body counts as {}) or W is not a whole number.
bool read_worker(const json& body, std::optional<std::int64_t>& worker) {
  if (!body.is_object() || (body.contains("worker") && !body["worker"].is_number_integer())) {
    return false;
  }
  if (body.contains("worker")) {
    worker = body["worker"].get<std::int64_t>();
  }
  return true;
}

std::optional<Tier> parse_tier(const std::string& text) {
  if (text == "on-demand" || text == "guaranteed") {
    return Tier::on_demand;
  }
  if (text == "flex-start" || text == "best-effort") {
    return tier_named(text == "flex-start" ? "flex_start" : "best_effort");
  }
  return tier_named(text);
}

} // namespace

namespace server_internal {

void send_reply(httplib::Response& res, const Reply& reply, bool pretty) {
  res.status = reply.status;
  res.set_content(pretty ? reply.body.dump(2) : reply.body.dump(), "application/json; charset=UTF-8");
}

bool pretty_printed(const httplib::Request& req) {
  auto value = req.get_param_value("prettyPrint");
  return value != "false" && value != "0";
}

void select_requested_fields(const httplib::Request& req, Reply& reply) {
  if (!reply.ok() || !req.has_param("fields")) {
    return;
  }
  const auto fields = req.get_param_value("fields");
  if (auto selected = select_fields(reply.body, fields)) {
    reply.body = std::move(*selected);
  } else {
    reply = error_reply(400, "Invalid field selection " + fields);
  }
}

// Reads pageSize; nullopt when it is not a whole number.
std::optional<int> page_size(const httplib::Request& req) {
  if (!req.has_param("pageSize")) {
    return 0;
  }
  auto value = util::parse_int(req.get_param_value("pageSize"));
  if (!value || *value < 0 || *value > 1'000'000) {
    return std::nullopt;
  }
  return static_cast<int>(*value);
}

// Reads a list call's pageSize, pageToken, filter and orderBy; nullopt when pageSize is not a whole number.
std::optional<ListQuery> list_query(const httplib::Request& req) {
  auto size = page_size(req);
  if (!size) {
    return std::nullopt;
  }
  return ListQuery{*size, req.get_param_value("pageToken"), req.get_param_value("filter"),
                   req.get_param_value("orderBy")};
}

} // namespace server_internal

MockServer::MockServer(ServerOptions options) : options_(std::move(options)) {
  if (!options_.allow_remote && !is_loopback_host(options_.host)) {
    throw UsageError("refusing to listen on non-loopback address '" + options_.host +
                     "': the mock cloud has no real security; pass --allow-remote to do it anyway");
  }
  if (!(options_.time_scale > 0)) {
    throw UsageError("--time-scale must be a positive number");
  }
  world_ = std::make_unique<World>(load_mock_config(options_.config_file), options_.time_scale, options_.seed);
  world_->start_addresses_at(std::random_device{}());
  if (!options_.state_dir.empty()) {
    util::ensure_directory(options_.state_dir, 0700);
    world_->attach_store(options_.state_dir / "state.db", util::now_ms());
    authority_.load_state_dir(options_.state_dir);
  }
  admin_token_path_ = !options_.admin_token_file.empty() ? options_.admin_token_file
                      : !options_.state_dir.empty()      ? admin_token_file(options_.state_dir)
                                                         : admin_token_file(scratch_dir());
  admin_token_ = load_or_create_admin_token(admin_token_path_);
  // Headers and body go out in separate writes; without this, Nagle and delayed ACKs add 40 ms to every reply.
  http_.set_tcp_nodelay(true);
  // cpp-httplib closes a keep-alive connection after 5 requests by default; Google's front end keeps it open.
  http_.set_keep_alive_max_count(100'000);
  http_.new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
  register_routes();
  AuthRouteOptions auth;
  auth.numeric_project_id = std::to_string(world_internal::project_number(auth.project_id));
  register_auth_routes(http_, authority_, auth);
  bearer_.set_validator([this](std::string_view token) { return authority_.valid(token, authority_.now()); });
}

MockServer::~MockServer() {
  stop();
  if (ticker_.joinable()) {
    ticker_.join();
  }
  // The world stops telling the data plane, then the data plane ends every process the slices started.
  world_->set_listener(nullptr);
  workers_.reset();
  meter_.reset();
  if (!scratch_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(scratch_dir_, ec);
  }
}

httplib::Server::Handler MockServer::api_route(const std::string& method, Handler handler) {
  return [this, method, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    Reply reply;
    const auto version = api_version_of(req.path);
    if (!serves_method(version, method)) {
      // Google's front end answers a method a version lacks with NOT_FOUND, before it looks at the credential.
      reply = error_reply(404, "The mock cloud does not serve " + method + " in the TPU API's " +
                                   std::string(api_version_name(version)) + " yet; call it under /v2/");
    } else if (auto refused = refuse_unauthenticated(req, res)) {
      reply = std::move(*refused);
    } else if (const auto unbound = unbound_query_parameter(method, raw_query(req))) {
      reply = error_reply(400, unbound_parameter_message(*unbound));
    } else {
      auto fault = world_->decide_fault();
      if (fault.latency_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(fault.latency_ms));
      }
      if (fault.fail_status != 0) {
        reply = error_reply(fault.fail_status, "Injected fault (mock cloud fault injection)");
      } else {
        reply = handler(req);
      }
      if (reply.ok()) {
        reply_in_version(version, method, reply.body);
      }
      server_internal::select_requested_fields(req, reply);
      if (reply.ok() && wants_enum_numbers(alt_parameter(req))) {
        encode_enums_as_numbers(method, reply.body);
      }
    }
    world_->count_request(method, reply.status);
    send_reply(res, reply, pretty_printed(req));
  };
}

std::optional<Reply> MockServer::refuse_unauthenticated(const httplib::Request& req, httplib::Response& res) const {
  if (bearer_.authorized(req)) {
    return std::nullopt;
  }
  res.set_header("WWW-Authenticate", "Bearer realm=\"https://accounts.google.com/\"");
  return error_reply(401, "Request is missing required authentication credential. Expected OAuth 2 access token, "
                          "login cookie or other valid authentication credential.");
}

httplib::Server::Handler MockServer::admin_route(const std::string& method, Handler handler) {
  // Only the mock's own admin token opens it, never an API access token (any local user can get one from the
  // metadata path), since these routes preempt slices and hand out the worker hosts' shells.
  return [this, method, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    Reply reply;
    const auto header = req.get_header_value("Authorization");
    if (header.empty()) {
      reply = error_reply(401, "The mock's admin API needs its admin token: send 'Authorization: Bearer' and the "
                               "token in " +
                                   admin_token_path_.string());
      res.set_header("WWW-Authenticate", "Bearer realm=\"jobman-mock-cloud admin\"");
    } else if (!admin_token_matches(header, admin_token_)) {
      reply = error_reply(403, "The mock's admin API accepts only its admin token (in " + admin_token_path_.string() +
                                   "), not this credential");
    } else {
      reply = handler(req);
    }
    world_->count_request(method, reply.status);
    send_reply(res, reply);
  };
}

void MockServer::register_routes() {
  const std::string loc = std::string(kTpuVersionRoute) + "/projects/([^/]+)/locations/([^/]+)";
  const std::string id = "([^/:]+)";
  auto api = [this](const std::string& method) {
    return [this, method](const Handler& handler) { return api_route(method, handler); };
  };
  // A /mock/v1 route: the admin token's (admin_route).
  auto admin = [this](const std::string& method, const Handler& handler) { return admin_route(method, handler); };
  auto m = [](const httplib::Request& req, int i) { return req.matches[i].str(); };
  auto bad_page = [] { return error_reply(400, "pageSize must be a non-negative whole number"); };

  register_catalog_routes();
  register_node_and_operation_routes();
  register_compute_routes();
  register_storage_routes();
  http_.Post(loc + "/queuedResources", api("queuedResources.create")([this, m](const httplib::Request& req) {
               auto body = util::parse_json_bounded(req.body);
               if (body.is_discarded()) {
                 return error_reply(
                     400, "Invalid JSON payload received: the body is not JSON, or nests deeper than 128 levels");
               }
               if (const auto refused = queued_resource_request(api_version_of(req.path), body)) {
                 return error_reply(400, *refused);
               }
               return world_->create_queued_resource(m(req, 1), m(req, 2), req.get_param_value("queuedResourceId"),
                                                     req.get_param_value("requestId"), body, util::now_ms());
             }));
  http_.Get(loc + "/queuedResources", api("queuedResources.list")([this, m, bad_page](const httplib::Request& req) {
              auto size = page_size(req);
              return size ? world_->list_queued_resources(m(req, 1), m(req, 2), *size, req.get_param_value("pageToken"),
                                                          util::now_ms())
                          : bad_page();
            }));
  http_.Get(loc + "/queuedResources/" + id, api("queuedResources.get")([this, m](const httplib::Request& req) {
              return world_->get_queued_resource(m(req, 1), m(req, 2), m(req, 3), util::now_ms());
            }));
  http_.Delete(loc + "/queuedResources/" + id, api("queuedResources.delete")([this, m](const httplib::Request& req) {
                 return world_->delete_queued_resource(m(req, 1), m(req, 2), m(req, 3), flag(req, "force"),
                                                       req.get_param_value("requestId"), util::now_ms());
               }));
  http_.Post(loc + "/queuedResources/" + id + ":reset",
             api("queuedResources.reset")([this, m](const httplib::Request& req) {
               return world_->reset_queued_resource(m(req, 1), m(req, 2), m(req, 3), util::now_ms());
             }));
  http_.Get(loc + "/nodes", api("nodes.list")([this, m, bad_page](const httplib::Request& req) {
              auto size = page_size(req);
              return size ? world_->list_nodes(m(req, 1), m(req, 2), *size, req.get_param_value("pageToken"),
                                               util::now_ms())
                          : bad_page();
            }));
  http_.Get(loc + "/nodes/" + id, api("nodes.get")([this, m](const httplib::Request& req) {
              return world_->get_node(m(req, 1), m(req, 2), m(req, 3), util::now_ms());
            }));
  http_.Delete(loc + "/nodes/" + id, api("nodes.delete")([this, m](const httplib::Request& req) {
                 return world_->delete_node(m(req, 1), m(req, 2), m(req, 3), util::now_ms());
               }));
  http_.Get(loc + "/operations", api("operations.list")([this, m, bad_page](const httplib::Request& req) {
              // The discovery document allows a filter here; the mock has none, and says so rather than ignore it.
              if (!req.get_param_value("filter").empty()) {
                return error_reply(400, "operations.list: the mock cloud does not support filter; list every "
                                        "operation and select on the client");
              }
              auto size = page_size(req);
              return size ? world_->list_operations(m(req, 1), m(req, 2), *size, req.get_param_value("pageToken"),
                                                    util::now_ms())
                          : bad_page();
            }));
  http_.Get(loc + "/operations/" + id, api("operations.get")([this, m](const httplib::Request& req) {
              return world_->get_operation(m(req, 1), m(req, 2), m(req, 3), util::now_ms());
            }));

  const std::string admin_node = "/mock/v1/projects/([^/]+)/locations/([^/]+)/nodes/([^/:]+)";
  http_.Post(admin_node + ":preempt", admin("admin.preempt", [this, m](const httplib::Request& req) {
               return world_->preempt_node(m(req, 1), m(req, 2), m(req, 3), util::now_ms());
             }));
  // Every worker's machine, or worker W's with {"worker": W}.
  http_.Post(admin_node + ":markFaulty", admin("admin.markFaulty", [this, m](const httplib::Request& req) {
               const auto body = req.body.empty() ? json::object() : util::parse_json_bounded(req.body);
               std::optional<std::int64_t> worker;
               if (!read_worker(body, worker)) {
                 return error_reply(400, "Expected no body, {} or {\"worker\": W} with W a worker's index");
               }
               return world_->mark_node_faulty(m(req, 1), m(req, 2), m(req, 3), util::now_ms(), worker);
             }));
  // {"factor": F, "steps": N}: the next N steps the workload computes on every worker (or worker W's with
  // "worker": W) spike by F, loss and update.
  http_.Post(admin_node + ":injectLossSpike", admin("admin.injectLossSpike", [this, m](const httplib::Request& req) {
               const auto body = util::parse_json_bounded(req.body);
               std::optional<std::int64_t> worker;
               if (!read_worker(body, worker) || !body.contains("factor") || !body["factor"].is_number() ||
                   !body.contains("steps") || !body["steps"].is_number_integer()) {
                 return error_reply(400, "Expected {\"factor\": F, \"steps\": N}, F above 1 and N a number of steps, "
                                         "and optionally \"worker\": W, a worker's index");
               }
               const StepFault spike{StepFault::Kind::loss_spike, body["factor"].get<double>(),
                                     body["steps"].get<std::int64_t>()};
               return world_->inject_step_fault(m(req, 1), m(req, 2), m(req, 3), spike, util::now_ms(), worker);
             }));
  // Every worker's workload (or worker W's with {"worker": W}) hangs at its next step.
  http_.Post(admin_node + ":injectHang", admin("admin.injectHang", [this, m](const httplib::Request& req) {
               const auto body = req.body.empty() ? json::object() : util::parse_json_bounded(req.body);
               std::optional<std::int64_t> worker;
               if (!read_worker(body, worker)) {
                 return error_reply(400, "Expected no body, {} or {\"worker\": W} with W a worker's index");
               }
               return world_->inject_step_fault(m(req, 1), m(req, 2), m(req, 3), {StepFault::Kind::hang},
                                                util::now_ms(), worker);
             }));
  // {"in": SECONDS}: the node announces a maintenance whose window opens that many (simulated) seconds from now.
  http_.Post(
      admin_node + ":scheduleMaintenance", admin("admin.scheduleMaintenance", [this, m](const httplib::Request& req) {
        const auto body = util::parse_json_bounded(req.body);
        if (!body.is_object() || !body.contains("in") || !body["in"].is_number() || body["in"].get<double>() <= 0) {
          return error_reply(400, "Expected {\"in\": SECONDS}, the seconds until the maintenance window opens");
        }
        return world_->schedule_maintenance(m(req, 1), m(req, 2), m(req, 3), body["in"].get<double>(), util::now_ms());
      }));
  http_.Post(admin_node + ":setHealth", admin("admin.setHealth", [this, m](const httplib::Request& req) {
               const auto body = util::parse_json_bounded(req.body);
               if (!body.is_object() || !body.contains("health") || !body["health"].is_string() ||
                   !body.value("healthDescription", json("")).is_string()) {
                 return error_reply(400, "Expected {\"health\": \"HEALTHY\"|\"TIMEOUT\"|\"UNHEALTHY_TENSORFLOW\"|"
                                         "\"UNHEALTHY_MAINTENANCE\", optional \"healthDescription\": text}");
               }
               return world_->set_node_health(m(req, 1), m(req, 2), m(req, 3), body["health"].get<std::string>(),
                                              body.value("healthDescription", ""), util::now_ms());
             }));
  // Where a worker host lives and the environment a command there gets (tests look at a host's files so). 404 while the
  // node is not READY.
  http_.Get(admin_node + "/workers/([0-9]+)", admin("admin.worker", [this, m](const httplib::Request& req) {
              const auto node = "projects/" + m(req, 1) + "/locations/" + m(req, 2) + "/nodes/" + m(req, 3);
              const auto worker = util::parse_int(m(req, 4));
              auto host = workers_ && worker && *worker < 100'000
                              ? workers_->host(node, static_cast<int>(*worker), req.get_param_value("user"))
                              : std::nullopt;
              if (!host) {
                return error_reply(404, "No worker " + m(req, 4) + " of node '" + node +
                                            "' is up (the node is not READY, or has fewer workers)");
              }
              json answer = {{"worker", host->worker},
                             {"dir", host->dir.string()},
                             {"home", host->home.string()},
                             {"sandbox_home", host->sandbox_home.string()},
                             {"home_mode", to_string(host->home_mode)},
                             {"marker", host->marker},
                             {"physical_host", host->physical_host},
                             {"env", host->env}};
              if (host->home_mode == HomeMode::namespace_) {
                answer["root"] = host->root.string();
                answer["keep"] = json::array();
                for (const auto& dir : host->keep) {
                  answer["keep"].push_back(dir.string());
                }
                answer["keep_read_only"] = json::array();
                for (const auto& dir : host->keep_read_only) {
                  answer["keep_read_only"].push_back(dir.string());
                }
              } else {
                answer["home_mode_reason"] = host->home_mode_reason;
              }
              return Reply{200, answer};
            }));
  http_.Post("/mock/v1/faults", admin("admin.faults", [this](const httplib::Request& req) {
               auto body = util::parse_json_bounded(req.body);
               if (!body.is_object() || !body.contains("rate") || !body["rate"].is_number()) {
                 return error_reply(400, "Expected {\"rate\": 0..1, \"codes\": [429, 503], \"latency_ms\": 200}");
               }
               FaultSettings faults;
               faults.rate = body["rate"].get<double>();
               if (faults.rate < 0 || faults.rate > 1) {
                 return error_reply(400, "rate must be between 0 and 1");
               }
               for (const auto& code : body.value("codes", json::array({503}))) {
                 if (!code.is_number_integer() || code.get<int>() < 400 || code.get<int>() > 599) {
                   return error_reply(400, "codes must be HTTP error codes between 400 and 599");
                 }
                 faults.codes.push_back(code.get<int>());
               }
               auto latency = body.value("latency_ms", json(0));
               if (!latency.is_number_integer() || latency.get<int>() < 0 || latency.get<int>() > 60'000) {
                 return error_reply(400, "latency_ms must be a whole number of milliseconds up to 60000");
               }
               faults.latency_ms = latency.get<int>();
               world_->set_faults(faults);
               return Reply{200, {{"rate", faults.rate}, {"codes", faults.codes}, {"latency_ms", faults.latency_ms}}};
             }));
  http_.Put("/mock/v1/capacity", admin("admin.capacity", [this](const httplib::Request& req) {
              auto body = util::parse_json_bounded(req.body);
              if (!body.is_object() || !body.contains("zone") || !body["zone"].is_string() ||
                  !body.contains("generation") || !body["generation"].is_string() || !body.contains("tier") ||
                  !body["tier"].is_string() || !body.contains("chips") || !body["chips"].is_number_integer()) {
                return error_reply(
                    400, "Expected {\"zone\", \"generation\", \"tier\": \"spot\"|\"on_demand\"|\"flex_start\"|"
                         "\"reserved\"|\"best_effort\", "
                         "\"chips\", optional \"quota\"}");
              }
              auto tier = parse_tier(body["tier"].get<std::string>());
              if (!tier) {
                return error_reply(400, "tier must be spot, on_demand, flex_start, reserved or best_effort");
              }
              std::optional<int> quota;
              if (body.contains("quota")) {
                if (!body["quota"].is_number_integer()) {
                  return error_reply(400, "quota must be a whole number");
                }
                quota = body["quota"].get<int>();
              }
              return world_->set_capacity(body["zone"], body["generation"], *tier, body["chips"].get<int>(), quota,
                                          util::now_ms());
            }));
  http_.Put("/mock/v1/hardware", admin("admin.hardware", [this](const httplib::Request& req) {
              auto body = util::parse_json_bounded(req.body);
              if (!body.is_object() || !body.contains("faulty_fraction") || !body["faulty_fraction"].is_number()) {
                return error_reply(400, "Expected {\"faulty_fraction\": 0..1}");
              }
              return world_->set_faulty_fraction(body["faulty_fraction"].get<double>(), util::now_ms());
            }));
  http_.Get("/mock/v1/metrics", admin("admin.metrics", [this](const httplib::Request&) {
              auto metrics = world_->metrics(util::now_ms());
              metrics["processes_running"] = workers_ ? workers_->processes_running() : 0;
              return Reply{200, metrics};
            }));

  // The access tokens issued and not expired: whoever holds the admin token controls the mock anyway, and tests
  // look for these where they must never be (the store, logs, command lines).
  http_.Get("/mock/v1/tokens", admin("admin.tokens", [this](const httplib::Request&) {
              return Reply{200, {{"issued", authority_.issued_tokens(authority_.now())}}};
            }));

  // A POST, PUT or PATCH of unknown length: Google's front end answers 411 at once, where cpp-httplib would wait for
  // the connection to close and then refuse it with 400.
  http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // Every request, of any kind, counts as use (--idle-exit).
    last_use_ms_ = util::now_ms();
    const bool body_method = req.method == "POST" || req.method == "PUT" || req.method == "PATCH";
    if (!body_method || req.has_header("Content-Length") || req.has_header("Transfer-Encoding")) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    send_reply(res, error_reply(411, req.method + " requests require a Content-length header."));
    res.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
  });
  http_.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    auto status = res.status == 0 ? 404 : res.status;
    send_reply(res, error_reply(status, status == 404 ? "No such method: " + req.method + " " + req.path
                                                      : "The request could not be served"));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_.set_exception_handler([](const httplib::Request&, httplib::Response& res, const std::exception_ptr& error) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_reply(res, error_reply(500, "Internal error in the mock cloud: " + what));
  });
}

int MockServer::bind() {
  int port = options_.port == 0 ? http_.bind_to_any_port(options_.host)
                                : (http_.bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port <= 0) {
    throw Error("cannot listen on " + options_.host + ":" + std::to_string(options_.port));
  }
  if (!options_.service_account_key.empty()) {
    // The key's token_uri names this server, so the port must be known first.
    const std::string host = options_.host.find(':') != std::string::npos ? "[" + options_.host + "]" : options_.host;
    ServiceAccountOptions account;
    account.token_uri = "http://" + host + ":" + std::to_string(port) + "/token";
    const auto key = generate_service_account_key(account);
    if (!options_.state_dir.empty()) {
      write_service_account_key(options_.service_account_key, options_.state_dir, key);
    } else {
      util::write_file_atomic(options_.service_account_key, key.key_file.dump(2), 0600);
    }
    authority_.trust_key(key);
  }
  start_data_plane(port);
  return port;
}

const std::filesystem::path& MockServer::scratch_dir() {
  if (scratch_dir_.empty()) {
    // mkdtemp makes it with mode 0700.
    std::string pattern = (std::filesystem::temp_directory_path() / "jobman-mock-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw Error("cannot create a scratch directory for the mock: " + std::string(std::strerror(errno)));
    }
    scratch_dir_ = pattern;
  }
  return scratch_dir_;
}

void MockServer::start_data_plane(int port) {
  // Without a state directory the sandboxes and buckets live as long as the server.
  const std::filesystem::path base = options_.state_dir.empty() ? scratch_dir() : options_.state_dir;
  WorkerHostsOptions hosts;
  hosts.root = base / "workers";
  hosts.buckets = base / "buckets";
  hosts.tools = options_.tools_dir;
  hosts.visible = options_.visible_to_hosts;
  // The world's network between slices, for the hosts' environment, and its buckets' places (the world keeps the
  // rest of the file).
  const auto config = load_mock_config(options_.config_file);
  hosts.dcn = config.dcn;
  const std::string host = options_.host.find(':') != std::string::npos ? "[" + options_.host + "]" : options_.host;
  hosts.api_endpoint = "http://" + host + ":" + std::to_string(port) + "/";
  // A preempted VM gets 30 seconds' notice before it is powered off; never less than 50 ms of wall time.
  hosts.grace =
      std::chrono::milliseconds(std::max<std::int64_t>(50, static_cast<std::int64_t>(30'000 / options_.time_scale)));
  // Each host's own filesystem needs mount namespaces; decided once, here, for the mock's whole life.
  if (options_.sandbox_homes) {
    hosts.home_mode_reason = "--sandbox-homes was given";
  } else if (auto why = probe_home_namespaces(options_.tools_dir)) {
    hosts.home_mode_reason = "no mount namespaces here: " + *why;
  } else {
    hosts.home_mode = HomeMode::namespace_;
  }
  if (hosts.home_mode == HomeMode::sandbox) {
    std::cerr << "jobman-mock-cloud: worker hosts have no filesystem of their own (" << hosts.home_mode_reason
              << "); HOME is each host's sandbox directory, and absolute paths in a config (/home/USER, /mnt, /tmp, "
                 "...) are this machine's: the mock's gcsfuse, scp and venvs refuse those outside the sandbox\n";
  }
  // Each host's sshd, on its own filesystem: as root on port 22, as any other user on one free high port, which the
  // hosts publish as the guest attribute mock/ssh-port.
  std::error_code ec;
  if (options_.sshd != "none" && std::filesystem::exists(options_.sshd, ec)) {
    if (hosts.home_mode != HomeMode::namespace_) {
      std::cerr << "jobman-mock-cloud: worker hosts run no sshd, since they have no filesystem of their own\n";
    } else {
      hosts.sshd = options_.sshd;
      // Port 22 is root's only, and not free where this machine runs an sshd of its own on every address.
      const bool own_22 = ::geteuid() == 0 && host_sshd::port_free("127.0.0.1", 22);
      hosts.ssh_port = options_.ssh_port != 0 ? options_.ssh_port : own_22 ? 22 : host_sshd::free_port();
    }
  } else if (options_.sshd != "none") {
    std::cerr << "jobman-mock-cloud: worker hosts run no sshd: " << options_.sshd.string()
              << " is missing (Debian's openssh-server)\n";
  }
  // The buckets as the hosts read them: through the meter, which counts what each host moves, when FUSE is here.
  std::string unmetered;
  std::filesystem::create_directories(hosts.buckets, ec); // WorkerHosts sets its mode.
  meter_ = GcsMeter::start(options_.tools_dir / "jobman-mock-gcs-meter", hosts.buckets, base / "gcs-meter", unmetered);
  if (meter_ != nullptr) {
    hosts.meter = meter_.get();
  } else {
    std::cerr << "jobman-mock-cloud: the hosts' gcsfuse counts no bytes (" << unmetered
              << "): --prometheus-port serves nothing\n";
  }
  workers_ = std::make_unique<WorkerHosts>(hosts);
  world_->set_listener(workers_.get());
  workers_->prune();
  // Cloud Storage's JSON API reads the bucket directories the hosts' gcsfuse mounts.
  BucketDirectories::Options storage;
  storage.root = hosts.buckets;
  storage.placed = config.buckets;
  storage.default_zone = config.zones.front().name;
  storage.project_number = world_internal::project_number(AuthRouteOptions{}.project_id);
  storage.started_ms = util::now_ms();
  buckets_ = std::make_unique<BucketDirectories>(std::move(storage));
}

bool MockServer::idle_and_empty(std::int64_t now_ms) {
  if (options_.idle_exit.count() <= 0 ||
      now_ms - last_use_ms_ < std::chrono::duration_cast<std::chrono::milliseconds>(options_.idle_exit).count()) {
    return false;
  }
  return world_->live_slices(now_ms) == 0;
}

void MockServer::ticker_loop() {
  std::unique_lock lock(ticker_mutex_);
  last_use_ms_ = util::now_ms();
  while (!stopping_) {
    lock.unlock();
    const auto now = util::now_ms();
    world_->tick(now);
    const bool idle = idle_and_empty(now);
    lock.lock();
    if (idle) {
      std::cerr << "jobman-mock-cloud: no request for " << options_.idle_exit.count()
                << " s and no slice alive; exiting (--idle-exit)\n";
      stopping_ = true;
      break;
    }
    ticker_cv_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stopping_; });
  }
  // httplib's stop() does nothing until its listen loop has begun, and that loop starts on run()'s thread after this
  // one. A stop() that came in between would be lost and the server would serve on forever, so the HTTP server is
  // stopped here, once its loop is known to run (or has already returned on its own).
  while (!served_) {
    if (http_.is_running()) {
      lock.unlock();
      http_.stop();
      lock.lock();
      ticker_cv_.wait(lock, [this] { return served_; });
      break;
    }
    ticker_cv_.wait_for(lock, std::chrono::milliseconds(2), [this] { return served_; });
  }
}

void MockServer::run() {
  {
    std::lock_guard lock(ticker_mutex_);
    if (stopping_) {
      return;
    }
  }
  ticker_ = std::thread([this] { ticker_loop(); });
  http_.listen_after_bind();
  {
    std::lock_guard lock(ticker_mutex_);
    stopping_ = true;
    served_ = true;
  }
  ticker_cv_.notify_all();
  ticker_.join();
}

void MockServer::stop() {
  {
    std::lock_guard lock(ticker_mutex_);
    stopping_ = true;
  }
  ticker_cv_.notify_all();
}

namespace {

// The installed world description (PREFIX/share/jobman/mock-cloud.yaml beside PREFIX/bin), else the source tree's.
std::filesystem::path default_config_file() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto installed = exe.parent_path().parent_path() / "share" / "jobman" / "mock-cloud.yaml";
    if (std::filesystem::exists(installed, ec)) {
      return installed;
    }
  }
  return JOBMAN_MOCK_DEFAULT_CONFIG;
}

// The mock's tools: tools/ beside the binary in a build tree, PREFIX/lib/jobman/mock-tools when installed.
std::filesystem::path default_tools_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    return {};
  }
  if (auto beside = exe.parent_path() / "tools"; std::filesystem::is_directory(beside, ec)) {
    return beside;
  }
  return exe.parent_path().parent_path() / "lib" / "jobman" / "mock-tools";
}

// The command line of jobman-mock-cloud, parsed into `options`.
void define_options(CLI::App& app, ServerOptions& options) {
  app.description("An emulator of the Cloud TPU v2 REST API, Google's OAuth token endpoint and the metadata "
                  "server's token path, for jobman and its tests.");
  app.footer(
      "The first line on stdout is \"listening on http://HOST:PORT\", the second \"admin token in FILE\". SIGTERM or "
      "SIGINT stops it (exit 0).\n"
      "Admin calls for demos and tests live under /mock/v1/ (preempt, markFaulty, injectLossSpike, injectHang,\n"
      "setHealth, faults, capacity, hardware, metrics, tokens, and where each worker host lives); they need\n"
      "'Authorization: Bearer TOKEN' with the token in FILE\n"
      "(STATE_DIR/admin-token by default; a temporary directory without --state-dir), never an API access token.\n"
      "The worker hosts are reached as on Google: SSH to the addresses the API gives, with a key in the ssh-keys "
      "metadata.");
  app.add_option("--host", options.host, "Address to listen on; a non-loopback one needs --allow-remote")
      ->default_str(options.host);
  app.add_option("--port", options.port, "Port; 0 picks a free one")->check(CLI::Range(0, 65535))->default_str("0");
  app.add_flag("--allow-remote", options.allow_remote, "Permit a non-loopback --host (the mock has no real security)");
  app.add_option("--state-dir", options.state_dir,
                 "Keep the world in DIR/state.db across restarts (created with mode 0700); in memory without it");
  app.add_option("--config", options.config_file, "The world description: zones, capacity, delays, event rates")
      ->default_str(options.config_file.string());
  app.add_option("--time-scale", options.time_scale, "Divide every delay and mean interval by X (1000: a day in 86 s)")
      ->check(CLI::Validator(
          [](std::string& text) {
            double value = 0;
            return CLI::detail::lexical_cast(text, value) && value > 0 && std::isfinite(value)
                       ? std::string()
                       : "must be a positive number, not '" + text + "'";
          },
          "POSITIVE"))
      ->default_str("1");
  app.add_option("--seed", options.seed, "Seed of every random draw")
      ->check(CLI::NonNegativeNumber) // The unsigned conversion alone would wrap "-3" around.
      ->default_str("1");
  app.add_option("--tools-dir", options.tools_dir,
                 "The mock's tools (gcsfuse, docker, conda, systolic-train), first on every worker host's PATH")
      ->default_str(options.tools_dir.string());
  app.add_flag(
      "--sandbox-homes", options.sandbox_homes,
      "Give worker hosts their sandbox directory as HOME instead of a filesystem of their own (/home/USER, "
      "/mnt, /tmp, ... in a mount namespace): what the mock does by itself where namespaces are not available");
  app.add_option("--sshd", options.sshd,
                 "The OpenSSH server each worker host runs on its own addresses (none: no SSH servers)")
      ->default_str(options.sshd.string());
  app.add_option("--ssh-port", options.ssh_port,
                 "The port of the hosts' sshd (default: 22 as root, else a free high port, published as the guest "
                 "attribute mock/ssh-port)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--visible-to-hosts", options.visible_to_hosts,
                 "A directory of this machine every worker host with a filesystem of its own sees, read-only, at its "
                 "own path (repeatable): how a test hands files to a workload");
  app.add_option_function<std::int64_t>(
         "--idle-exit", [&options](std::int64_t seconds) { options.idle_exit = std::chrono::seconds(seconds); },
         "Exit once no request came for SECONDS and no queued resource or node is alive (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->default_str("0");
  app.add_option("--write-service-account-key", options.service_account_key,
                 "Write a service-account key file (mode 0600) whose token_uri is this server; the server trusts it "
                 "(its public half is kept under --state-dir)");
  app.add_option("--admin-token-file", options.admin_token_file,
                 "Where the admin token is kept (mode 0600; reused when it exists and is private, else made anew); "
                 "default STATE_DIR/admin-token");
}

} // namespace

int run_mock_cloud(int argc, char** argv) {
  if ((argc == 3 || argc == 4) && std::string_view(argv[1]) == kReapWorkloadsOption) {
    return reap_workloads(argv[2], argc == 4 ? argv[3] : "");
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  ServerOptions options;
  options.config_file = default_config_file();
  options.tools_dir = default_tools_dir();
  CLI::App app{"", "jobman-mock-cloud"};
  define_options(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "jobman-mock-cloud: error: " << e.what() << "\nRun 'jobman-mock-cloud --help' for usage.\n";
    return static_cast<int>(ExitCode::usage);
  }
  try {
    MockServer server(options);
    int port = server.bind();
    // Held until this process ends, however it ends: then the reaper ends what the worker hosts still run.
    const int reaper = start_workload_reaper(server.marker_prefix(), server.scratch_directory());
    static_cast<void>(reaper);
    std::string host = options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host;
    std::cout << "listening on http://" << host << ":" << port << "\nadmin token in "
              << server.admin_token_path().string() << std::endl;
    std::thread waiter([&server, signals] {
      int received = 0;
      sigwait(&signals, &received);
      server.stop();
    });
    server.run();
    ::kill(::getpid(), SIGTERM); // Wakes the waiter when the server stopped on its own.
    waiter.join();
    return 0;
  } catch (const Error& e) {
    std::cerr << "jobman-mock-cloud: error: " << e.what() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "jobman-mock-cloud: error: " << e.what() << "\n";
    return 1;
  }
}

} // namespace jobman::mock
