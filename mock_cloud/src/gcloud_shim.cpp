#include "mock_cloud/gcloud_shim.hpp"

#include "jobman/util/error.hpp"
#include "jobman/util/process.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/host_filesystem.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <httplib.h>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <unistd.h>

namespace jobman::mock {

using nlohmann::json;

std::optional<std::vector<int>> parse_worker_selection(std::string_view spec, int count, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<std::vector<int>> {
    if (error != nullptr) {
      *error = why;
    }
    return std::nullopt;
  };
  std::vector<int> out;
  if (spec == "all") {
    for (int w = 0; w < count; ++w) {
      out.push_back(w);
    }
    return out;
  }
  std::set<int> seen;
  for (const auto& part : util::split(spec, ',')) {
    const auto dash = part.find('-');
    const auto first = util::parse_int(part.substr(0, dash));
    const auto last = dash == std::string::npos ? first : util::parse_int(part.substr(dash + 1));
    if (!first || !last || *first < 0 || *last < *first) {
      return fail("Invalid value for [--worker]: '" + std::string(spec) +
                  "' (expected all, N, a list such as 1,3 or a range such as 1-3)");
    }
    if (*last >= count) {
      return fail("Invalid value for [--worker]: worker " + std::to_string(*last) + " does not exist; the TPU has " +
                  std::to_string(count) + " worker" + (count == 1 ? "" : "s") + " (0-" + std::to_string(count - 1) +
                  ")");
    }
    for (auto w = *first; w <= *last; ++w) {
      if (seen.insert(static_cast<int>(w)).second) {
        out.push_back(static_cast<int>(w));
      }
    }
  }
  return out;
}

std::optional<RemotePath> parse_remote_path(std::string_view operand) {
  const auto colon = operand.find(':');
  const auto slash = operand.find('/');
  if (colon == std::string_view::npos || colon == 0 || (slash != std::string_view::npos && slash < colon)) {
    return std::nullopt;
  }
  RemotePath remote;
  auto host = operand.substr(0, colon);
  if (const auto at = host.find('@'); at != std::string_view::npos) {
    remote.user = std::string(host.substr(0, at));
    host.remove_prefix(at + 1);
  }
  remote.node = std::string(host);
  remote.path = std::string(operand.substr(colon + 1));
  return remote;
}

namespace {

// gcloud's own failures: "ERROR: (gcloud.COMMAND) MESSAGE", exit 1 (2 for usage).
struct GcloudError : std::runtime_error {
  GcloudError(const std::string& message, int exit_code) : std::runtime_error(message), code(exit_code) {}
  int code;
};

// The parsed command line: positional words and --flags (repeated flags keep every value).
struct CommandLine {
  std::vector<std::string> words;
  std::multimap<std::string, std::string> flags;

  [[nodiscard]] bool has(const std::string& name) const { return flags.count(name) > 0; }
  [[nodiscard]] std::string value(const std::string& name, const std::string& fallback = "") const {
    auto it = flags.find(name);
    return it == flags.end() ? fallback : it->second;
  }
};

// Flags that take no value; every other --flag takes one (as --flag=value or --flag value).
bool is_boolean_flag(const std::string& name) {
  static const std::set<std::string> names = {"quiet",
                                              "recurse",
                                              "internal-ip",
                                              "tunnel-through-iap",
                                              "compress",
                                              "dry-run",
                                              "help",
                                              "version",
                                              "no-user-output-enabled",
                                              "log-http",
                                              "plain",
                                              "strict-host-key-checking"};
  return names.count(name) > 0;
}

CommandLine parse_command_line(const std::vector<std::string>& args) {
  CommandLine line;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& arg = args[i];
    if (arg == "-q") {
      line.flags.emplace("quiet", "");
    } else if (arg == "--") {
      line.words.insert(line.words.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    } else if (arg.rfind("--", 0) == 0) {
      const auto eq = arg.find('=');
      const auto name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (eq != std::string::npos) {
        line.flags.emplace(name, arg.substr(eq + 1));
      } else if (is_boolean_flag(name)) {
        line.flags.emplace(name, "");
      } else if (i + 1 < args.size()) {
        line.flags.emplace(name, args[++i]);
      } else {
        throw GcloudError("argument --" + name + ": expected one argument", 2);
      }
    } else {
      line.words.push_back(arg);
    }
  }
  return line;
}

// gcloud's properties: $CLOUDSDK_CONFIG/configurations/config_default, an INI file ("[core]\nproject = p").
class Properties {
public:
  Properties() {
    auto dir = util::getenv_nonempty("CLOUDSDK_CONFIG");
    file_ = (dir ? std::filesystem::path(*dir) : util::home_dir() / ".config" / "gcloud") / "configurations" /
            "config_default";
    std::ifstream in(file_);
    std::string line;
    std::string section;
    while (std::getline(in, line)) {
      auto text = std::string(util::trim(line));
      if (text.size() > 2 && text.front() == '[' && text.back() == ']') {
        section = text.substr(1, text.size() - 2);
      } else if (auto eq = text.find('='); eq != std::string::npos && !section.empty()) {
        values_[section + "/" + std::string(util::trim(text.substr(0, eq)))] =
            std::string(util::trim(text.substr(eq + 1)));
      }
    }
  }

