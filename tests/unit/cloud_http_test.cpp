// HttpClient against a real HTTP server on loopback.
#include "jobman/cloud/http.hpp"
#include "support/serving_thread.hpp"

#include <chrono>
#include <condition_variable>
#include <future>
#include <gtest/gtest.h>
#include <httplib.h>
#include <mutex>
#include <string>

namespace jobman::cloud {
namespace cloud_http_test {

// One client, two requests at once: the second is answered while the first still waits for its answer. (With one
// shared handle, a queuedResources.create the API did not answer held up every other call of the supervisor,
// its zone listings included, and with them its reaction to SIGTERM.)
TEST(HttpClient, ASlowRequestDoesNotHoldUpAnother) {
  httplib::Server server;
  std::mutex mutex;
  std::condition_variable changed;
  bool slow_arrived = false;
  bool release = false;
  server.Get("/slow", [&](const httplib::Request&, httplib::Response& res) {
    std::unique_lock lock(mutex);
    slow_arrived = true;
    changed.notify_all();
    changed.wait(lock, [&] { return release; });
    res.set_content("slow", "text/plain");
  });
  server.Get("/fast", [](const httplib::Request&, httplib::Response& res) { res.set_content("fast", "text/plain"); });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  test::ServingThread serving(server);
  const auto base = "http://127.0.0.1:" + std::to_string(port);
  const auto let_go = [&] {
    const std::lock_guard lock(mutex);
    release = true;
    changed.notify_all();
  };

  HttpClient client;
  auto slow = std::async(std::launch::async, [&] { return client.send({"GET", base + "/slow", {}, "", {}}); });
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(changed.wait_for(lock, std::chrono::seconds(30), [&] { return slow_arrived; }));
  }
  auto fast = std::async(std::launch::async, [&] { return client.send({"GET", base + "/fast", {}, "", {}}); });
  const bool answered = fast.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  EXPECT_TRUE(answered) << "the second request waited for the first";
  let_go();
  const auto fast_answer = fast.get();
  EXPECT_EQ(fast_answer.status, 200) << fast_answer.error;
  EXPECT_EQ(fast_answer.body, "fast");
  const auto slow_answer = slow.get();
  EXPECT_EQ(slow_answer.status, 200) << slow_answer.error;
  EXPECT_EQ(slow_answer.body, "slow");

  // Both handles are kept for what follows: a third request works as well.
  const auto again = client.send({"GET", base + "/fast", {}, "", {}});
  EXPECT_EQ(again.status, 200) << again.error;
}

} // namespace cloud_http_test
} // namespace jobman::cloud
