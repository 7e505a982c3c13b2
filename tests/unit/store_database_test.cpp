// The job store on disk: file modes, schema migrations, query plans, and several processes at once.
#include "../../src/store/job_queries.hpp"
#include "../../src/store/schema.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/store/rivals.hpp"
#include "jobman/store/sqlite.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"
#include "support/sample_job.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <gtest/gtest.h>
#include <set>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace jobman::store {
namespace store_database_test {

using domain::NewJob;
using domain::Phase;
using sqlite::Database;
using sqlite::OpenMode;
using sqlite::Statement;

using test::make_job;

unsigned mode_of(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    ADD_FAILURE() << "cannot stat " << path;
    return 0;
  }
  return st.st_mode & 07777;
}

// Fork helpers: children report through their exit status and never return into the test.
constexpr int child_ok = 0;
constexpr int child_lost = 10;
constexpr int child_locked = 11;
constexpr int child_error = 12;

// Forks `count` children that block until release() and then run `body(i)`, exiting with its result.
class ChildProcesses {
public:
  ChildProcesses(int count, const std::function<int(int)>& body) {
    int gate[2];
    if (::pipe(gate) != 0) {
      throw std::runtime_error("pipe failed");
    }
    for (int i = 0; i < count; ++i) {
      const pid_t pid = ::fork();
      if (pid < 0) {
        throw std::runtime_error("fork failed");
      }
      if (pid == 0) {
        ::close(gate[1]);
        char byte = 0;
        // Blocks until the parent closes the write end: every child starts at the same moment.
        while (::read(gate[0], &byte, 1) < 0 && errno == EINTR) {
        }
        int result = child_error;
        try {
          result = body(i);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "child %d: %s\n", i, e.what());
          result = std::strstr(e.what(), "locked") != nullptr ? child_locked : child_error;
        }
        std::fflush(stderr);
        ::_exit(result);
      }
      pids_.push_back(pid);
    }
    ::close(gate[0]);
    gate_ = gate[1];
  }

  // Lets every child run.
  void release() {
    ::close(gate_);
    gate_ = -1;
  }

  // Waits for every child; returns their exit codes (-1 for a child killed by a signal).
  std::vector<int> wait() {
    if (gate_ >= 0) {
      release();
    }
    std::vector<int> codes;
    for (pid_t pid : pids_) {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    pids_.clear();
    return codes;
  }

  ~ChildProcesses() {
    if (!pids_.empty()) {
      wait();
    }
  }

  ChildProcesses(const ChildProcesses&) = delete;
  ChildProcesses& operator=(const ChildProcesses&) = delete;

private:
  std::vector<pid_t> pids_;
  int gate_ = -1;
};

// The query plan of `sql`, one line per step.
std::vector<std::string> query_plan(Database& db, const std::string& sql) {
  Statement explain(db, "EXPLAIN QUERY PLAN " + sql);
  std::vector<std::string> plan;
  while (explain.step()) {
    plan.push_back(explain.column_text(3));
  }
  return plan;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) {
    text += line + "\n";
  }
  return text;
}

bool scans_whole_jobs_table(const std::vector<std::string>& plan) {
  return std::any_of(plan.begin(), plan.end(), [](const std::string& line) {
    return line == "SCAN jobs" || line.starts_with("SCAN jobs USING ROWID") || line == "SCAN TABLE jobs";
  });
}

TEST(StoreFile, DatabaseIsPrivateToItsOwner) {
  test::TempDir tmp;
  const auto dir = tmp / "home";
  const auto path = dir / "jobman.db";
  auto store = JobStore::open(path);
  store.jobs().create({make_job("a")});
  EXPECT_EQ(mode_of(dir), 0700U);
  EXPECT_EQ(mode_of(path), 0600U);
  ASSERT_TRUE(std::filesystem::exists(path.string() + "-wal")) << "the store runs in WAL mode";
  EXPECT_EQ(mode_of(path.string() + "-wal"), 0600U);
  EXPECT_EQ(mode_of(path.string() + "-shm"), 0600U);
}

TEST(StoreFile, ReopeningKeepsEverything) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  {
    auto store = JobStore::open(path);
    store.jobs().create({make_job("a"), make_job("b")});
    store.events().append(2, "observation", "hello");
  }
  auto store = JobStore::open(path);
  EXPECT_EQ(store.schema_version(), JobStore::current_schema_version());
  EXPECT_EQ(store.jobs().get(2).name, "b");
  EXPECT_EQ(store.events().of(2).back().message, "hello");
  EXPECT_EQ(store.jobs().create({make_job("c")}), (std::vector<std::int64_t>{3}));
  EXPECT_TRUE(store.integrity_ok());

  Database raw(path.string(), OpenMode::read_write_create, 1000);
  EXPECT_EQ(raw.query_text("PRAGMA journal_mode"), "wal");
}

