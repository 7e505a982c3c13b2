// The defences SECURITY.md promises, checked on real jobs driven by `jobman daemon` against a real mock cloud: no
// secret in any process's arguments, the store or the logs; everything under JOBMAN_HOME private to its owner under
// a loose umask; hostile job names and shell metacharacters harmless; worker output unable to drive the terminal.
#include "jobman/domain/job.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <pty.h>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <thread>
#include <unistd.h>

namespace jobman::test {
namespace security_test {

namespace fs = std::filesystem;
using domain::Phase;
using nlohmann::json;

constexpr std::chrono::seconds kPatience{120};

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Sets the process's umask for a scope; children inherit it.
class ScopedUmask {
public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

private:
  mode_t old_;
};

// What must never be seen: named pieces of secret text.
struct Secrets {
  std::mutex mutex;
  std::map<std::string, std::string> items; // Secret text -> what it is.

  void add(const std::string& text, const std::string& what) {
    const std::lock_guard lock(mutex);
    items.emplace(text, what);
  }
  // What of the secrets `haystack` contains.
  std::vector<std::string> found_in(std::string_view haystack) {
    const std::lock_guard lock(mutex);
    std::vector<std::string> found;
    for (const auto& [text, what] : items) {
      if (haystack.find(text) != std::string_view::npos) {
        found.push_back(what);
      }
    }
    return found;
  }
};

// The private key's material: its base64 body lines, each enough to identify it.
std::vector<std::string> private_key_lines(const fs::path& key_file) {
  const auto key = json::parse(read_bytes(key_file))["private_key"].get<std::string>();
  std::vector<std::string> lines;
  std::istringstream in(key);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() >= 40 && line.find("-----") == std::string::npos) {
      lines.push_back(line);
    }
  }
  return lines;
}

// Every process's command line (and, where this user may read it, its environment): what `ps` shows anyone.
struct ProcessScan {
  std::vector<std::string> leaks; // "pid N cmdline: what".
  int processes = 0;
  bool saw_ssh = false; // An ssh to a worker was running: the scan ran while the workers were reached.
};

ProcessScan scan_processes(Secrets& secrets) {
  ProcessScan scan;
  for (const auto& pid : process_ids()) {
    for (const char* part : {"cmdline", "environ"}) {
      const auto text = read_bytes(fs::path("/proc") / pid / part);
      if (std::string(part) == "cmdline" && !text.empty()) {
        ++scan.processes;
        scan.saw_ssh = scan.saw_ssh || (text.rfind(std::string("ssh\0", 4), 0) == 0 &&
                                        text.find("HostKeyAlias=tpu.") != std::string::npos);
      }
      for (const auto& what : secrets.found_in(text)) {
        scan.leaks.push_back("pid " + pid + " " + part + ": " + what + ": " + text.substr(0, 200));
      }
    }
  }
  return scan;
}

// Every regular file under `root` that holds a secret.
std::vector<std::string> scan_files(const fs::path& root, Secrets& secrets, int* files = nullptr) {
  std::vector<std::string> leaks;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); ++it) {
    if (!it->is_regular_file(ec)) {
      continue;
    }
    if (files != nullptr) {
      ++*files;
    }
    for (const auto& what : secrets.found_in(read_bytes(it->path()))) {
      leaks.push_back(it->path().string() + ": " + what);
    }
  }
  return leaks;
}

// Entries under `root` (and root itself) that its group or others may read, write or enter.
std::vector<std::string> open_to_others(const fs::path& root) {
  std::vector<std::string> open;
  const auto check = [&open](const fs::path& path) {
    struct stat info {};
    if (::lstat(path.c_str(), &info) == 0 && !S_ISLNK(info.st_mode) && (info.st_mode & 077) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
      open.push_back(path.string() + " " + mode);
    }
  };
  check(root);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); ++it) {
    check(it->path());
  }
  return open;
}

