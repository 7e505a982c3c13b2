#include "support/postgres_server.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <grp.h>
#include <iterator>
#include <libpq-fe.h>
#include <memory>
#include <netinet/in.h>
#include <pwd.h>
#include <random>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <tuple>
#include <unistd.h>

extern char** environ;

namespace jobman::test {

namespace {

// Where Debian's postgresql-15 installs its programs.
std::filesystem::path program(const char* name) {
  return std::filesystem::path("/usr/lib/postgresql/15/bin") / name;
}

// How long the server may take to start, restart or stop.
constexpr int patience_seconds = 60;

// A password of letters and digits only, so that it needs no escaping in a URI or a conninfo string.
std::string random_password() {
  static constexpr char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device random;
  std::uniform_int_distribution<std::size_t> pick(0, sizeof letters - 2);
  std::string password(32, ' ');
  for (auto& c : password) {
    c = letters[pick(random)];
  }
  return password;
}

// A TCP port of 127.0.0.1 that nothing listens on right now: the kernel's choice for port 0.
int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    throw std::runtime_error(std::string("cannot open a socket: ") + std::strerror(errno));
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  const bool found = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const int error = errno;
  ::close(fd);
  if (!found) {
    throw std::runtime_error(std::string("cannot find a free port on 127.0.0.1: ") + std::strerror(error));
  }
  return ntohs(address.sin_port);
}

// A new directory jobman-postgres-XXXXXX under $TMPDIR (or /tmp), open to its owner only.
std::filesystem::path make_temp_dir() {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::filesystem::path parent = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  std::string pattern = (parent / "jobman-postgres-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create a directory like " + pattern + ": " + std::strerror(errno));
  }
  return pattern;
}

// The unprivileged account the cluster belongs to when this process runs as root (PostgreSQL refuses to run as
// root): postgres, or nobody when there is no such user.
std::pair<uid_t, gid_t> server_account() {
  for (const char* name : {"postgres", "nobody"}) {
    if (const passwd* entry = ::getpwnam(name)) {
      return {entry->pw_uid, entry->pw_gid};
    }
  }
  throw std::runtime_error("running as root, and there is neither a postgres nor a nobody user to run PostgreSQL as");
}

// Makes `path` belong to the server's account.
void give_to(const std::filesystem::path& path, std::pair<uid_t, gid_t> account) {
  if (::chown(path.c_str(), account.first, account.second) != 0) {
    throw std::runtime_error("cannot chown " + path.string() + ": " + std::strerror(errno));
  }
}

// Creates (empty) or replaces `path`, open to its owner only, with `content`.
void write_private_file(const std::filesystem::path& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw std::runtime_error("cannot create " + path.string() + ": " + std::strerror(errno));
  }
  const bool written = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  ::close(fd);
  if (!written) {
    throw std::runtime_error("cannot write " + path.string());
  }
}

// `text` in single quotes for /bin/sh, which pg_ctl hands the server's options to.
std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) {
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return quoted + "'";
}

// The whole text of a file; "" when it cannot be read.
std::string text_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The last `count` lines of `text`.
std::string last_lines(const std::string& text, int count) {
  std::size_t start = text.size();
  for (int seen = 0; start > 0 && seen <= count;) {
    if (text[--start] == '\n') {
      ++seen;
    }
  }
  return text.substr(start == 0 ? 0 : start + 1);
}

// This process's environment without the PG* variables (PGDATA, PGPORT, PGOPTIONS, ...), which would steer the
// PostgreSQL programs.
std::vector<std::string> server_environment() {
  std::vector<std::string> variables;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, "PG", 2) != 0) {
      variables.emplace_back(*entry);
    }
  }
  return variables;
}

// Pointers to the strings, ending with a null pointer, as execve wants them.
std::vector<char*> c_array(const std::vector<std::string>& strings) {
  std::vector<char*> array;
  array.reserve(strings.size() + 1);
  for (const auto& s : strings) {
    array.push_back(const_cast<char*>(s.c_str()));
  }
  array.push_back(nullptr);
  return array;
}

// Writes `message` to stderr and exits: the end of a child that could not become its program.
[[noreturn]] void child_fails(const std::string& message, int status) {
  const ssize_t ignored = ::write(STDERR_FILENO, message.data(), message.size());
  (void)ignored;
  ::_exit(status);
}