TEST(StoreFile, OutcomesAreKeptInTheirWordsAndAWordNotKnownReadsAsUnknown) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  auto store = JobStore::open(path);
  const auto id = store.jobs().create({make_job("a")}).front();
  (void)store.rivals().begin_race(id, {"r-a1", "r-a1", "us-central2-b", "v4-8", 1, std::nullopt, domain::Pricing::spot},
                                  {{"r-a1c2", "r-a1c2", "us-east1-d", "v4-8", 1, std::nullopt, domain::Pricing::spot}});
  store.rivals().end(id, "r-a1c2", domain::RivalOutcome::lost);
  store.attempts().end(id, 1, domain::AttemptOutcome::bad_hardware, std::nullopt);

  Database raw(path.string(), OpenMode::read_write_create, 1000);
  EXPECT_EQ(raw.query_text("SELECT outcome FROM attempts WHERE job_id = 1"), "bad-hardware");
  EXPECT_EQ(raw.query_text("SELECT outcome FROM rivals WHERE job_id = 1"), "lost");
  EXPECT_EQ(store.attempts().of(id).front().outcome, domain::AttemptOutcome::bad_hardware);
  EXPECT_EQ(store.rivals().of(id).front().outcome, domain::RivalOutcome::lost);

  // Words this build does not know (a newer jobman's, say) are read, not refused.
  raw.execute("UPDATE attempts SET outcome = 'melted' WHERE job_id = 1");
  raw.execute("UPDATE rivals SET outcome = 'won' WHERE job_id = 1");
  EXPECT_EQ(store.attempts().of(id).front().outcome, domain::AttemptOutcome::unknown);
  EXPECT_EQ(store.attempts().since(0).front().outcome, domain::AttemptOutcome::unknown);
  EXPECT_EQ(store.rivals().of(id).front().outcome, domain::RivalOutcome::unknown);
}

TEST(StoreFile, PricingsAreKeptByTheirNamesAndAnAttemptThatRecordedNoneReadsAsSpot) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  auto store = JobStore::open(path);
  NewJob job = make_job("a");
  job.pricing = domain::Pricing::ondemand;
  NewJob task = make_job("t");
  task.kind = domain::JobKind::task;
  task.pricing = std::nullopt; // Any worker's.
  const auto ids = store.jobs().create({job, task});
  store.attempts().begin(ids[0], "qr-a", "qr-a", "us-central2-b"); // In the job's pricing.
  store.attempts().begin(ids[1], "qr-t", "qr-t", "us-central2-b"); // Of a task that names none, on no worker.

  Database raw(path.string(), OpenMode::read_write_create, 1000);
  EXPECT_EQ(raw.query_text("SELECT pricing FROM jobs WHERE id = 1"), "ondemand");
  EXPECT_EQ(raw.query_text("SELECT pricing FROM jobs WHERE id = 2"), "");
  EXPECT_EQ(raw.query_text("SELECT pricing FROM attempts WHERE job_id = 1"), "ondemand");
  EXPECT_EQ(raw.query_text("SELECT pricing FROM attempts WHERE job_id = 2"), "");
  EXPECT_EQ(store.jobs().get(ids[0]).pricing, domain::Pricing::ondemand);
  EXPECT_EQ(store.jobs().get(ids[1]).pricing, std::nullopt);
  EXPECT_EQ(store.attempts().of(ids[0]).front().pricing, domain::Pricing::ondemand);
  EXPECT_EQ(store.attempts().of(ids[1]).front().pricing, domain::Pricing::spot);

  // Any spelling of a pricing is read as it; a word that is none fails the read, naming it and the database.
  raw.execute("UPDATE jobs SET pricing = 'on-demand' WHERE id = 1");
  EXPECT_EQ(store.jobs().get(ids[0]).pricing, domain::Pricing::ondemand);
  raw.execute("UPDATE jobs SET pricing = 'flex-start' WHERE id = 1");
  EXPECT_EQ(store.jobs().get(ids[0]).pricing, domain::Pricing::flex_start);
  raw.execute("UPDATE jobs SET pricing = 'dedicated' WHERE id = 1");
  raw.execute("UPDATE attempts SET pricing = 'dedicated' WHERE job_id = 2");
  for (const auto& read : std::vector<std::function<void()>>{[&] { (void)store.jobs().get(ids[0]); },
                                                             [&] { (void)store.attempts().of(ids[1]); }}) {
    try {
      read();
      ADD_FAILURE() << "read an unknown pricing";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("jobman.db: unknown pricing 'dedicated' in the database"), std::string::npos)
          << e.what();
    }
  }
}