// What a program wrote to a pseudo-terminal, with output post-processing off (so '\n' is not turned into "\r\n").
std::string run_on_pty(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  termios settings{};
  ::cfmakeraw(&settings);
  winsize size{};
  size.ws_row = 40;
  size.ws_col = 120;
  std::string out;
  int master = -1;
  int terminal = -1;
  if (::openpty(&master, &terminal, nullptr, &settings, &size) != 0) {
    return out;
  }
  ::fcntl(master, F_SETFD, FD_CLOEXEC);
  ::fcntl(terminal, F_SETFD, FD_CLOEXEC);
  std::vector<std::string> argv = {jobman_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  // As forkpty does: a session of its own, with the terminal as its controlling terminal and standard streams.
  const auto child = child_process(argv, env)
                         .group(util::ProcessGroup::new_session)
                         .controlling_terminal()
                         .input(util::Stream::descriptor(terminal))
                         .output(util::Stream::descriptor(terminal))
                         .error(util::Stream::descriptor(terminal))
                         .spawn();
  ::close(terminal);
  char buffer[4096];
  while (true) {
    const auto n = ::read(master, buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break; // EIO once the child has closed the terminal.
    }
  }
  ::close(master);
  util::wait_exit(child.pid);
  return out;
}

// A jobman home driven by a daemon on a mock cloud of its own.
class SecurityTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_GT(mock->port(), 0) << mock->first_line();
    client = std::make_unique<httplib::Client>("127.0.0.1", mock->port());
    env = mock_home_environment(*mock, home, dir / "config");
    env["NO_COLOR"] = "1";
  }

  void TearDown() override {
    daemons.clear();
    kill_processes_of(home);
  }

  // Authenticates as Google's client does, with the service-account key the mock wrote (a JWT exchanged at its
  // token endpoint), and reaches the workers with ssh and a key of jobman's own (HOME has no gcloud key).
  void use_service_account_key() {
    const auto url = "http://127.0.0.1:" + std::to_string(mock->port());
    env["JOBMAN_CLOUD"] = "google";
    env["JOBMAN_PROJECT"] = "jobman-mock";
    env["JOBMAN_API_ENDPOINT"] = url + "/v2/";
    env["GOOGLE_APPLICATION_CREDENTIALS"] = (dir / "key.json").string();
    env["JOBMAN_ACCESS_TOKEN"] = "";
    env["GCE_METADATA_HOST"] = "";
    env["HOME"] = (dir / "user-home").string();
  }

  RunResult jm(const std::vector<std::string>& args) { return run_jobman(args, RunOptions{env, "", ""}); }

  void start_daemon() {
    daemons.push_back(std::make_unique<LineReadingProcess>(
        std::vector<std::string>{jobman_binary(), "daemon", "--tick", "50ms", "--lease-ttl", "2s"}, env,
        dir / ("daemon-" + std::to_string(daemons.size()) + ".log")));
  }

  // A job on a v4-8 slice named `name` (YAML text, quoted as needed) running `command` (a literal block).
  std::string config(const std::string& name, const std::string& command) {
    static int counter = 0;
    const std::string text = "job:\n  name: " + name +
                             "\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                             "  pricing: spot\ncommand:\n  cmd: |\n    " +
                             command + "\n  workers: all\n";
    return dir.write("job-" + std::to_string(++counter) + ".yaml", text).string();
  }

  std::int64_t create(const std::string& config_path) {
    const auto r = jm({"create", config_path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? std::stoll(r.out) : 0;
  }

  store::JobStore& db() {
    if (!store) {
      store.emplace(store::JobStore::open(home / "jobman.db"));
    }
    return *store;
  }

  fs::path worker_log(std::int64_t id, int attempt = 1, int worker = 0) {
    char name[16];
    std::snprintf(name, sizeof name, "%06lld", static_cast<long long>(id));
    return home / "jobs" / name / ("attempt-" + std::to_string(attempt)) /
           ("worker-" + std::to_string(worker) + ".log");
  }

  bool await_log(std::int64_t id, const std::string& text) {
    return eventually([&] { return read_bytes(worker_log(id)).find(text) != std::string::npos; }, kPatience);
  }

  void wait_for_success(std::int64_t id) {
    const auto waited = jm({"wait", std::to_string(id), "--timeout", "120"});
    EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err;
    EXPECT_EQ(db().jobs().get(id).phase, Phase::succeeded) << db().jobs().get(id).phase_reason;
  }

  // The access tokens the mock has issued so far (to jobman, anyone).
  std::vector<std::string> issued_tokens() {
    const auto answer = http_call(*client, "GET", "/mock/v1/tokens", nullptr, mock->admin_headers());
    return answer.status == 200 ? answer.body["issued"].get<std::vector<std::string>>() : std::vector<std::string>{};
  }

  TempDir dir;
  fs::path home = dir / "home";
  std::unique_ptr<MockCloudProcess> mock = [this] {
    const auto world = dir.write("world.yaml", test_world(2, "  us-central2-b:\n    v4:\n      spot: {chips: 64}\n"));
    return std::make_unique<MockCloudProcess>(
        std::vector<std::string>{"--port", "0", "--time-scale", "1000", "--config", world.string(), "--state-dir",
                                 (dir / "state").string(), "--write-service-account-key", (dir / "key.json").string(),
                                 "--visible-to-hosts", dir.path().string()}); // The workloads wait on dir/gate.
  }();
  std::unique_ptr<httplib::Client> client;
  std::map<std::string, std::string> env;
  std::vector<std::unique_ptr<LineReadingProcess>> daemons;
  std::optional<store::JobStore> store;
};

TEST_F(SecurityTest, NoSecretReachesACommandLineTheStoreOrTheLogsAndEverythingIsPrivateUnderUmask002) {
  const ScopedUmask loose(002);
  use_service_account_key();
  Secrets secrets;
  const auto key_lines = private_key_lines(dir / "key.json");
  ASSERT_GE(key_lines.size(), 10U);
  for (const auto& line : key_lines) {
    secrets.add(line, "a line of the service account's private key");
  }
  secrets.add(mock->admin_token(), "the mock's admin token");

  // A positive control: a process with a made-up secret in its arguments, which the scan must report.
  const std::string control = "control-" + mock->admin_token().substr(0, 16);
  secrets.add(control, "the positive control");
  // It waits in the shell's own `read` on a pipe (no child to outlive it) and holds none of the test's output.
  auto control_process = util::ProcessBuilder({"sh", "-c", "read x", control})
                             .program("/bin/sh")
                             .input(util::Stream::pipe())
                             .output(util::Stream::null())
                             .error(util::Stream::null())
                             .spawn();
  const pid_t control_pid = control_process.pid;
  ASSERT_GT(control_pid, 0);

  start_daemon();
  const auto gate = dir / "gate";
  const std::string command =
      "echo started; while [ ! -e '" + gate.string() + "' ]; do sleep 0.02; done; echo finished";
  const auto first = create(config("secret-a", command));
  const auto second = create(config("secret-b", command));

  // Scan every process while the jobs are set up and run, learning each token as the mock issues it.
  std::atomic<bool> stop{false};
  std::vector<std::string> leaks;
  std::set<std::string> tokens;
  int rounds = 0;
  int rounds_with_ssh = 0;
  int processes = 0;
  std::thread scanner([&] {
    while (!stop) {
      for (const auto& token : issued_tokens()) {
        if (tokens.insert(token).second) {
          secrets.add(token, "an access token the mock issued");
        }
      }
      auto scan = scan_processes(secrets);
      leaks.insert(leaks.end(), scan.leaks.begin(), scan.leaks.end());
      processes = std::max(processes, scan.processes);
      rounds_with_ssh += scan.saw_ssh ? 1 : 0;
      ++rounds;
    }
  });
  EXPECT_TRUE(await_log(first, "started"));
  EXPECT_TRUE(await_log(second, "started"));
  EXPECT_TRUE(eventually([&] { return rounds_with_ssh >= 20; }, kPatience)) << rounds_with_ssh;
  std::ofstream(gate.string()).put('\n');
  wait_for_success(first);
  wait_for_success(second);
  stop = true;
  scanner.join();
  util::close_fd(control_process.in_fd);
  ::kill(control_pid, SIGKILL);
  util::wait_exit(control_pid);
  const auto controls = std::count_if(leaks.begin(), leaks.end(), [](const std::string& leak) {
    return leak.find("the positive control") != std::string::npos;
  });
  EXPECT_GE(controls, rounds - 1) << "the scan missed a secret in a command line";
  std::erase_if(leaks, [](const std::string& leak) { return leak.find("the positive control") != std::string::npos; });

  std::cerr << "scanned " << rounds << " times (" << rounds_with_ssh << " during ssh sessions), up to " << processes
            << " processes, " << tokens.size() << " issued tokens\n";
  EXPECT_GE(rounds_with_ssh, 20) << "the scan did not overlap the workers' ssh sessions";
  EXPECT_GT(processes, 5);
  ASSERT_FALSE(tokens.empty()) << "the mock issued no token: jobman did not authenticate through it";
  EXPECT_TRUE(leaks.empty()) << leaks.size() << " leaks in process arguments or environments, the first: "
                             << (leaks.empty() ? "" : leaks.front());

  // The store (with its WAL), every log and job directory (the slice's known hosts too), the daemon's output.
  ASSERT_TRUE(fs::exists(home / "jobman.db"));
  int files = 0;
  for (const auto& root : {home}) {
    const auto found = scan_files(root, secrets, &files);
    EXPECT_TRUE(found.empty()) << found.front();
  }
  for (const auto& daemon_log : {dir / "daemon-0.log"}) {
    EXPECT_TRUE(secrets.found_in(read_bytes(daemon_log)).empty()) << daemon_log;
  }
  EXPECT_GE(files, 5);
  std::cerr << "scanned " << files << " files\n";
  EXPECT_NE(read_bytes(worker_log(first)).find("finished"), std::string::npos);

  // Made under umask 002, still readable by their owner only.
  const auto open = open_to_others(home);
  EXPECT_TRUE(open.empty()) << open.size() << " entries open to others, e.g. " << open.front();
}

TEST_F(SecurityTest, ASecretTheConfigReadsFromTheEnvironmentStaysOutOfTheStoreAndReachesTheWorkers) {
  const ScopedUmask loose(002);
  const std::string secret = "wandb-" + mock->admin_token().substr(0, 24);
  const std::string reversed(secret.rbegin(), secret.rend());
  Secrets secrets;
  secrets.add(secret, "the key the config reads with ${oc.env:...}");
  env["JOBMAN_TEST_WANDB_KEY"] = secret;
  const auto id = create(config("env-secret", "export WANDB_API_KEY=${oc.env:JOBMAN_TEST_WANDB_KEY}; "
                                              "echo \"key: $(printf '%s' \"$WANDB_API_KEY\" | rev)\""));
  // The supervisor does not have the variable: the value comes from what `create` kept beside the job.
  env.erase("JOBMAN_TEST_WANDB_KEY");
  start_daemon();
  wait_for_success(id);
  EXPECT_NE(read_bytes(worker_log(id)).find("key: " + reversed), std::string::npos) << read_bytes(worker_log(id));

  // The snapshot keeps the call, and the value is in one file under JOBMAN_HOME, readable by its owner only.
  const auto shown = jm({"show", std::to_string(id), "--config"});
  EXPECT_NE(shown.out.find("export WANDB_API_KEY=${oc.env:JOBMAN_TEST_WANDB_KEY}"), std::string::npos) << shown.out;
  const auto kept = home / "jobs" / domain::format_job_id(id) / "environment";
  const auto found = scan_files(home, secrets);
  ASSERT_EQ(found.size(), 1U) << (found.empty() ? "" : found.front());
  EXPECT_EQ(found.front().substr(0, kept.string().size()), kept.string()) << found.front();
  EXPECT_EQ(fs::status(kept).permissions() & (fs::perms::group_all | fs::perms::others_all), fs::perms::none);
  EXPECT_TRUE(secrets.found_in(read_bytes(dir / "daemon-0.log")).empty());

  // Cleaning the job away removes the value with it.
  const auto cleaned = jm({"clean", std::to_string(id)});
  EXPECT_EQ(cleaned.exit_code, 0) << cleaned.out << cleaned.err;
  EXPECT_FALSE(fs::exists(kept));
  EXPECT_TRUE(scan_files(home, secrets).empty());
}

TEST_F(SecurityTest, HostileJobNamesAndShellMetacharactersAreHarmlessAndTheCommandRunsAsWritten) {
  const ScopedUmask usual(022);
  const auto marker = dir / "pwned";
  const auto m = marker.string();
  // A name that would run `touch` if it ever reached a shell unquoted, in every quoting context.
  const std::string name = "'x''; touch " + m + "; $(touch " + m + ") `touch " + m + "` \" && touch " + m + " #'";
  // The command is the user's shell text: it runs as written, and its quotes are its own.
  const std::string command = R"(printf '[%s]' "it's" 'a  b' '$(touch )" + m + R"()' '`touch )" + m +
                              R"(`' '*' '-n' "\$HOME"; echo; echo 'x;y|z&w' "$JOBMAN_TPU_NAME")";
  start_daemon();
  const auto id = create(config(name, command));
  wait_for_success(id);
  const auto job = db().jobs().get(id);
  EXPECT_EQ(job.name, "x'; touch " + m + "; $(touch " + m + ") `touch " + m + "` \" && touch " + m + " #");
  const auto output = read_bytes(worker_log(id));
  EXPECT_EQ(output, "[it's][a  b][$(touch " + m + ")][`touch " + m + "`][*][-n][$HOME]\nx;y|z&w " +
                        db().attempts().of(id).back().node + "\n");
  EXPECT_FALSE(fs::exists(marker)) << "a job name or command was evaluated by a shell";
  const auto open = open_to_others(home);
  EXPECT_TRUE(open.empty()) << open.size() << " entries open to others, e.g. " << open.front();
}

TEST_F(SecurityTest, WorkerOutputCannotDriveTheTerminal) {
  start_daemon();
  // A window title (OSC), clear screen, colour, a carriage-return overwrite, C1 CSI as UTF-8 and as a raw byte.
  const auto id = create(config(
      "tty", R"(printf 'title \033]0;pwned\007 end\nclear \033[2J end\n\033[31mred\033[0m\nsecret\roverwritten\n)"
             R"(\302\233c1 \2336n raw\nünïcødé ✓\ttab\n')"));
  wait_for_success(id);
  const std::string expected = "title \\x1b]0;pwned\\x07 end\nclear \\x1b[2J end\n\\x1b[31mred\\x1b[0m\n"
                               "secret\\x0doverwritten\n\\u009bc1 \\x9b6n raw\nünïcødé ✓\ttab\n";
  const auto on_terminal = run_on_pty({"logs", std::to_string(id)}, env);
  EXPECT_EQ(on_terminal, expected);
  for (const char c : {'\x1b', '\x07', '\r', '\x9b'}) {
    EXPECT_EQ(on_terminal.find(c), std::string::npos) << static_cast<int>(c);
  }

  // Into a pipe or a file, and with --raw on a terminal, the bytes are those the worker wrote.
  const std::string raw = "title \x1b]0;pwned\x07 end\nclear \x1b[2J end\n\x1b[31mred\x1b[0m\nsecret\roverwritten\n"
                          "\xc2\x9b"
                          "c1 \x9b"
                          "6n raw\nünïcødé ✓\ttab\n";
  EXPECT_EQ(jm({"logs", std::to_string(id)}).out, raw);
  EXPECT_EQ(run_on_pty({"logs", std::to_string(id), "--raw"}, env), raw);

  // Text from the API and events (here a hostile node address and a reason written into the store) is escaped by
  // list and show too.
  const std::string hostile = "10.0.0.1\x1b]0;pwned\x07\x1b[2J\r\xc2\x9b";
  domain::PhaseChange change;
  change.to = Phase::failed;
  change.reason = "worker said " + hostile;
  change.host0_ip = hostile;
  ASSERT_TRUE(db().jobs().transition(id, Phase::succeeded, change));
  db().events().append(id, "note", "output: " + hostile);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"list"}, {"show", std::to_string(id)}, {"show", std::to_string(id), "--events"}}) {
    const auto shown = run_on_pty(args, env);
    EXPECT_NE(shown.find("10.0.0.1\\x1b]0;pwned\\x07\\x1b[2J\\x0d\\u009b"), std::string::npos) << args.back() << shown;
    for (const char c : {'\x1b', '\x07', '\r'}) {
      EXPECT_EQ(shown.find(c), std::string::npos) << args.back() << ": " << static_cast<int>(c) << "\n" << shown;
    }
    EXPECT_EQ(shown.find("\xc2\x9b"), std::string::npos) << args.back();
  }
}