  // "core/project" for "project", as gcloud names properties.
  static std::string full_name(const std::string& name) {
    return name.find('/') == std::string::npos ? "core/" + name : name;
  }
  [[nodiscard]] std::optional<std::string> get(const std::string& name) const {
    auto it = values_.find(full_name(name));
    return it == values_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  void set(const std::string& name, const std::optional<std::string>& value) {
    if (value) {
      values_[full_name(name)] = *value;
    } else {
      values_.erase(full_name(name));
    }
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> sections;
    for (const auto& [key, val] : values_) {
      const auto slash = key.find('/');
      sections[key.substr(0, slash)].emplace_back(key.substr(slash + 1), val);
    }
    std::string text;
    for (const auto& [section, entries] : sections) {
      text.append("[").append(section).append("]\n");
      for (const auto& [key, val] : entries) {
        text.append(key).append(" = ").append(val).append("\n");
      }
    }
    util::ensure_directory(file_.parent_path(), 0700);
    util::write_file_atomic(file_, text, 0600);
  }
  [[nodiscard]] const std::map<std::string, std::string>& all() const { return values_; }

private:
  std::filesystem::path file_;
  std::map<std::string, std::string> values_;
};

// The mock's address from CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU, the variable Google's gcloud reads.
std::unique_ptr<httplib::Client> mock_client() {
  auto endpoint = util::getenv_nonempty("CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU");
  if (!endpoint) {
    throw GcloudError("this gcloud is jobman's mock cloud stand-in and only reaches the mock: set "
                      "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU to its address (http://127.0.0.1:PORT/)",
                      1);
  }
  auto base = *endpoint;
  while (!base.empty() && base.back() == '/') {
    base.pop_back();
  }
  if (base.size() > 3 && base.compare(base.size() - 3, 3, "/v2") == 0) {
    base.resize(base.size() - 3);
  }
  auto client = std::make_unique<httplib::Client>(base);
  if (!client->is_valid()) {
    throw GcloudError("CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU is not a URL: " + *endpoint, 1);
  }
  client->set_tcp_nodelay(true);
  client->set_connection_timeout(std::chrono::seconds(10));
  client->set_read_timeout(std::chrono::seconds(60));
  return client;
}

// GET `path`; throws GcloudError when the mock cannot be reached.
// A GET, retried like gcloud's HTTP layer retries reads: on 429 and 5xx answers, a few times with growing waits.
httplib::Result get(httplib::Client& client, const std::string& path, const httplib::Headers& headers = {}) {
  auto result = client.Get(path, headers);
  for (int retry = 0; retry < 5 && result && (result->status == 429 || result->status >= 500); ++retry) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50LL << retry));
    result = client.Get(path, headers);
  }
  if (!result) {
    throw GcloudError("There was a problem refreshing your current auth tokens: cannot reach the mock cloud (" +
                          httplib::to_string(result.error()) + ")",
                      1);
  }
  return result;
}

// An access token from the mock's metadata-server path (CLOUDSDK_AUTH_ACCESS_TOKEN wins, as in gcloud).
std::string access_token(httplib::Client& client) {
  if (auto token = util::getenv_nonempty("CLOUDSDK_AUTH_ACCESS_TOKEN")) {
    return *token;
  }
  auto reply =
      get(client, "/computeMetadata/v1/instance/service-accounts/default/token", {{"Metadata-Flavor", "Google"}});
  auto body = json::parse(reply->body, nullptr, false);
  if (reply->status != 200 || !body.is_object() || !body.contains("access_token")) {
    throw GcloudError("cannot get an access token from the mock cloud (HTTP " + std::to_string(reply->status) + ")", 1);
  }
  return body["access_token"].get<std::string>();
}

