#pragma once
// An httplib server that serves on its own thread until destroyed.

#include <atomic>
#include <httplib.h>
#include <thread>

namespace jobman::test {

// Runs server.listen_after_bind() on a thread; bind the server first, so connections made at once wait in the
// backlog until the thread accepts them. stop() (and the destructor) stops the server and joins the thread. httplib's
// own stop() does nothing until the listen loop has begun, so a stop that comes sooner waits for that moment instead
// of being lost, which would leave the join waiting forever.
class ServingThread {
public:
  explicit ServingThread(httplib::Server& server) : server_(server) {
    thread_ = std::thread([this] {
      server_.listen_after_bind();
      served_ = true;
    });
  }
  ~ServingThread() { stop(); }
  ServingThread(const ServingThread&) = delete;
  ServingThread& operator=(const ServingThread&) = delete;

  void stop() {
    if (!thread_.joinable()) {
      return;
    }
    while (!served_ && !server_.is_running()) {
      std::this_thread::yield();
    }
    if (!served_) {
      server_.stop();
    }
    thread_.join();
  }

private:
  httplib::Server& server_;
  std::atomic<bool> served_{false};
  std::thread thread_;
};

} // namespace jobman::test