TEST(StoreFile, EventsAreAppendOnly) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  auto store = JobStore::open(path);
  const auto ids = store.jobs().create({make_job("a"), make_job("b")});
  store.events().append(ids[0], "observation", "original");

  Database raw(path.string(), OpenMode::read_write_create, 1000);
  raw.execute("PRAGMA foreign_keys = ON");
  try {
    raw.execute("UPDATE events SET message = 'rewritten' WHERE job_id = 1");
    FAIL() << "an UPDATE of events must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("append-only"), std::string::npos) << e.what();
  }
  EXPECT_THROW(raw.execute("DELETE FROM events WHERE job_id = 1"), Error) << "the job still exists";
  EXPECT_EQ(store.events().of(ids[0]).back().message, "original");

  store.jobs().remove(ids[0]);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM events WHERE job_id = 1"), 0) << "remove_job clears them";
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM events WHERE job_id = 2"), 1);
}

TEST(StoreFile, RemovedIdsAreNotReusedAcrossReopen) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  {
    auto store = JobStore::open(path);
    const auto ids = store.jobs().create({make_job("a"), make_job("b")});
    store.jobs().remove(ids[1]);
    store.jobs().remove(ids[0]);
  }
  auto store = JobStore::open(path);
  EXPECT_EQ(store.jobs().create({make_job("c")}), (std::vector<std::int64_t>{3}));
}

TEST(StoreSchema, MigrationsAreNumberedInOrder) {
  const auto steps = schema::migrations();
  ASSERT_GE(steps.size(), 2U);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].version, static_cast<int>(i) + 1);
    EXPECT_FALSE(steps[i].sql.empty());
  }
  EXPECT_EQ(schema::latest_version(), JobStore::current_schema_version());
  EXPECT_EQ(steps[0].sql, schema::v1_sql());
  EXPECT_NE(steps[1].sql.find(schema::terminal_phase_list), std::string_view::npos)
      << "the list query must spell the terminal phases exactly as the partial index does";
}

TEST(StoreSchema, VersionOneDatabaseIsMigratedWithItsRowsIntact) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  {
    // A database exactly as the first release left it.
    Database v1(path.string(), OpenMode::read_write_create, 1000);
    v1.execute("PRAGMA journal_mode = WAL");
    v1.execute("BEGIN IMMEDIATE");
    v1.execute(std::string(schema::v1_sql()));
    v1.execute("PRAGMA user_version = 1");
    v1.execute("COMMIT");
    v1.execute(R"sql(
      INSERT INTO jobs (name, user, accelerator, zone, pricing, tpu_name, hosts, phase, desired, phase_reason,
                        attempt, preemptions, failures, host0_ip, exit_code, created_ms, updated_ms, phase_since_ms,
                        finished_ms, config_path, sweep_label)
      VALUES ('old-done', 'carol', 'v4-32', 'us-central2-b', 'spot', 'jobman-000001', 4, 'SUCCEEDED', 'run', 'exit 0',
              2, 1, 0, '', 0, 1000, 5000, 4000, 4000, '/c/old.yaml', 'lr=0.1'),
             ('old-running', 'carol', 'v4-8', 'us-central2-b', 'ondemand', 'jobman-000002', 1, 'RUNNING', 'run', '',
              1, 0, 0, '10.0.0.9', NULL, 2000, 3000, 3000, NULL, '/c/run.yaml', '');
      INSERT INTO job_configs (job_id, config_yaml) VALUES (1, 'name: old-done'), (2, 'name: old-running');
      INSERT INTO attempts (job_id, number, queued_resource, node, zone, started_ms, ended_ms, outcome, exit_code)
      VALUES (1, 1, 'qr-1', 'node-1', 'us-central2-b', 1500, 2500, 'preempted', 143),
             (1, 2, 'qr-2', 'node-2', 'us-central2-b', 2600, 4000, 'succeeded', 0);
      INSERT INTO events (job_id, ts_ms, kind, from_phase, to_phase, message, data_json)
      VALUES (1, 1000, 'created', NULL, 'PENDING', 'created old-done', ''),
             (1, 4000, 'phase', 'RUNNING', 'SUCCEEDED', 'exit 0', '{"exit_code":0}'),
             (2, 2000, 'created', NULL, 'PENDING', 'created old-running', '');
      INSERT INTO leases (job_id, owner, acquired_ms, heartbeat_ms, expires_ms) VALUES (2, 'host/1/1', 2000, 3000, 9000);
    )sql");
    ASSERT_EQ(v1.query_int("PRAGMA user_version"), 1);
  }

  auto store = JobStore::open(path);
  EXPECT_EQ(store.schema_version(), JobStore::current_schema_version());
  EXPECT_TRUE(store.integrity_ok());

  const auto done = store.jobs().get(1, true);
  EXPECT_EQ(done.name, "old-done");
  EXPECT_EQ(done.user, "carol");
  EXPECT_EQ(done.hosts, 4);
  EXPECT_EQ(done.phase, Phase::succeeded);
  EXPECT_EQ(done.attempt, 2);
  EXPECT_EQ(done.preemptions, 1);
  EXPECT_EQ(done.exit_code, 0);
  EXPECT_EQ(done.finished_ms, 4000);
  EXPECT_EQ(done.sweep_label, "lr=0.1");
  EXPECT_EQ(done.config_yaml, "name: old-done");
  const auto running = store.jobs().get(2);
  EXPECT_EQ(running.phase, Phase::running);
  EXPECT_EQ(running.host0_ip, "10.0.0.9");
  EXPECT_EQ(running.exit_code, std::nullopt);
  EXPECT_EQ(running.finished_ms, std::nullopt);

  ASSERT_EQ(store.attempts().of(1).size(), 2U);
  EXPECT_EQ(store.attempts().of(1)[0].outcome, domain::AttemptOutcome::preempted);
  // Version 5 gave the attempts recorded before it their job's accelerator and hosts.
  EXPECT_EQ(store.attempts().of(1)[1].accelerator, "v4-32");
  EXPECT_EQ(store.attempts().of(1)[1].hosts, 4);
  const auto events = store.events().of(1);
  ASSERT_EQ(events.size(), 2U);
  EXPECT_EQ(events[1].from, Phase::running);
  EXPECT_EQ(events[1].to, Phase::succeeded);
  EXPECT_EQ(events[1].data_json, R"({"exit_code":0})");
  ASSERT_TRUE(store.leases().of(2).has_value());
  EXPECT_EQ(store.leases().of(2)->owner, "host/1/1");

  // The default view now runs on the version 2 indexes and still finds the right rows.
  JobFilter filter;
  filter.now_ms = 4000 + 1000;
  const auto listed = store.jobs().list(filter);
  ASSERT_EQ(listed.size(), 2U);
  filter.now_ms = 4000 + 25LL * 3600 * 1000;
  ASSERT_EQ(store.jobs().list(filter).size(), 1U);
  EXPECT_EQ(store.jobs().list(filter)[0].id, 2);

  EXPECT_EQ(store.jobs().create({make_job("new")}), (std::vector<std::int64_t>{3}));
  Database raw(path.string(), OpenMode::read_write_create, 1000);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM sqlite_master WHERE name IN ('jobs_unfinished', 'jobs_finished')"), 2);
  // Version 6 made the zone catalogs' table; version 7 indexed the attempts not released.
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM sqlite_master WHERE name = 'zone_catalogs'"), 1);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM sqlite_master WHERE name = 'attempts_unreleased'"), 1);
  EXPECT_EQ(store.attempts().held_slices().size(), 2U)
      << "version 1 recorded no release: both attempts still hold theirs";
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM job_configs"), 3);
}

