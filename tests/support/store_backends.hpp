// The store's test suites run against both backends: each TEST_P of a StoreBackendTest suite runs once on a fresh
// SQLite store (in memory) and once on a fresh PostgreSQL store (a database of its own on the test server).
#pragma once

#include "jobman/store/job_store.hpp"

#include <gtest/gtest.h>
#include <ostream>
#include <string>

namespace jobman::test {

enum class StoreBackend { sqlite, postgres };

// The URL of an empty PostgreSQL database of its own (the superuser's): on the server JOBMAN_TEST_POSTGRES_URL names
// (./scripts/test starts one for the whole run), else on a server this process starts (shared_postgres()).
std::string fresh_postgres_url();

// Runs `sql` (one or more statements) on the server and database `url` names; throws std::runtime_error with the
// server's message when it fails.
void run_sql(const std::string& url, const std::string& sql);

// Whether PostgreSQL tests can run here: a server is named, or one can be started.
bool postgres_testable();

// A fixture whose store() is a fresh store of GetParam()'s backend; PostgreSQL tests skip when it is not installed.
class StoreBackendTest : public testing::TestWithParam<StoreBackend> {
protected:
  void SetUp() override;
  // A new, empty store of the backend under test.
  store::JobStore open_store();
};

// Prints the backend in gtest's messages.
void PrintTo(StoreBackend backend, std::ostream* out);

// "SQLite" or "PostgreSQL", for the parameterized tests' names.
std::string backend_name(const testing::TestParamInfo<StoreBackend>& info);

} // namespace jobman::test

// Instantiates the StoreBackendTest-derived fixture `suite` for both backends.
#define JOBMAN_STORE_BACKENDS(suite)                                                                                   \
  INSTANTIATE_TEST_SUITE_P(Backends, suite,                                                                            \
                           testing::Values(jobman::test::StoreBackend::sqlite, jobman::test::StoreBackend::postgres),  \
                           jobman::test::backend_name)