// Waits for a child; its exit status, or 128 + the signal that killed it.
int wait_exit_status(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A libpq connection, closed at the end of its scope.
using Connection = std::unique_ptr<PGconn, decltype(&PQfinish)>;

// A connection to `database` on 127.0.0.1:`port` as the superuser; throws with libpq's message.
Connection connect_as_admin(int port, const std::string& password, const std::string& database) {
  const std::string port_text = std::to_string(port);
  const char* const keywords[] = {"host",    "port",       "user", "password", "dbname", "connect_timeout",
                                  "sslmode", "gssencmode", nullptr};
  const char* const values[] = {"127.0.0.1",      port_text.c_str(), PostgresServer::admin_user(),
                                password.c_str(), database.c_str(),  "10",
                                "disable",        "disable",         nullptr};
  Connection connection(PQconnectdbParams(keywords, values, 0), &PQfinish);
  if (connection == nullptr || PQstatus(connection.get()) != CONNECTION_OK) {
    const std::string message = connection == nullptr ? "out of memory" : PQerrorMessage(connection.get());
    throw std::runtime_error("cannot connect to database " + database + " on 127.0.0.1:" + port_text + " as " +
                             PostgresServer::admin_user() + ": " + message);
  }
  return connection;
}

// Runs `sql` on `connection`; throws with the server's message.
void run_sql(PGconn* connection, const std::string& sql) {
  std::unique_ptr<PGresult, decltype(&PQclear)> result(PQexec(connection, sql.c_str()), &PQclear);
  const auto status = PQresultStatus(result.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    throw std::runtime_error("PostgreSQL failed to run \"" + sql + "\": " + PQerrorMessage(connection));
  }
}

} // namespace

bool PostgresServer::available() {
  return ::access(program("initdb").c_str(), X_OK) == 0;
}

PostgresServer::PostgresServer() : dir_(make_temp_dir()), password_(random_password()) {
  try {
    const std::filesystem::path sockets = dir_ / "socket";
    std::filesystem::create_directory(sockets);
    // Created here so that it belongs to the server's account, which opens it for appending.
    write_private_file(log_file(), "");
    if (::geteuid() == 0) {
      const auto account = server_account();
      std::tie(server_uid_, server_gid_) = account;
      as_other_user_ = true;
      for (const auto& path : {dir_, sockets, log_file()}) {
        give_to(path, account);
      }
    }
    create_cluster();
    // The port is free when chosen but may be taken before the server binds it: then another one.
    for (int attempt = 1;; ++attempt) {
      const auto log_size = text_of(log_file()).size();
      port_ = free_loopback_port();
      try {
        start("start");
        break;
      } catch (const std::runtime_error&) {
        if (attempt == 3 || text_of(log_file()).find("Address already in use", log_size) == std::string::npos) {
          throw;
        }
      }
    }
  } catch (...) {
    shut_down();
    throw;
  }
}

PostgresServer::~PostgresServer() {
  shut_down();
}