TEST(StoreSchema, VersionEighteenDatabaseKeepsRemovedJobsAttemptsOnceMigrated) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  {
    // A database of schema 18, the last before attempt_history, with a finished job and its attempt.
    Database v18(path.string(), OpenMode::read_write_create, 1000);
    v18.execute("PRAGMA journal_mode = WAL");
    v18.execute("BEGIN IMMEDIATE");
    for (const auto& step : schema::migrations()) {
      if (step.version <= 18) {
        v18.execute(std::string(step.sql));
      }
    }
    v18.execute("PRAGMA user_version = 18");
    v18.execute("COMMIT");
    v18.execute(R"sql(
      INSERT INTO jobs (name, user, accelerator, zone, pricing, tpu_name, hosts, phase, desired, created_ms, updated_ms,
                        phase_since_ms, finished_ms)
      VALUES ('done', 'carol', 'v4-16', 'us-central2-b', 'spot', 'jobman-000001', 2, 'SUCCEEDED', 'run', 1000, 9000,
              9000, 9000);
      INSERT INTO attempts (job_id, number, queued_resource, node, zone, started_ms, active_ms, ended_ms, outcome,
                            accelerator, hosts, pricing, released_ms)
      VALUES (1, 1, 'qr-1', 'qr-1', 'us-central2-b', 1000, 4000, 9000, 'preempted', 'v4-16', 2, 'spot', 9500);
    )sql");
    ASSERT_EQ(v18.query_int("SELECT count(*) FROM sqlite_master WHERE name = 'attempt_history'"), 0);
  }

  auto store = JobStore::open(path);
  EXPECT_EQ(store.schema_version(), JobStore::current_schema_version());
  EXPECT_TRUE(store.integrity_ok());
  const auto before = store.attempts().since(0, "us-central2-b", "v4-16");
  ASSERT_EQ(before.size(), 1U);
  store.jobs().remove(1);
  const auto after = store.attempts().since(0, "us-central2-b", "v4-16");
  ASSERT_EQ(after.size(), 1U) << "version 19 keeps a removed job's attempts for availability";
  EXPECT_EQ(after[0].pricing, domain::Pricing::spot);
  EXPECT_EQ(after[0].outcome, domain::AttemptOutcome::preempted);
  EXPECT_EQ(after[0].started_ms, 1000);
  EXPECT_EQ(after[0].active_ms, std::optional<std::int64_t>(4000));
  EXPECT_EQ(after[0].ended_ms, std::optional<std::int64_t>(9000));
  EXPECT_FALSE(store.jobs().find(1).has_value());
  Database raw(path.string(), OpenMode::read_write_create, 1000);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM attempts"), 0);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM job_configs"), 0);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM events"), 0);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM attempt_history"), 1);
}

