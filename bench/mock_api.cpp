// bench/mock_api [SLICES] [SECONDS] [THREADS]: starts jobman-mock-cloud with SLICES live (ACTIVE) queued resources,
// then measures GET and list latency and throughput on loopback, and the server's memory. Last line:
// get_p50_ms=.. get_p99_ms=.. get_rps=.. list_p50_ms=.. list_p99_ms=.. list_rps=.. rss_mib=..
#include "jobman/util/process.hpp"
#include "stats.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

const std::string kBase = "/v2/projects/bench/locations/us-central2-b";
const httplib::Headers kAuth = {{"Authorization", "Bearer bench-token"}};

// A world with room for every slice: one v4-8 (4 chips) per queued resource, quick provisioning, no preemptions.
std::string world_config(int slices) {
  const int chips = slices * 4;
  return "lifecycle: {creating: 1s, suspending: 1s, deleting: 1s}\n"
         "events: {spot_preemption_mean_interval: 3650d, maintenance_mean_interval: 3650d}\n"
         "provisioning:\n  default: {distribution: fixed, seconds: 1s}\n"
         "zones:\n  us-central2-b:\n    v4:\n      spot: {chips: " +
         std::to_string(chips) + ", quota: " + std::to_string(chips) + "}\n";
}

struct Server {
  pid_t pid = -1;
  int port = 0;
};

Server start_server(const std::filesystem::path& dir) {
  const std::string config = (dir / "world.yaml").string();
  const std::string state = (dir / "state").string();
  auto child = jobman::util::ProcessBuilder(
                   {JOBMAN_MOCK_BINARY, "--port", "0", "--time-scale", "100", "--config", config, "--state-dir", state})
                   .output(jobman::util::Stream::pipe())
                   .spawn();
  Server server;
  server.pid = child.pid;
  std::string line;
  char c = 0;
  while (::read(child.out_fd, &c, 1) == 1 && c != '\n') {
    line += c;
  }
  jobman::util::close_fd(child.out_fd);
  const auto colon = line.rfind(':');
  if (line.rfind("listening on ", 0) != 0 || colon == std::string::npos) {
    std::fprintf(stderr, "the mock did not start: %s\n", line.c_str());
    std::exit(1);
  }
  server.port = std::atoi(line.c_str() + colon + 1);
  return server;
}

long rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      long kib = 0;
      status >> kib;
      return kib;
    }
    status.ignore(4096, '\n');
  }
  return -1;
}

struct Result {
  std::vector<double> latencies_ms;
  double seconds = 0;
  long errors = 0;
};

// THREADS clients, each on its own keep-alive connection, issue `path` for SECONDS.
Result hammer(int port, const std::string& path, double seconds, int threads) {
  std::vector<std::vector<double>> per_thread(static_cast<std::size_t>(threads));
  std::atomic<long> errors{0};
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      httplib::Client client("127.0.0.1", port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      auto& mine = per_thread[static_cast<std::size_t>(t)];
      while (Clock::now() < end) {
        const auto before = Clock::now();
        auto response = client.Get(path, kAuth);
        const auto after = Clock::now();
        if (!response || response->status != 200) {
          ++errors;
          continue;
        }
        mine.push_back(std::chrono::duration<double, std::milli>(after - before).count());
      }
    });
  }
  for (auto& thread : pool) {
    thread.join();
  }
  Result result;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.errors = errors;
  for (auto& v : per_thread) {
    result.latencies_ms.insert(result.latencies_ms.end(), v.begin(), v.end());
  }
  std::sort(result.latencies_ms.begin(), result.latencies_ms.end());
  return result;
}

using jobman::bench::quantile;

} // namespace

