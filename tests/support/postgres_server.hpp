// A private, throw-away PostgreSQL 15 server for the tests that need a real database server.
#pragma once

#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <vector>

namespace jobman::test {

// A cluster of its own in a fresh temporary directory, served on a free port of 127.0.0.1 only, where every
// connection needs a password (scram-sha-256). Its superuser is admin_user() with a random password. Durability is
// off (fsync, synchronous_commit, full_page_writes): the data is thrown away. The destructor stops the server and
// removes the directory. As root, initdb and the server run as the `postgres` system user (`nobody` when there is
// none), since PostgreSQL refuses to run as root.
class PostgresServer {
public:
  // Whether PostgreSQL 15 is installed; a test that needs it skips itself (GTEST_SKIP) when it is not.
  static bool available();
  // The bootstrap superuser's name.
  static const char* admin_user() { return "jobman_admin"; }

  // Creates the cluster and starts the server; throws std::runtime_error, with the end of the server log, when
  // either fails or the server does not accept connections within 60 s.
  PostgresServer();
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // The libpq URI of `database` as the superuser: postgresql://jobman_admin:PASSWORD@127.0.0.1:PORT/DATABASE.
  [[nodiscard]] std::string admin_url(const std::string& database = "postgres") const;
  // The TCP port the server listens on (on 127.0.0.1).
  [[nodiscard]] int port() const { return port_; }
  // The superuser's password (letters and digits only).
  [[nodiscard]] const std::string& admin_password() const { return password_; }
  // The server's log file (initdb's and pg_ctl's output too).
  [[nodiscard]] std::filesystem::path log_file() const { return dir_ / "server.log"; }

  // Runs `sql` (one or more statements) in `database` as the superuser; throws with the server's error message.
  void execute(const std::string& sql, const std::string& database = "postgres");
  // Creates an empty database of a new name (jobman_test_N) and returns the name.
  std::string create_database();
  // Creates a role that can log in with `password` (sent to the server only as a SCRAM verifier).
  void create_role(const std::string& name, const std::string& password);
  // Restarts the server (fast shutdown: sessions are ended, open transactions rolled back) on the same port and data
  // directory, and waits until it accepts connections again.
  void restart_fast();
  // Stops the server (fast shutdown); nothing when it is not running.
  void stop();
  // Starts the server stop() stopped, on the same port and data directory.
  void start_again();

private:
  // A program of the PostgreSQL installation, run as the server's user, with stdin from /dev/null and stdout and
  // stderr appended to the log; its exit status.
  int run_as_server_user(const std::vector<std::string>& argv) const;
  // Runs initdb with the superuser's password in a file that is removed afterwards.
  void create_cluster();
  // pg_ctl `action` (start or restart) with the server's options, then waits until it accepts connections.
  void start(const std::string& action);
  // Stops the server (at once, when a fast shutdown fails) and removes the directory; never throws.
  void shut_down() noexcept;
  // Throws unless the server accepts connections on 127.0.0.1:port_ before 60 s have passed.
  void await_connections() const;
  // `what` failed: a runtime_error whose message ends with the tail of the server log.
  [[nodiscard]] std::runtime_error failure(const std::string& what) const;

  std::filesystem::path dir_;
  std::string password_;
  int port_ = 0;
  bool running_ = false;
  bool as_other_user_ = false; // Running as root: the programs run as server_uid_/server_gid_.
  uid_t server_uid_ = 0;
  gid_t server_gid_ = 0;
  std::atomic<int> databases_{0};
};

// One server for the whole test process, started on first use and stopped when the process exits; each test takes
// its own database (create_database()).
PostgresServer& shared_postgres();

} // namespace jobman::test