TEST(StoreSchema, NewerDatabaseIsRefused) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  { auto store = JobStore::open(path); }
  {
    Database raw(path.string(), OpenMode::read_write_create, 1000);
    raw.execute("PRAGMA user_version = 99");
  }
  try {
    (void)JobStore::open(path);
    FAIL() << "a database from a newer jobman must not be opened";
  } catch (const Error& e) {
    const std::string expected = path.string() + " was written by a newer jobman (schema 99, this jobman knows " +
                                 std::to_string(JobStore::current_schema_version()) + ")";
    EXPECT_EQ(e.what(), expected);
  }
}

TEST(StoreSchema, ForeignDatabaseIsReportedWithItsPath) {
  test::TempDir tmp;
  const auto path = tmp.write("jobman.db", "this is not an SQLite database, just a file of text padded out. "
                                           "SQLite looks at the first hundred bytes of the header.............");
  try {
    (void)JobStore::open(path);
    FAIL() << "a file that is not a database must not be opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a database"), std::string::npos) << e.what();
  }
}

TEST(StoreQueryPlan, DefaultListReadsIndexesNotTheWholeTable) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  {
    auto store = JobStore::open(path);
    std::vector<NewJob> jobs(2000, make_job("old"));
    store.jobs().create(jobs);
  }
  Database raw(path.string(), OpenMode::read_write_create, 1000);
  // Almost every job long finished, a few running: the shape of a store after months of use.
  raw.execute("UPDATE jobs SET phase = 'SUCCEEDED', finished_ms = id WHERE id <= 1990");
  raw.execute("UPDATE jobs SET phase = 'RUNNING' WHERE id > 1990");

  std::vector<JobFilter> filters(4);
  filters[1].user = "alice";
  filters[2].phases = {Phase::running, Phase::failed};
  filters[3].with_config = true;
  filters[3].name_glob = "old*";
  for (int analyzed = 0; analyzed < 2; ++analyzed) {
    for (const auto& filter : filters) {
      const auto plan = query_plan(raw, queries::list_jobs_sql(filter));
      EXPECT_FALSE(scans_whole_jobs_table(plan)) << queries::list_jobs_sql(filter) << "\n" << joined(plan);
      const auto text = joined(plan);
      EXPECT_NE(text.find("jobs_unfinished"), std::string::npos) << text;
      EXPECT_NE(text.find("jobs_finished"), std::string::npos) << text;
      EXPECT_EQ(text.find("TEMP B-TREE FOR ORDER BY"), std::string::npos) << "ids come out in order\n" << text;
    }
    // Statistics must not talk the planner into a scan either.
    raw.execute("ANALYZE");
  }

  JobFilter history;
  history.include_history = true;
  EXPECT_TRUE(scans_whole_jobs_table(query_plan(raw, queries::list_jobs_sql(history))))
      << "sanity check: the history view does read the table";

  auto store = JobStore::open(path);
  JobFilter filter;
  filter.now_ms = 1990;
  filter.recent_ms = 90;
  EXPECT_EQ(store.jobs().list(filter).size(), 10U + 91U) << "running jobs plus those finished at 1900 ms or later";
}

TEST(StoreQueryPlan, HeldSlicesReadOnlyThePartialIndexOfUnreleasedAttempts) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  { auto store = JobStore::open(path); }
  Database raw(path.string(), OpenMode::read_write_create, 1000);
  for (int analyzed = 0; analyzed < 2; ++analyzed) {
    const auto text = joined(query_plan(raw, queries::held_slices_sql()));
    // The partial index holds only the attempts not released, so its scan reads those alone.
    EXPECT_NE(text.find("INDEX attempts_unreleased"), std::string::npos) << text;
    EXPECT_EQ(text.find("TEMP B-TREE"), std::string::npos) << text;
    raw.execute("ANALYZE");
  }
}