// The API's error message in a reply body, or the status line.
std::string api_message(const httplib::Result& reply) {
  auto body = json::parse(reply->body, nullptr, false);
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    return body["error"].value("status", std::string()) + ": " + body["error"].value("message", std::string());
  }
  return "HTTP " + std::to_string(reply->status);
}

// Where a TPU command acts: project, zone and the client.
struct Target {
  std::string project;
  std::string zone;
  std::unique_ptr<httplib::Client> client;
};

Target resolve_target(const CommandLine& line) {
  Properties properties;
  Target target;
  target.project = line.value("project");
  if (target.project.empty()) {
    target.project =
        util::getenv_nonempty("CLOUDSDK_CORE_PROJECT").value_or(properties.get("core/project").value_or(""));
  }
  target.zone = line.value("zone");
  if (target.zone.empty()) {
    target.zone = util::getenv_nonempty("CLOUDSDK_COMPUTE_ZONE").value_or(properties.get("compute/zone").value_or(""));
  }
  if (target.project.empty()) {
    throw GcloudError("The required property [project] is not currently set. Use --project or "
                      "gcloud config set project PROJECT.",
                      1);
  }
  if (target.zone.empty()) {
    throw GcloudError("Error parsing [tpu]. The [tpu] resource is not properly specified. Failed to find attribute "
                      "[zone]. Use --zone or gcloud config set compute/zone ZONE.",
                      1);
  }
  target.client = mock_client();
  return target;
}

// The node's worker count and external addresses, from nodes.get.
std::vector<std::string> node_endpoints(Target& target, const std::string& node) {
  const auto token = access_token(*target.client);
  auto reply = get(*target.client, "/v2/projects/" + target.project + "/locations/" + target.zone + "/nodes/" + node,
                   {{"Authorization", "Bearer " + token}});
  if (reply->status != 200) {
    throw GcloudError(api_message(reply), 1);
  }
  auto body = json::parse(reply->body, nullptr, false);
  std::vector<std::string> addresses;
  for (const auto& endpoint : body.value("networkEndpoints", json::array())) {
    addresses.push_back(
        endpoint.value("accessConfig", json::object()).value("externalIp", endpoint.value("ipAddress", "")));
  }
  return addresses;
}

// The token in the file JOBMAN_MOCK_ADMIN_TOKEN_FILE names; throws GcloudError.
std::string read_admin_token() {
  const auto file = util::getenv_nonempty("JOBMAN_MOCK_ADMIN_TOKEN_FILE");
  if (!file) {
    throw GcloudError("this gcloud reaches the mock's worker hosts through its admin API: set "
                      "JOBMAN_MOCK_ADMIN_TOKEN_FILE to the mock's admin token file (STATE_DIR/admin-token, or the "
                      "file its second line of output names)",
                      1);
  }
  std::string text;
  try {
    text = util::read_file(*file);
  } catch (const Error& e) {
    throw GcloudError(std::string("cannot read the mock's admin token: ") + e.what(), 1);
  }
  return std::string(util::trim(text));
}

// The mock's admin token, from the file JOBMAN_MOCK_ADMIN_TOKEN_FILE names: the worker hosts are reached through the
// mock's admin API, which no API access token opens. The token travels only in a request header. Read once.
const std::string& admin_token() {
  static const std::string token = read_admin_token();
  return token;
}

// A worker host as the mock describes it; nullopt when it is not up (or the mock itself is gone).
std::optional<json> worker_host(Target& target, const std::string& node, int worker, const std::string& user) {
  auto reply = target.client->Get("/mock/v1/projects/" + target.project + "/locations/" + target.zone + "/nodes/" +
                                      node + "/workers/" + std::to_string(worker) + "?user=" + user,
                                  {{"Authorization", "Bearer " + admin_token()}});
  if (reply && (reply->status == 401 || reply->status == 403)) {
    throw GcloudError("the mock refused its admin token (" + api_message(reply) +
                          "): JOBMAN_MOCK_ADMIN_TOKEN_FILE names another mock's token",
                      1);
  }
  if (!reply || reply->status != 200) {
    return std::nullopt;
  }
  auto body = json::parse(reply->body, nullptr, false);
  if (!body.is_object() || !body.contains("env") || !body.contains("home")) {
    return std::nullopt;
  }
  return body;
}

