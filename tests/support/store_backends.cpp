#include "support/store_backends.hpp"

#include "support/postgres_server.hpp"

#include <cstdlib>
#include <libpq-fe.h>
#include <stdexcept>
#include <unistd.h>

namespace jobman::test {
void run_sql(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  PGresult* result = PQexec(conn, sql.c_str());
  const auto status = PQresultStatus(result);
  const std::string message = PQerrorMessage(conn);
  PQclear(result);
  PQfinish(conn);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    throw std::runtime_error("cannot run \"" + sql + "\" on the test server: " + message);
  }
}

bool postgres_testable() {
  const char* url = std::getenv("JOBMAN_TEST_POSTGRES_URL");
  return (url != nullptr && *url != '\0') || PostgresServer::available();
}

std::string fresh_postgres_url() {
  if (const char* url = std::getenv("JOBMAN_TEST_POSTGRES_URL"); url != nullptr && *url != '\0') {
    // A schema of its own in the run's server: names unique across the test processes sharing it.
    static int made = 0;
    const std::string name = "jobman_t" + std::to_string(::getpid()) + "_" + std::to_string(++made);
    run_sql(url, "CREATE SCHEMA " + name);
    const std::string server(url);
    return server + (server.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + name;
  }
  auto& server = shared_postgres();
  return server.admin_url(server.create_database());
}

void StoreBackendTest::SetUp() {
  if (GetParam() == StoreBackend::postgres && !postgres_testable()) {
    GTEST_SKIP() << "PostgreSQL 15 is not installed (Debian package postgresql), and JOBMAN_TEST_POSTGRES_URL is unset";
  }
}

store::JobStore StoreBackendTest::open_store() {
  if (GetParam() == StoreBackend::postgres) {
    return store::JobStore::open_postgres(fresh_postgres_url());
  }
  return store::JobStore::open_in_memory();
}

void PrintTo(StoreBackend backend, std::ostream* out) {
  *out << (backend == StoreBackend::postgres ? "PostgreSQL" : "SQLite");
}

std::string backend_name(const testing::TestParamInfo<StoreBackend>& info) {
  return info.param == StoreBackend::postgres ? "PostgreSQL" : "SQLite";
}

} // namespace jobman::test
