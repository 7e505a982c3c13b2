// jobman-test-postgres URL_FILE: starts a private PostgreSQL server for a whole test run, writes its superuser's URL
// to URL_FILE (mode 0600), and stops the server when told to (SIGTERM or SIGINT). ./scripts/test runs it around
// ctest, so that every test process shares one server instead of each starting its own.
#include "support/postgres_server.hpp"

#include <csignal>
#include <cstdio>
#include <exception>
#include <fcntl.h>
#include <string>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: jobman-test-postgres URL_FILE\n");
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  try {
    jobman::test::PostgresServer server;
    const std::string url = server.admin_url() + "\n";
    const std::string partial = std::string(argv[1]) + ".partial";
    const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::write(fd, url.data(), url.size()) != static_cast<ssize_t>(url.size()) || ::close(fd) != 0 ||
        std::rename(partial.c_str(), argv[1]) != 0) {
      std::perror(argv[1]);
      return 1;
    }
    int signal = 0;
    sigwait(&stop, &signal);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jobman-test-postgres: %s\n", e.what());
    return 1;
  }
  return 0;
}
