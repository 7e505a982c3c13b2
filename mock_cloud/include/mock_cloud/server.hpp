// The jobman-mock-cloud HTTP server: the TPU v2 REST API, Cloud Storage's JSON API over the bucket directories, the
// admin API and the background ticker.
#pragma once

#include "mock_cloud/auth.hpp"
#include "mock_cloud/cloud_storage.hpp"
#include "mock_cloud/gcs_meter.hpp"
#include "mock_cloud/worker_hosts.hpp"
#include "mock_cloud/world.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <httplib.h>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace jobman::mock {

// How the server is started (the command-line options of jobman-mock-cloud).
struct ServerOptions {
  std::string host = "127.0.0.1";            // Address to listen on.
  int port = 0;                              // 0 picks a free port.
  bool allow_remote = false;                 // Permits a non-loopback host.
  std::filesystem::path state_dir;           // Where the state snapshot lives; empty keeps state in memory.
  std::filesystem::path config_file;         // The world description (configs/mock-cloud.yaml).
  double time_scale = 1;                     // Every delay and mean interval is divided by this.
  std::uint64_t seed = 1;                    // Seeds every random draw.
  std::filesystem::path service_account_key; // When set, a service-account key file the mock trusts is written here.
  std::filesystem::path tools_dir;           // The mock's tools (gcloud, gcsfuse, systolic-train), on workers' PATH.
  std::filesystem::path admin_token_file;    // Holds the admin token; empty: STATE_DIR/admin-token, else scratch.
  bool sandbox_homes = false;                // Hosts get no filesystem of their own, even where they could.
  std::chrono::seconds idle_exit{0};         // Stops once no request came for this long and no slice is live; 0: never.
  // Directories of this machine that hosts with filesystems of their own see read-only, at their own paths.
  std::vector<std::filesystem::path> visible_to_hosts;
  // The OpenSSH server every worker host runs; "none", or a program that is not there, runs none.
  std::filesystem::path sshd = "/usr/sbin/sshd";
  int ssh_port = 0; // The hosts' SSH port; 0: 22 as root, else a free high port.
};

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(std::string_view host);

// Decides whether a /v2 request carries an acceptable bearer token.
class BearerCheck {
public:
  // Judges one token (without the "Bearer " prefix).
  using Validator = std::function<bool(std::string_view token)>;
  // Accepts any non-empty token until a validator is installed.
  BearerCheck();
  // Installs the validator (e.g. the token authority's); thread-safe with respect to later requests only.
  void set_validator(Validator validator);
  // True when the request has "Authorization: Bearer <token>" and the validator accepts the token.
  [[nodiscard]] bool authorized(const httplib::Request& request) const;

private:
  Validator validator_; // The current token judge.
};

// The HTTP server around one World; routes are registered by the constructor.
class MockServer {
public:
  // Loads the config and the state dir (throws jobman::Error or ConfigError); refuses a remote host unless allowed.
  explicit MockServer(ServerOptions options);
  // Stops the server and the ticker.
  ~MockServer();
  MockServer(const MockServer&) = delete;
  MockServer& operator=(const MockServer&) = delete;

  // Binds the listening socket and starts the data plane; returns the port (throws jobman::Error on failure).
  int bind();
  // Serves until stop(); runs the ticker meanwhile.
  void run();
  // Stops serving; safe from any thread.
  void stop();

