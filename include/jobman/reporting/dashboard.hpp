// `jobman ui`: a read-only dashboard of the store, as answers to HTTP requests. This layer decides every answer (the
// page, the changes since a cursor, a job's panel and log tail, the report); jobman-ui (src/ui) serves them on
// loopback with cpp-httplib. The jobman binary itself runs jobman-ui, so that a `list` never loads a web server.
#pragma once

#include "jobman/config/prices.hpp"
#include "jobman/store/job_store.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace jobman::reporting {

// What the dashboard needs to know of a request.
struct DashboardRequest {
  std::string method;                        // "GET", ...
  std::string path;                          // "/api/changes"
  std::map<std::string, std::string> params; // The query's parameters.
  std::string host;                          // The Host header.
  std::string token;                         // The X-Jobman-Token header ("" without).
};

// An answer: status, type, body and extra headers.
struct DashboardAnswer {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// The dashboard over one store. Answers one request at a time (the store's connection is not shared across threads).
class Dashboard {
public:
  // `token` is the secret every request must carry: the page's as ?token=, the API's as X-Jobman-Token.
  Dashboard(store::JobStore& store, config::PriceTable prices, std::string token);

  // The port it is served on: a request's Host must name it (a page of another site that a DNS name rebinds to
  // 127.0.0.1 gets nothing).
  void set_port(int port);
  // "http://127.0.0.1:PORT/?token=...", what to open.
  [[nodiscard]] std::string url() const;

  // The answer to `request`.
  DashboardAnswer answer(const DashboardRequest& request);

private:
  DashboardAnswer page();
  DashboardAnswer changes(const DashboardRequest& request);
  DashboardAnswer job_panel(const DashboardRequest& request);
  DashboardAnswer report(const DashboardRequest& request);

  std::mutex mutex_;
  store::JobStore& store_;
  config::PriceTable prices_;
  std::string token_;
  int port_ = 0;
};

// A new random token: 32 hex digits from the kernel's random source.
std::string new_dashboard_token();

} // namespace jobman::reporting