// jobman-mock-host-login, beside this gcloud in the mock's tools.
std::filesystem::path host_login_program() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    throw GcloudError("cannot find the mock's tools: " + ec.message(), 1);
  }
  return self.parent_path() / "jobman-mock-host-login";
}

// True when the host gives its sessions a filesystem of their own (a mount namespace with its root as /).
bool namespaced(const json& host) {
  return host.value("home_mode", std::string()) == "namespace";
}

// The host's own filesystem for `user`, as the mock describes the host (namespace mode).
HostFilesystem host_filesystem(const json& host, const std::string& user) {
  HostFilesystem filesystem;
  filesystem.root = host.at("root").get<std::string>();
  filesystem.home_source = host.at("sandbox_home").get<std::string>();
  filesystem.user = user;
  for (const auto& dir : host.value("keep", json::array())) {
    filesystem.keep.emplace_back(dir.get<std::string>());
  }
  for (const auto& dir : host.value("keep_read_only", json::array())) {
    filesystem.keep_read_only.emplace_back(dir.get<std::string>());
  }
  return filesystem;
}

// Starts `bash -c command` (or an interactive shell) on a worker host; returns its pid. A host in namespace mode is
// entered through jobman-mock-host-login, which starts the shell in /home/USER on the host's own filesystem;
// everything the shell starts stays there.
pid_t start_on_host(const json& host, const std::string& user, const std::optional<std::string>& command,
                    bool own_stdin) {
  std::vector<std::string> shell =
      command ? std::vector<std::string>{"bash", "-c", *command} : std::vector<std::string>{"bash", "-il"};
  std::vector<std::string> argv;
  if (namespaced(host)) {
    const auto filesystem = host_filesystem(host, user);
    argv = {host_login_program().string(),
            "--root",
            filesystem.root.string(),
            "--home-source",
            filesystem.home_source.string(),
            "--user",
            user};
    for (const auto& dir : filesystem.keep) {
      argv.insert(argv.end(), {"--keep", dir.string()});
    }
    for (const auto& dir : filesystem.keep_read_only) {
      argv.insert(argv.end(), {"--keep-read-only", dir.string()});
    }
    argv.emplace_back("--");
    argv.emplace_back("/bin/bash");
    argv.insert(argv.end(), shell.begin() + 1, shell.end());
  }
  util::ProcessBuilder process(namespaced(host) ? argv : shell);
  process.program(namespaced(host) ? argv.front() : std::string("/bin/bash")).clear_env();
  for (const auto& [key, value] : host["env"].items()) {
    process.env(key, value.get<std::string>());
  }
  if (const char* term = std::getenv("TERM"); term != nullptr && !command) {
    process.env("TERM", term);
  }
  // The remote side of an ssh session: its own session, ended (SIGHUP) when the client goes away. A session that
  // cannot start (this process gone, no home) fails as ssh does, with 255.
  if (command) {
    process.group(util::ProcessGroup::new_session);
  }
  process.parent_death_signal(SIGHUP).setup_failure_status(255);
  process.directory(namespaced(host) ? host["sandbox_home"].get<std::string>() : host["home"].get<std::string>());
  if (!own_stdin) {
    process.input(util::Stream::null());
  }
  return process.spawn().pid;
}

// The sessions this ssh invocation started, for the signal handler to hang up on (as sshd does when the client
// goes away). Fixed storage: a signal handler may not touch the heap.
constexpr int kMaxChildren = 4096;
std::array<pid_t, kMaxChildren> g_children{}; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
volatile std::sig_atomic_t g_child_count = 0; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

extern "C" void hang_up_children(int /*signal*/) {
  for (int i = 0; i < g_child_count; ++i) {
    ::kill(-g_children[static_cast<std::size_t>(i)], SIGHUP);
    ::kill(g_children[static_cast<std::size_t>(i)], SIGHUP);
  }
  ::_exit(255);
}