int main(int argc, char** argv) {
  const int slices = argc > 1 ? std::atoi(argv[1]) : 1000;
  const double seconds = argc > 2 ? std::atof(argv[2]) : 5;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  if (slices <= 0 || seconds <= 0 || threads <= 0) {
    std::fprintf(stderr, "usage: mock_api [SLICES] [SECONDS] [THREADS]\n");
    return 2;
  }
  char dir_template[] = "/tmp/jobman-mock-api-XXXXXX";
  const std::filesystem::path dir = ::mkdtemp(dir_template);
  std::filesystem::create_directories(dir / "state");
  std::ofstream(dir / "world.yaml") << world_config(slices);
  std::ofstream(dir / "state" / "access-tokens") << "bench-token\n";
  const Server server = start_server(dir);

  httplib::Client client("127.0.0.1", server.port);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true); // As libcurl does; otherwise every POST waits 40 ms for a delayed ACK.
  const nlohmann::json body = {
      {"tpu",
       {{"nodeSpec",
         {{{"parent", "projects/bench/locations/us-central2-b"},
           {"node", {{"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
      {"spot", nlohmann::json::object()}};
  const auto creating = Clock::now();
  for (int i = 0; i < slices; ++i) {
    auto spec = body;
    const std::string id = "bench-" + std::to_string(i);
    spec["tpu"]["nodeSpec"][0]["nodeId"] = id;
    auto response =
        client.Post(kBase + "/queuedResources?queuedResourceId=" + id, kAuth, spec.dump(), "application/json");
    if (!response || response->status != 200) {
      std::fprintf(stderr, "create %s failed: %d\n", id.c_str(), response ? response->status : -1);
      return 1;
    }
  }
  const double create_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - creating).count() / static_cast<double>(slices);
  // Wait until every slice is ACTIVE (the world runs 100 times faster than real time).
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  int active = 0;
  while (Clock::now() < deadline) {
    active = 0;
    std::string token;
    do {
      auto response =
          client.Get(kBase + "/queuedResources?pageSize=500" + (token.empty() ? "" : "&pageToken=" + token), kAuth);
      if (!response || response->status != 200) {
        break;
      }
      const auto page = nlohmann::json::parse(response->body);
      for (const auto& qr : page.value("queuedResources", nlohmann::json::array())) {
        active += qr["state"]["state"] == "ACTIVE" ? 1 : 0;
      }
      token = page.value("nextPageToken", "");
    } while (!token.empty());
    if (active == slices) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::fprintf(stderr, "%d of %d slices ACTIVE; create took %.2f ms on average\n", active, slices, create_ms);

  const auto get =
      hammer(server.port, kBase + "/queuedResources/bench-" + std::to_string(slices / 2), seconds, threads);
  const auto list = hammer(server.port, kBase + "/queuedResources?pageSize=100", seconds, threads);
  // As jobman's client and Google's Go client ask: compact JSON.
  const auto compact = hammer(server.port, kBase + "/queuedResources?pageSize=100&prettyPrint=false", seconds, threads);
  const long rss = rss_kib(server.pid);
  ::kill(server.pid, SIGTERM);
  jobman::util::wait_exit(server.pid);
  std::filesystem::remove_all(dir);

  const auto rps = [](const Result& r) { return static_cast<double>(r.latencies_ms.size()) / r.seconds; };
  std::fprintf(stderr,
               "GET: %zu requests, %ld errors; list (100 per page): %zu requests, %ld errors; compact list: %zu "
               "requests, %ld errors; %d threads\n",
               get.latencies_ms.size(), get.errors, list.latencies_ms.size(), list.errors, compact.latencies_ms.size(),
               compact.errors, threads);
  std::printf("get_p50_ms=%.3f get_p99_ms=%.3f get_rps=%.0f list_p50_ms=%.3f list_p99_ms=%.3f list_rps=%.0f "
              "compact_list_p50_ms=%.3f compact_list_p99_ms=%.3f compact_list_rps=%.0f rss_mib=%.1f\n",
              quantile(get.latencies_ms, 0.5), quantile(get.latencies_ms, 0.99), rps(get),
              quantile(list.latencies_ms, 0.5), quantile(list.latencies_ms, 0.99), rps(list),
              quantile(compact.latencies_ms, 0.5), quantile(compact.latencies_ms, 0.99), rps(compact),
              static_cast<double>(rss) / 1024.0);
  return active == slices && get.errors == 0 && list.errors == 0 && compact.errors == 0 ? 0 : 1;
}