void PostgresServer::shut_down() noexcept {
  try {
    stop();
  } catch (const std::exception&) {
    // A server that did not stop in time must not outlive its data directory.
    try {
      run_as_server_user({program("pg_ctl").string(), "stop", "-D", (dir_ / "data").string(), "-m", "immediate", "-w",
                          "-t", std::to_string(patience_seconds)});
    } catch (const std::exception&) {
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string PostgresServer::admin_url(const std::string& database) const {
  return std::string("postgresql://") + admin_user() + ":" + password_ + "@127.0.0.1:" + std::to_string(port_) + "/" +
         database;
}

void PostgresServer::execute(const std::string& sql, const std::string& database) {
  const auto connection = connect_as_admin(port_, password_, database);
  run_sql(connection.get(), sql);
}

std::string PostgresServer::create_database() {
  std::string name = "jobman_test_" + std::to_string(++databases_);
  execute("CREATE DATABASE " + name);
  return name;
}

void PostgresServer::create_role(const std::string& name, const std::string& password) {
  const auto connection = connect_as_admin(port_, password_, "postgres");
  PGconn* conn = connection.get();
  const auto release = [](char* text) { PQfreemem(text); };
  // The server gets only the SCRAM verifier, so the password is in no statement it could log.
  std::unique_ptr<char, decltype(release)> verifier(
      PQencryptPasswordConn(conn, password.c_str(), name.c_str(), "scram-sha-256"), release);
  if (verifier == nullptr) {
    throw std::runtime_error("cannot encrypt the password of role " + name + ": " + PQerrorMessage(conn));
  }
  std::unique_ptr<char, decltype(release)> role(PQescapeIdentifier(conn, name.c_str(), name.size()), release);
  std::unique_ptr<char, decltype(release)> secret(PQescapeLiteral(conn, verifier.get(), std::strlen(verifier.get())),
                                                  release);
  if (role == nullptr || secret == nullptr) {
    throw std::runtime_error("cannot quote role " + name + ": " + PQerrorMessage(conn));
  }
  run_sql(conn, std::string("CREATE ROLE ") + role.get() + " LOGIN PASSWORD " + secret.get());
}

void PostgresServer::restart_fast() {
  start("restart");
}

void PostgresServer::start_again() {
  start("start");
}

void PostgresServer::stop() {
  if (!running_) {
    return;
  }
  const int status = run_as_server_user({program("pg_ctl").string(), "stop", "-D", (dir_ / "data").string(), "-m",
                                         "fast", "-w", "-t", std::to_string(patience_seconds)});
  if (status != 0) {
    throw failure("pg_ctl stop exited with status " + std::to_string(status));
  }
  running_ = false;
}

int PostgresServer::run_as_server_user(const std::vector<std::string>& argv) const {
  // Everything the child needs is made before fork: after it, a child of a multi-threaded process may only make
  // async-signal-safe calls (another thread may have held malloc's lock at the fork).
  const auto args = c_array(argv);
  const auto environment = server_environment();
  const auto env = c_array(environment);
  const std::string log = log_file().string();
  const std::string dir = dir_.string();
  const std::string cannot_switch = "cannot switch to the server's user to run " + argv.front() + "\n";
  const bool switch_user = as_other_user_;
  const std::string cannot_enter =
      "cannot enter " + dir + (switch_user ? " as the server's user (is $TMPDIR open to it?)\n" : "\n");
  const std::string cannot_run = "cannot run " + argv.front() + "\n";
  const uid_t uid = server_uid_;
  const gid_t gid = server_gid_;
  const long max_fd = std::clamp(::sysconf(_SC_OPEN_MAX), 256L, 65536L);
  sigset_t no_signals;
  sigemptyset(&no_signals);

  const pid_t pid = ::fork();
  if (pid < 0) {
    throw std::runtime_error(std::string("cannot fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Not the test's stdin; stdout and stderr to the log (opened before the switch, which then cannot fail unseen).
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(log.c_str(), O_WRONLY | O_APPEND);
    if (in < 0 || out < 0 || ::dup2(in, STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0 ||
        ::dup2(out, STDERR_FILENO) < 0) {
      ::_exit(126);
    }
    if (switch_user && (::setgroups(1, &gid) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) {
      child_fails(cannot_switch, 126);
    }
    // A working directory the server's user can enter, and none of the test's descriptors or blocked signals.
    if (::chdir(dir.c_str()) != 0) {
      child_fails(cannot_enter, 126);
    }
    if (::close_range(3, ~0U, 0) != 0) {
      for (int fd = 3; fd < max_fd; ++fd) {
        ::close(fd);
      }
    }
    ::sigprocmask(SIG_SETMASK, &no_signals, nullptr);
    ::execve(args.front(), args.data(), env.data());
    child_fails(cannot_run, 127);
  }
  return wait_exit_status(pid);
}

void PostgresServer::create_cluster() {
  // initdb reads the superuser's password from a file, so that it is in no process's arguments.
  const auto password_file = dir_ / "pwfile";
  write_private_file(password_file, password_ + "\n");
  if (as_other_user_) {
    give_to(password_file, {server_uid_, server_gid_});
  }
  const int status = run_as_server_user({program("initdb").string(), "-D", (dir_ / "data").string(), "-U", admin_user(),
                                         "--pwfile=" + password_file.string(), "--auth=scram-sha-256",
                                         "--encoding=UTF8", "--no-locale", "--no-sync", "--no-instructions"});
  std::error_code ignored;
  std::filesystem::remove(password_file, ignored);
  if (status != 0) {
    throw failure("initdb exited with status " + std::to_string(status));
  }
}

void PostgresServer::start(const std::string& action) {
  const std::string options = "-p " + std::to_string(port_) + " -c listen_addresses=127.0.0.1 -k " +
                              shell_quoted((dir_ / "socket").string()) +
                              " -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300";
  std::vector<std::string> argv = {program("pg_ctl").string(),
                                   action,
                                   "-D",
                                   (dir_ / "data").string(),
                                   "-l",
                                   log_file().string(),
                                   "-o",
                                   options,
                                   "-w",
                                   "-t",
                                   std::to_string(patience_seconds)};
  if (action == "restart") {
    argv.insert(argv.end(), {"-m", "fast"});
  }
  running_ = true; // Even a failed start may leave a server behind for stop() to end.
  const int status = run_as_server_user(argv);
  if (status != 0) {
    throw failure("pg_ctl " + action + " exited with status " + std::to_string(status));
  }
  await_connections();
}

void PostgresServer::await_connections() const {
  const std::string conninfo = "host=127.0.0.1 port=" + std::to_string(port_) +
                               " dbname=postgres user=" + admin_user() +
                               " connect_timeout=2 sslmode=disable gssencmode=disable";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(patience_seconds);
  while (true) {
    const auto answer = PQping(conninfo.c_str());
    if (answer == PQPING_OK) {
      return;
    }
    if (answer == PQPING_NO_ATTEMPT || std::chrono::steady_clock::now() > deadline) {
      throw failure("the server does not accept connections on 127.0.0.1:" + std::to_string(port_));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::runtime_error PostgresServer::failure(const std::string& what) const {
  return std::runtime_error("PostgreSQL test server in " + dir_.string() + ": " + what + "; the end of its log:\n" +
                            last_lines(text_of(log_file()), 30));
}

PostgresServer& shared_postgres() {
  // Stopped by the static destructor when the process exits.
  static PostgresServer server;
  return server;
}

} // namespace jobman::test