// `status` over a big queue: the places of the listed tasks come from a covering index (never a row of the table),
// and the queue's head is read in order (never sorted), whatever the accelerators.
TEST(StoreQueryPlan, TheTaskBoardReadsIndexesOnly) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  {
    auto store = JobStore::open(path);
    std::vector<NewJob> tasks;
    for (int i = 0; i < 600; ++i) {
      auto job = make_job("t" + std::to_string(i));
      job.kind = domain::JobKind::task;
      job.accelerator = i % 3 == 0 ? "v5litepod-4" : "v4-8";
      job.priority = i % 7 == 0 ? 1 : 0;
      tasks.push_back(job);
    }
    store.jobs().create(tasks);
    store.jobs().create(std::vector<NewJob>(100, make_job("job")));
  }
  Database raw(path.string(), OpenMode::read_write_create, 1000);
  raw.execute("UPDATE jobs SET phase = 'SUCCEEDED', finished_ms = id WHERE id <= 100");
  for (int analyzed = 0; analyzed < 2; ++analyzed) {
    const auto places = joined(query_plan(raw, queries::task_places_sql()));
    EXPECT_NE(places.find("COVERING INDEX tasks_listed"), std::string::npos) << places;
    EXPECT_EQ(places.find("TEMP B-TREE"), std::string::npos) << places;
    const auto head = joined(query_plan(raw, queries::queue_head_sql()));
    EXPECT_NE(head.find("INDEX tasks_queue_head"), std::string::npos) << head;
    EXPECT_EQ(head.find("TEMP B-TREE"), std::string::npos) << head;
    raw.execute("ANALYZE");
  }
}

TEST(StoreQueryPlan, ListQueryDoesNotReadTheConfigSnapshot) {
  JobFilter filter;
  EXPECT_EQ(queries::list_jobs_sql(filter).find("config_yaml"), std::string::npos);
  filter.include_history = true;
  EXPECT_EQ(queries::list_jobs_sql(filter).find("config_yaml"), std::string::npos);
  filter.with_config = true;
  EXPECT_NE(queries::list_jobs_sql(filter).find("config_yaml"), std::string::npos);
}