  // The world the server exposes.
  World& world() { return *world_; }
  // The bearer-token gate of the /v2 API: install the token authority's validator here.
  BearerCheck& bearer() { return bearer_; }
  // The underlying HTTP server, for other parts of the mock (e.g. token endpoints) to add routes to.
  httplib::Server& http() { return http_; }
  // The file holding the token the /mock/v1 routes require (mode 0600).
  [[nodiscard]] const std::filesystem::path& admin_token_path() const { return admin_token_path_; }
  // The start of every worker host's marker (see WorkerHosts::marker_prefix); empty before bind().
  [[nodiscard]] std::string marker_prefix() const { return workers_ ? workers_->marker_prefix() : std::string(); }
  // The scratch directory that holds the sandboxes and buckets without a state directory; empty with one.
  [[nodiscard]] const std::filesystem::path& scratch_directory() const { return scratch_dir_; }

private:
  // Answers one request.
  using Handler = std::function<Reply(const httplib::Request&)>;
  // Registers the /v2 and /mock/v1 routes and the error handlers.
  void register_routes();
  // Registers locations, acceleratorTypes, runtimeVersions and generateServiceIdentity (src/server_routes.cpp).
  void register_catalog_routes();
  // Registers nodes.create, stop, start, patch and getGuestAttributes, operations.cancel and delete.
  void register_node_and_operation_routes();
  // Registers Compute Engine's projects.get, projects.setCommonInstanceMetadata and globalOperations.get and wait
  // under /compute/v1, and OS Login's users.getLoginProfile and importSshPublicKey under /oslogin/v1
  // (src/server_compute.cpp).
  void register_compute_routes();
  // Registers Cloud Storage's buckets.get, objects.list and objects.get under /storage/v1, and the admin API's
  // /mock/v1/buckets (src/storage_routes.cpp).
  void register_storage_routes();
  // A /v2 route: bearer check, injected faults, then `handler`, then `fields`; counted under `method` in the metrics.
  httplib::Server::Handler api_route(const std::string& method, Handler handler);
  // A /storage/v1 route: the same bearer check, then `handler`, then `fields`; errors in Cloud Storage's form.
  httplib::Server::Handler storage_route(const std::string& method, Handler handler);
  // A /mock/v1 route: only the admin token opens it; counted under `method` in the metrics.
  httplib::Server::Handler admin_route(const std::string& method, Handler handler);
  // The 401 of a request without an access token the server accepts (and its WWW-Authenticate header on `res`), or
  // nullopt when the request may go on.
  std::optional<Reply> refuse_unauthenticated(const httplib::Request& req, httplib::Response& res) const;
  // Advances the world every 20 ms until stopped (or idle, with idle_exit), then stops the HTTP server (see stop()).
  void ticker_loop();
  // True when idle_exit is set, no request came for that long and the world has no live slice.
  bool idle_and_empty(std::int64_t now_ms);
  // Creates the worker hosts (under the state directory, or a scratch one) and connects them to the world.
  void start_data_plane(int port);
  // The scratch directory used without a state directory, created on first use.
  const std::filesystem::path& scratch_dir();

  ServerOptions options_;                  // How it was started.
  TokenAuthority authority_;               // Issues and checks access tokens (wall clock, not the world's).
  std::unique_ptr<World> world_;           // The emulated cloud.
  std::unique_ptr<GcsMeter> meter_;        // What the hosts read the buckets through; null when unmetered.
  std::unique_ptr<WorkerHosts> workers_;   // The slices' worker hosts; created by bind().
  std::filesystem::path scratch_dir_;      // Holds workers and buckets when there is no state directory.
  BearerCheck bearer_;                     // The /v2 authentication gate.
  std::filesystem::path admin_token_path_; // Where the admin token is kept.
  std::string admin_token_;                // What the /mock/v1 routes require as their bearer token.
  httplib::Server http_;                   // The HTTP server.
  std::thread ticker_;                     // The background ticker.
  std::mutex ticker_mutex_;                // Guards stopping_ and served_.
  std::condition_variable ticker_cv_;      // Wakes the ticker to stop.
  bool stopping_ = false;                  // Set once by stop().
  bool served_ = false;                    // Set once the HTTP server's listen loop has returned.
  std::atomic_int64_t last_use_ms_{0};     // When the last request came in (or the ticker started).
  // Cloud Storage's view of the bucket directories; created by bind().
  std::unique_ptr<BucketDirectories> buckets_;
};

// The jobman-mock-cloud command: parses argv, prints "listening on http://HOST:PORT", serves until SIGTERM.
int run_mock_cloud(int argc, char** argv);

} // namespace jobman::mock