int run_ssh(const CommandLine& line) {
  if (line.words.size() != 1) {
    throw GcloudError("argument TPU: expected one TPU name ([USER@]TPU_NAME)", 2);
  }
  std::string user = util::current_user();
  std::string node = line.words[0];
  if (auto at = node.find('@'); at != std::string::npos) {
    user = node.substr(0, at);
    node = node.substr(at + 1);
  }
  auto target = resolve_target(line);
  const auto addresses = node_endpoints(target, node);
  std::string error;
  auto workers = parse_worker_selection(line.value("worker", "0"), static_cast<int>(addresses.size()), &error);
  if (!workers) {
    throw GcloudError(error, 1);
  }
  std::optional<std::string> command;
  if (line.has("command")) {
    command = line.value("command");
  }
  if (!command && workers->size() != 1) {
    throw GcloudError("an interactive session needs exactly one --worker", 2);
  }
  std::vector<std::pair<int, pid_t>> running;
  std::vector<int> unreachable;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    std::signal(sig, hang_up_children);
  }
  for (int worker : *workers) {
    auto host = worker_host(target, node, worker, user);
    if (!host) {
      std::cerr << "ssh: connect to host " << addresses[static_cast<std::size_t>(worker)]
                << " port 22: Connection refused\n";
      unreachable.push_back(worker);
      continue;
    }
    const pid_t pid = start_on_host(*host, user, command, workers->size() == 1);
    running.emplace_back(worker, pid);
    if (g_child_count < kMaxChildren) {
      g_children[static_cast<std::size_t>(g_child_count)] = pid;
      g_child_count = g_child_count + 1;
    }
  }
  int result = unreachable.empty() ? 0 : 255;
  for (const auto& [worker, pid] : running) {
    const auto status = util::wait_child(pid);
    int code = status.signaled ? 255 : status.code; // ssh reports a remote death by signal as 255.
    if (!worker_host(target, node, worker, user)) {
      // The host went away under the command: the connection was closed, whatever the command's last words.
      std::cerr << "Connection to " << addresses[static_cast<std::size_t>(worker)] << " closed by remote host.\n";
      code = 255;
    }
    if (code == 255) {
      result = 255;
    } else if (code != 0 && result == 0) {
      result = code;
    }
  }
  return result;
}

// One file or tree scp copies: where it is and where it goes, as this process reaches them (empty when the operand
// names nothing there), and the operands as given, for the messages.
struct CopyStep {
  std::filesystem::path from; // The source.
  std::filesystem::path to;   // The destination (a directory: the source goes into it).
  std::string source;         // The source operand.
  std::string destination;    // The destination operand.
  std::string refused = {};   // Why the copy may not be made, when it may not.
};

// Copies each step as scp does: into `to` when it is a directory, a directory only with `recurse`. Returns 0, or 1
// when one failed, each failure said on stderr.
int copy_steps(const std::vector<CopyStep>& steps, bool recurse) {
  const auto options =
      recurse ? std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing
              : std::filesystem::copy_options::overwrite_existing;
  int result = 0;
  for (const auto& step : steps) {
    std::error_code ec;
    auto to = step.to;
    if (!step.refused.empty()) {
      std::cerr << "scp: " << step.destination << ": " << step.refused << "\n";
      result = 1;
      continue;
    }
    if (step.from.empty() || to.empty()) {
      std::cerr << "scp: " << (step.from.empty() ? step.source : step.destination) << ": No such file or directory\n";
      result = 1;
      continue;
    }
    if (std::filesystem::is_directory(step.from, ec) && !recurse) {
      std::cerr << "scp: " << step.source << ": not a regular file\n";
      result = 1;
      continue;
    }
    if (std::filesystem::is_directory(to, ec)) {
      to /= step.from.filename();
    }
    std::filesystem::copy(step.from, to, options, ec);
    if (ec) {
      std::cerr << "scp: " << step.source << ": " << ec.message() << "\n";
      result = 1;
    }
  }
  return result;
}

// True when `path` is `dir` or lies under it, once symbolic links are resolved.
bool resolves_within(const std::filesystem::path& path, const std::filesystem::path& dir) {
  std::error_code ec;
  const auto rel =
      std::filesystem::weakly_canonical(path, ec).lexically_relative(std::filesystem::weakly_canonical(dir, ec));
  return !rel.empty() && *rel.begin() != "..";
}