TEST(StoreConcurrency, TwoStoresRacingForOneLeaseHaveOneWinner) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  auto first = JobStore::open(path);
  auto second = JobStore::open(path);
  constexpr int jobs = 200;
  first.jobs().create(std::vector<NewJob>(jobs, make_job("lease")));

  std::vector<int> won_by_first(jobs + 1, 0);
  std::vector<int> won_by_second(jobs + 1, 0);
  std::barrier start(2);
  std::atomic<bool> failed{false};
  const std::int64_t now = util::now_ms();
  auto race = [&](JobStore& store, const std::string& owner, std::vector<int>& won) {
    start.arrive_and_wait();
    try {
      for (int id = 1; id <= jobs; ++id) {
        won[static_cast<std::size_t>(id)] = store.leases().try_acquire(id, owner, 60'000, now) ? 1 : 0;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", owner.c_str(), e.what());
      failed = true;
    }
  };
  std::thread a([&] { race(first, "first", won_by_first); });
  std::thread b([&] { race(second, "second", won_by_second); });
  a.join();
  b.join();
  ASSERT_FALSE(failed);
  for (int id = 1; id <= jobs; ++id) {
    const auto i = static_cast<std::size_t>(id);
    ASSERT_EQ(won_by_first[i] + won_by_second[i], 1) << "job " << id;
    const auto lease = first.leases().of(id);
    ASSERT_TRUE(lease.has_value());
    EXPECT_EQ(lease->owner, won_by_first[i] != 0 ? "first" : "second");
  }

  // Sequentially, across connections: the loser can only take over once the lease has expired.
  EXPECT_FALSE(second.leases().try_acquire(1, "third", 1000, now + 59'999));
  EXPECT_TRUE(second.leases().try_acquire(1, "third", 1000, now + 60'000));
  EXPECT_FALSE(first.leases().renew(1, won_by_first[1] != 0 ? "first" : "second", 60'000, now + 60'001));
}

TEST(StoreConcurrency, ForkedProcessesRacingForOneLeaseHaveOneWinner) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  {
    auto store = JobStore::open(path);
    store.jobs().create({make_job("contested")});
  }
  constexpr int contenders = 12;
  const std::int64_t now = util::now_ms();
  ChildProcesses children(contenders, [&](int i) {
    auto store = JobStore::open(path);
    return store.leases().try_acquire(1, "owner-" + std::to_string(i), 60'000, now) ? child_ok : child_lost;
  });
  const auto codes = children.wait();
  int winner = -1;
  for (int i = 0; i < contenders; ++i) {
    const int code = codes[static_cast<std::size_t>(i)];
    ASSERT_TRUE(code == child_ok || code == child_lost) << "child " << i << " exited with " << code;
    if (code == child_ok) {
      ASSERT_EQ(winner, -1) << "two winners: " << winner << " and " << i;
      winner = i;
    }
  }
  ASSERT_NE(winner, -1) << "nobody won";
  auto store = JobStore::open(path);
  EXPECT_EQ(store.leases().of(1)->owner, "owner-" + std::to_string(winner));
}

TEST(StoreConcurrency, ProcessesOpeningABrandNewDatabaseTogetherEachCreateAJob) {
  test::TempDir tmp;
  // Neither the directory nor the database exists yet: every process races to create both.
  const auto path = tmp / "home" / "jobman.db";
  constexpr int processes = 32;
  int results[2];
  ASSERT_EQ(::pipe(results), 0);
  std::vector<int> codes;
  {
    ChildProcesses children(processes, [&](int i) {
      ::close(results[0]);
      auto store = JobStore::open(path);
      const auto ids = store.jobs().create({make_job("job-" + std::to_string(i))});
      const std::int64_t id = ids.at(0);
      // Eight bytes are below PIPE_BUF, so concurrent writes do not interleave.
      if (::write(results[1], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) {
        return child_error;
      }
      return child_ok;
    });
    codes = children.wait();
  }
  ::close(results[1]);
  std::multiset<std::int64_t> reported;
  std::int64_t id = 0;
  while (::read(results[0], &id, sizeof id) == static_cast<ssize_t>(sizeof id)) {
    reported.insert(id);
  }
  ::close(results[0]);

  for (int i = 0; i < processes; ++i) {
    EXPECT_NE(codes[static_cast<std::size_t>(i)], child_locked) << "child " << i << ": database is locked";
    EXPECT_EQ(codes[static_cast<std::size_t>(i)], child_ok) << "child " << i;
  }
  std::multiset<std::int64_t> expected;
  for (int i = 1; i <= processes; ++i) {
    expected.insert(i);
  }
  EXPECT_EQ(reported, expected) << "32 distinct ids, 1 to 32";

  auto store = JobStore::open(path);
  EXPECT_EQ(store.schema_version(), JobStore::current_schema_version());
  EXPECT_TRUE(store.integrity_ok());
  JobFilter all;
  all.include_history = true;
  const auto jobs = store.jobs().list(all);
  ASSERT_EQ(jobs.size(), static_cast<std::size_t>(processes));
  for (const auto& job : jobs) {
    const auto events = store.events().of(job.id);
    ASSERT_EQ(events.size(), 1U);
    EXPECT_EQ(events[0].kind, "created");
  }
  EXPECT_EQ(mode_of(path), 0600U);
  EXPECT_EQ(mode_of(path.parent_path()), 0700U);
}

TEST(SqliteWrapper, TransactionRollsBackUnlessCommitted) {
  Database db(":memory:", OpenMode::in_memory, 1000);
  db.execute("CREATE TABLE t (x INTEGER)");
  {
    sqlite::Transaction transaction(db);
    db.execute("INSERT INTO t VALUES (1)");
  }
  EXPECT_EQ(db.query_int("SELECT count(*) FROM t"), 0);
  {
    sqlite::Transaction transaction(db);
    db.execute("INSERT INTO t VALUES (2)");
    transaction.commit();
  }
  EXPECT_EQ(db.query_int("SELECT count(*) FROM t"), 1);
  try {
    sqlite::Transaction transaction(db);
    db.execute("INSERT INTO t VALUES (3)");
    throw std::runtime_error("interrupted");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(db.query_int("SELECT count(*) FROM t"), 1) << "an exception rolls the transaction back";
}

TEST(SqliteWrapper, ErrorsNameTheDatabaseAndSqlitesMessage) {
  test::TempDir tmp;
  const auto path = (tmp / "x.db").string();
  Database db(path, OpenMode::read_write_create, 1000);
  try {
    Statement bad(db, "SELECT x FROM nowhere");
    FAIL() << "preparing a query on a missing table must fail";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(path, 0), 0U) << message;
    EXPECT_NE(message.find("no such table: nowhere"), std::string::npos) << message;
  }
}

TEST(SqliteWrapper, StatementsBindAndReadEveryType) {
  Database db(":memory:", OpenMode::in_memory, 1000);
  Statement query(db, "SELECT ?1, ?2, ?3, ?4, :named");
  query.bind(1, std::int64_t{1} << 40);
  query.bind(2, std::string_view("text"));
  query.bind(3, std::optional<int>());
  query.bind(4, std::optional<std::int64_t>(7));
  ASSERT_EQ(query.parameter_index(":named"), 5);
  query.bind(5, "literal");
  ASSERT_TRUE(query.step());
  EXPECT_EQ(query.column_int64(0), std::int64_t{1} << 40);
  EXPECT_EQ(query.column_text(1), "text");
  EXPECT_TRUE(query.is_null(2));
  EXPECT_EQ(query.column_optional_int(2), std::nullopt);
  EXPECT_EQ(query.column_optional_int64(3), 7);
  EXPECT_EQ(query.column_text(4), "literal");
  EXPECT_FALSE(query.step());
}

TEST(SqliteBusyWait, WaitsWhileTheLogMovesAndGivesUpAfterThePatienceWithoutAMove) {
  using namespace std::chrono_literals;
  sqlite::BusyWait wait(1000ms, 5000ms);
  const auto t0 = sqlite::BusyWait::Clock::time_point{} + 1h;
  const sqlite::BusyWait::LogStamp still{4096, 1};
  ASSERT_TRUE(wait.next(0, t0, still));
  // Quick retries first, then pauses of 10 to 40 ms.
  EXPECT_EQ(*wait.next(1, t0, still), 2ms);
  const auto pause = wait.next(7, t0 + 100ms, still);
  ASSERT_TRUE(pause);
  EXPECT_GE(*pause, 10ms);
  EXPECT_LE(*pause, 40ms);
  // A commit by someone at 900 ms: the patience counts from there.
  EXPECT_TRUE(wait.next(8, t0 + 900ms, sqlite::BusyWait::LogStamp{8192, 2}));
  EXPECT_TRUE(wait.next(9, t0 + 1800ms, sqlite::BusyWait::LogStamp{8192, 2}));
  EXPECT_FALSE(wait.next(10, t0 + 1900ms, sqlite::BusyWait::LogStamp{8192, 2}));
}

TEST(SqliteBusyWait, GivesUpAtTheLimitHoweverMuchTheLogMoves) {
  using namespace std::chrono_literals;
  sqlite::BusyWait wait(1000ms, 5000ms);
  const auto t0 = sqlite::BusyWait::Clock::time_point{} + 1h;
  std::int64_t commits = 0;
  ASSERT_TRUE(wait.next(0, t0, sqlite::BusyWait::LogStamp{0, commits}));
  int count = 1;
  for (auto t = t0 + 500ms; t < t0 + 5000ms; t += 500ms) {
    EXPECT_TRUE(wait.next(count++, t, sqlite::BusyWait::LogStamp{0, ++commits}));
  }
  EXPECT_FALSE(wait.next(count, t0 + 5000ms, sqlite::BusyWait::LogStamp{0, ++commits}));
  // A new wait starts afresh.
  EXPECT_TRUE(wait.next(0, t0 + 6000ms, sqlite::BusyWait::LogStamp{0, commits}));
}

// Two connections to one file: `holder` keeps the write lock for `hold`, touching the write-ahead log every `touch`
// (0: never) as a stream of other writers' commits would; the other connection, patience 300 ms, tries to write.
// Returns how long the attempt took and whether it succeeded.
std::pair<std::chrono::milliseconds, bool> write_behind_holder(std::chrono::milliseconds hold,
                                                               std::chrono::milliseconds touch) {
  test::TempDir tmp;
  const auto path = (tmp / "busy.db").string();
  Database holder(path, OpenMode::read_write_create, 300);
  holder.enable_wal(1000);
  holder.execute("CREATE TABLE t (x INTEGER)");
  Database waiter(path, OpenMode::read_write_create, 300);
  waiter.enable_wal(1000);
  std::atomic<bool> held = false;
  std::jthread holding([&] {
    sqlite::Transaction transaction(holder);
    holder.execute("INSERT INTO t VALUES (1)");
    held = true;
    const auto until = std::chrono::steady_clock::now() + hold;
    while (std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(touch.count() > 0 ? touch : hold);
      if (touch.count() > 0) {
        ::utimensat(AT_FDCWD, (path + "-wal").c_str(), nullptr, 0);
      }
    }
    transaction.commit();
  });
  while (!held) {
    std::this_thread::yield();
  }
  const auto started = std::chrono::steady_clock::now();
  bool wrote = true;
  try {
    sqlite::Transaction transaction(waiter);
    waiter.execute("INSERT INTO t VALUES (2)");
    transaction.commit();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("database is locked"), std::string::npos) << e.what();
    wrote = false;
  }
  return {std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started), wrote};
}

TEST(SqliteBusyWait, AWriterWaitsPastItsPatienceWhileTheStoreMoves) {
  using namespace std::chrono_literals;
  const auto [waited, wrote] = write_behind_holder(1500ms, 50ms);
  EXPECT_TRUE(wrote) << "gave up after " << waited.count() << " ms although the log moved every 50 ms";
  EXPECT_GE(waited, 1000ms);
}

TEST(SqliteBusyWait, AWriterGivesUpAfterItsPatienceWhenNothingMoves) {
  using namespace std::chrono_literals;
  const auto [waited, wrote] = write_behind_holder(1500ms, 0ms);
  EXPECT_FALSE(wrote) << "wrote after " << waited.count() << " ms behind a holder that never let go";
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 1500ms);
}

} // namespace store_database_test
} // namespace jobman::store
