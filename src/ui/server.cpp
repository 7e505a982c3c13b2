#include "jobman/ui/server.hpp"

#include <csignal>
#include <httplib.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <thread>

namespace jobman::ui {

namespace {

// Threads answering requests: a browser holds a few connections open, and the store answers one at a time anyway.
constexpr std::size_t kThreads = 4;

reporting::DashboardRequest request_of(const httplib::Request& req) {
  reporting::DashboardRequest request;
  request.method = req.method;
  request.path = req.path;
  for (const auto& [name, value] : req.params) {
    request.params.emplace(name, value); // The first of a repeated parameter.
  }
  request.host = req.get_header_value("Host");
  request.token = req.get_header_value("X-Jobman-Token");
  return request;
}

} // namespace

int serve(reporting::Dashboard& dashboard, int port, std::ostream& out) {
  // SIGINT and SIGTERM are taken by sigwait below: blocked here, before any thread starts, so that every thread of
  // the server inherits the mask and none is interrupted.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
  server.set_payload_max_length(std::size_t{64} * 1024);
  const auto handle = [&dashboard](const httplib::Request& req, httplib::Response& res) {
    const auto answer = dashboard.answer(request_of(req));
    res.status = answer.status;
    for (const auto& [name, value] : answer.headers) {
      res.set_header(name, value);
    }
    if (!answer.content_type.empty()) {
      res.set_content(answer.body, answer.content_type.c_str());
    }
  };
  // Every method reaches the dashboard, which refuses all but GET.
  server.Get(".*", handle);
  server.Post(".*", handle);
  server.Put(".*", handle);
  server.Patch(".*", handle);
  server.Delete(".*", handle);
  server.Options(".*", handle);
  // The path alone: the page's query carries the token.
  server.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    spdlog::debug("{} {} {}", req.method, req.path, res.status);
  });

  const char* host = "127.0.0.1";
  const int bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    spdlog::error("cannot listen on {}:{}: is the port in use?", host, port);
    return 1;
  }
  dashboard.set_port(bound);
  std::thread listener([&server] { server.listen_after_bind(); });
  out << "jobman dashboard: " << dashboard.url() << "\n(read-only, on this machine only; Ctrl-C stops it)" << std::endl;
  int signal = 0;
  sigwait(&stop_signals, &signal);
  server.stop();
  listener.join();
  return 0;
}

} // namespace jobman::ui