// A path of this machine, reached through a descriptor of its directory opened now, so that it stays reachable from a
// host's filesystem entered later: "/proc/self/fd/N/NAME", or "/proc/self/fd/N" for a directory that exists and
// `whole_directory` (scp's destination). Empty when its directory cannot be opened.
std::filesystem::path held_local_path(const std::string& given, bool whole_directory) {
  auto path = std::filesystem::absolute(given.empty() ? "." : given).lexically_normal();
  if (path.filename().empty() && path.has_relative_path()) {
    path = path.parent_path();
  }
  std::error_code ec;
  const bool whole = path == path.root_path() || (whole_directory && std::filesystem::is_directory(path, ec));
  const int fd = ::open((whole ? path : path.parent_path()).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return {};
  }
  const std::filesystem::path held = "/proc/self/fd/" + std::to_string(fd);
  return whole ? held : held / path.filename();
}

// scp on a host with a filesystem of its own: a child holds this machine's side open, enters the host's filesystem
// (so every path there is the host's, as the host's own commands see it) and copies. Returns its status.
int copy_on_host(const json& host, const std::string& user, const std::vector<std::string>& sources,
                 const std::string& destination, bool upload, bool recurse) {
  std::cout.flush();
  const pid_t child = ::fork();
  if (child < 0) {
    throw GcloudError(std::string("cannot start a copy: ") + std::strerror(errno), 1);
  }
  if (child == 0) {
    int status = 255;
    try {
      std::vector<CopyStep> steps;
      for (const auto& source : sources) {
        CopyStep step{{}, {}, source, destination};
        if (upload) {
          step.from = held_local_path(source, false);
          const auto remote = parse_remote_path(destination)->path;
          step.to = remote.empty() ? "." : remote;
        } else {
          const auto remote = parse_remote_path(source)->path;
          step.from = remote.empty() ? "." : remote;
          step.to = held_local_path(destination, true);
        }
        steps.push_back(step);
      }
      enter_host_filesystem(host_filesystem(host, user));
      status = copy_steps(steps, recurse);
    } catch (const HostEntryError& e) {
      std::cerr << "scp: cannot reach the host's files: " << e.what() << "\n";
    } catch (const std::exception& e) {
      std::cerr << "scp: " << e.what() << "\n";
      status = 1;
    }
    std::cout.flush();
    ::_exit(status);
  }
  const auto status = util::wait_child(child);
  return status.signaled ? 255 : status.code;
}

int run_scp(const CommandLine& line) {
  if (line.words.size() < 2) {
    throw GcloudError("scp needs at least one source and a destination", 2);
  }
  std::vector<std::string> sources(line.words.begin(), line.words.end() - 1);
  const auto& destination = line.words.back();
  auto remote_destination = parse_remote_path(destination);
  std::optional<RemotePath> remote_source;
  for (const auto& source : sources) {
    auto remote = parse_remote_path(source);
    if (remote && remote_destination) {
      throw GcloudError("scp copies between this machine and a TPU, not between two TPUs", 1);
    }
    if (remote) {
      if (remote_source && remote_source->node != remote->node) {
        throw GcloudError("all remote sources must be on the same TPU", 1);
      }
      remote_source = remote;
    } else if (!remote_destination) {
      throw GcloudError("one side of scp must be remote ([USER@]TPU_NAME:PATH)", 1);
    }
  }
  const auto& remote = remote_destination ? *remote_destination : *remote_source;
  const std::string user = remote.user.empty() ? util::current_user() : remote.user;
  auto target = resolve_target(line);
  const auto addresses = node_endpoints(target, remote.node);
  std::string error;
  auto workers = parse_worker_selection(line.value("worker", "0"), static_cast<int>(addresses.size()), &error);
  if (!workers) {
    throw GcloudError(error, 1);
  }
  int result = 0;
  const auto fold = [&result](int status) {
    if (status == 255 || (status != 0 && result == 0)) {
      result = status;
    }
  };
  for (int worker : *workers) {
    auto host = worker_host(target, remote.node, worker, user);
    if (!host) {
      std::cerr << "ssh: connect to host " << addresses[static_cast<std::size_t>(worker)]
                << " port 22: Connection refused\nlost connection\n";
      result = 255;
      continue;
    }
    if (namespaced(*host)) {
      fold(copy_on_host(*host, user, sources, destination, remote_destination.has_value(), line.has("recurse")));
      continue;
    }
    // Sandbox mode: a host's path is this machine's, relative to the host's home. What scp writes there stays in the
    // host's sandbox (or the mock's buckets, where a mounted bucket leads): a host without a filesystem of its own
    // does not get to write this machine's.
    const std::filesystem::path home = host->at("home").get<std::string>();
    const std::filesystem::path sandbox = host->value("dir", home.string());
    const auto buckets = host->value("env", json::object()).value("MOCK_GCS_ROOT", std::string());
    const auto on_host = [&](const std::string& path) {
      const std::filesystem::path p = path.empty() ? "." : path;
      return p.is_absolute() ? p : home / p;
    };
    std::vector<CopyStep> steps;
    for (const auto& source : sources) {
      CopyStep step{{}, {}, source, destination};
      step.from = remote_destination ? std::filesystem::path(source) : on_host(parse_remote_path(source)->path);
      step.to = remote_destination ? on_host(remote_destination->path) : std::filesystem::path(destination);
      if (remote_destination && !resolves_within(step.to, sandbox) &&
          (buckets.empty() || !resolves_within(step.to, buckets))) {
        step.refused = "outside the worker host's sandbox " + sandbox.string() +
                       ": this mock gives hosts no filesystem of their own (no namespaces), so scp writes only there";
      }
      steps.push_back(step);
    }
    fold(copy_steps(steps, line.has("recurse")));
  }
  return result;
}