TEST(SecurityErrors, ErrorMessagesShowControlCharactersInsteadOfObeyingThem) {
  const TempDir dir;
  RunOptions options;
  options.env = {{"JOBMAN_HOME", (dir / "home").string()}, {"XDG_CONFIG_HOME", (dir / "config").string()}};
  // The argument comes back in the message; so would a config's text or the API's.
  const auto shown = run_jobman({"show", "42\x1b]0;pwned\x07\x1b[2J\r"}, options);
  EXPECT_EQ(shown.exit_code, 2);
  EXPECT_NE(shown.err.find("42\\x1b]0;pwned\\x07\\x1b[2J\\x0d"), std::string::npos) << shown.err;
  EXPECT_EQ(shown.err.find('\x1b'), std::string::npos) << shown.err;
  // A warning quotes the config: tpu.flags jobman cannot apply. It is logged (spdlog) with its controls escaped.
  const auto config = dir.write("flags.yaml", "job:\n  name: w\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                                              "  flags: [\"--odd\\e]0;pwned\\a\\e[2J\\rX\\nY\"]\n"
                                              "command:\n  cmd: 'true'\n");
  const auto validated = run_jobman({"validate", config.string()}, options);
  EXPECT_EQ(validated.exit_code, 0) << validated.err;
  EXPECT_NE(validated.err.find("--odd\\x1b]0;pwned\\x07\\x1b[2J\\x0dX\\x0aY"), std::string::npos) << validated.err;
  EXPECT_EQ(validated.err.find('\x1b'), std::string::npos) << validated.err;
  const auto cancelled = run_jobman({"cancel", "7\x1b[2J"}, options);
  EXPECT_NE(cancelled.exit_code, 0);
  EXPECT_EQ(cancelled.err.find('\x1b'), std::string::npos) << cancelled.err;
}

} // namespace security_test
} // namespace jobman::test