int run_config(const CommandLine& line) {
  Properties properties;
  const auto& words = line.words;
  if (words.size() == 4 && words[1] == "set") {
    properties.set(words[2], words[3]);
    if (!line.has("quiet")) {
      std::cerr << "Updated property [" << Properties::full_name(words[2]) << "].\n";
    }
    return 0;
  }
  if (words.size() == 3 && (words[1] == "get-value" || words[1] == "get")) {
    if (auto value = properties.get(words[2])) {
      std::cout << *value << "\n";
    } else {
      std::cerr << "(unset)\n";
    }
    return 0;
  }
  if (words.size() == 3 && words[1] == "unset") {
    properties.set(words[2], std::nullopt);
    std::cerr << "Unset property [" << Properties::full_name(words[2]) << "].\n";
    return 0;
  }
  if (words.size() == 2 && words[1] == "list") {
    std::string section;
    for (const auto& [key, value] : properties.all()) {
      const auto slash = key.find('/');
      if (key.substr(0, slash) != section) {
        section = key.substr(0, slash);
        std::cout << "[" << section << "]\n";
      }
      std::cout << key.substr(slash + 1) << " = " << value << "\n";
    }
    return 0;
  }
  throw GcloudError("config: expected set PROPERTY VALUE, get-value PROPERTY, unset PROPERTY or list", 2);
}

} // namespace

int run_gcloud(const std::vector<std::string>& args) {
  std::string command = "gcloud";
  try {
    auto line = parse_command_line(args);
    auto& words = line.words;
    if (line.has("version") || (!words.empty() && words[0] == "version")) {
      std::cout << "Google Cloud SDK 0.0.0 (jobman mock cloud stand-in)\n";
      return 0;
    }
    if (!words.empty() && (words[0] == "alpha" || words[0] == "beta")) {
      words.erase(words.begin());
    }
    if (words.size() >= 4 && words[0] == "compute" && words[1] == "tpus" && words[2] == "tpu-vm" &&
        (words[3] == "ssh" || words[3] == "scp")) {
      command = "gcloud.compute.tpus.tpu-vm." + words[3];
      const bool ssh = words[3] == "ssh";
      words.erase(words.begin(), words.begin() + 4);
      return ssh ? run_ssh(line) : run_scp(line);
    }
    if (words.size() == 2 && words[0] == "auth" && words[1] == "print-access-token") {
      command = "gcloud.auth.print-access-token";
      auto client = mock_client();
      std::cout << access_token(*client) << "\n";
      return 0;
    }
    if (!words.empty() && words[0] == "config") {
      command = "gcloud.config";
      return run_config(line);
    }
    throw GcloudError("Invalid choice: '" + util::join(words, " ") +
                          "'. This gcloud is jobman's mock cloud stand-in: it runs compute tpus tpu-vm ssh and scp, "
                          "auth print-access-token, and config set, get-value, unset and list.",
                      2);
  } catch (const GcloudError& e) {
    std::cerr << "ERROR: (" << command << ") " << e.what() << "\n";
    return e.code;
  } catch (const std::exception& e) {
    std::cerr << "ERROR: (" << command << ") " << e.what() << "\n";
    return 1;
  }
}

} // namespace jobman::mock
