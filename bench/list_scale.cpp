// bench/list_scale N [RUNS]: builds a store of N jobs with a realistic mix of phases and a year of history, then
// times whole `jobman list`, `jobman list --all --json` and `jobman report --since 365d --json` processes, and the
// dashboard (`jobman ui`) with 1,000 live jobs. Last lines: ui_first_page_ms=... and list_ms=...
// report_365d_json_ms=.... LIST_SCALE_KEEP=1 keeps the store for profiling. With LIST_SCALE_POSTGRES_URL (an empty
// PostgreSQL database or schema), the store is then copied there (`jobman store migrate`) and `list` timed against
// it too: the last line is then postgres_list_ms=... postgres_list_all_json_ms=..., and with LIST_SCALE_POOLED_URL
// (the same database through a connection pooler) pooled_list_ms=... after it. bench/postgres_list sets both up.
#include "jobman/core/daemon.hpp"
#include "jobman/store/copy.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/process.hpp"
#include "jobman/util/system.hpp"
#include "stats.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <httplib.h>
#include <optional>
#include <random>
#include <sqlite3.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using jobman::domain::Phase;

// A resolved config of typical size, as `create` snapshots it.
std::string snapshot(int i) {
  std::string yaml = "job:\n  name: sweep-" + std::to_string(i) +
                     "\n  env_type: venv\n  loop: true\n  remote_user: researcher\n"
                     "tpu:\n  allocation_mode: queued-resources\n  accelerator: v4-32\n  name: sweep\n"
                     "  zone: us-central2-b\n  version: tpu-ubuntu2204-base\n  pricing: spot\n"
                     "gcsfuse:\n  bucket_name: research-bucket\n  mount_path: /home/researcher/bucket\n"
                     "venv:\n  name: train\n  requirements_file: requirements.txt\n  python: '3.10'\n"
                     "recovery:\n  max_failures: 1\n  restart_exit_codes: [42]\n  poll_interval: 30\n"
                     "command:\n  workers: all\n  cmd: |\n";
  for (int line = 0; line < 20; ++line) {
    yaml += "    python3 train.py --config configs/run.yaml --step " + std::to_string(line) + " --seed 1234\n";
  }
  return yaml;
}

void exec_sql(sqlite3* db, const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::fprintf(stderr, "sqlite: %s\n", error);
    std::exit(1);
  }
}

// Builds the store: a year of history through the store API, then phases and times set directly.
void build_store(const std::string& home, int n) {
  const std::string db_path = home + "/jobman.db";
  {
    auto store = jobman::store::JobStore::open(db_path);
    std::vector<jobman::domain::NewJob> batch;
    for (int i = 0; i < n; ++i) {
      jobman::domain::NewJob job;
      job.name = "sweep-" + std::to_string(i);
      job.user = i % 7 == 0 ? "bob" : "alice";
      job.accelerator = i % 3 == 0 ? "v4-32" : "v5litepod-16";
      job.zone = i % 3 == 0 ? "us-central2-b" : "us-central1-a";
      job.pricing = jobman::domain::Pricing::spot;
      job.tpu_name = "sweep";
      job.hosts = 4;
      job.config_path = "/home/alice/exp/sweep.yaml";
      job.config_yaml = snapshot(i);
      batch.push_back(std::move(job));
      if (batch.size() == 10000 || i + 1 == n) {
        store.jobs().create(batch);
        batch.clear();
      }
    }
  }
  // Backdate and finish most jobs directly: the store API stamps "now", the history is weeks old.
  sqlite3* db = nullptr;
  sqlite3_open(db_path.c_str(), &db);
  exec_sql(db, "BEGIN IMMEDIATE");
  sqlite3_stmt* update = nullptr;
  sqlite3_prepare_v2(db,
                     "UPDATE jobs SET phase = ?1, created_ms = ?2, updated_ms = ?3, phase_since_ms = ?3, "
                     "finished_ms = ?4, attempt = ?5, host0_ip = ?6 WHERE id = ?7",
                     -1, &update, nullptr);
  // Ids follow creation time over a year of history, as `create` allocates them. Jobs created in the last
  // three days are partly still running; older ones finished within two days of their creation, but for a
  // few stuck ones (a long queue, a forgotten job) scattered through the history.
  const std::int64_t now = jobman::util::now_ms();
  const std::int64_t hour = 3600LL * 1000;
  const std::int64_t day = 24 * hour;
  const std::int64_t span = 365 * day;
  std::mt19937 rng(42);
  const Phase active[] = {Phase::pending, Phase::queued,  Phase::provisioning, Phase::setup,
                          Phase::running, Phase::running, Phase::running,      Phase::recovering};
  const Phase finished[] = {Phase::succeeded, Phase::succeeded, Phase::succeeded, Phase::succeeded, Phase::succeeded,
                            Phase::succeeded, Phase::failed,    Phase::cancelled, Phase::cancelled, Phase::deleted};
  for (int id = 1; id <= n; ++id) {
    const std::int64_t created = now - span + static_cast<std::int64_t>(id) * (span / n);
    const bool recent = now - created < 3 * day;
    const bool still_active = recent ? rng() % 100 < 30 : rng() % 10000 < 5;
    Phase phase;
    std::optional<std::int64_t> done;
    if (still_active) {
      phase = active[rng() % std::size(active)];
    } else {
      phase = finished[rng() % std::size(finished)];
      done = std::min(now,
                      created + static_cast<std::int64_t>(rng() % static_cast<unsigned>(recent ? 20 * hour : 2 * day)));
    }
    const std::string phase_text(jobman::domain::to_string(phase));
    sqlite3_bind_text(update, 1, phase_text.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(update, 2, created);
    sqlite3_bind_int64(update, 3, done.value_or(created));
    if (done) {
      sqlite3_bind_int64(update, 4, *done);
    } else {
      sqlite3_bind_null(update, 4);
    }
    sqlite3_bind_int(update, 5, phase == Phase::pending ? 0 : 1 + static_cast<int>(rng() % 3));
    sqlite3_bind_text(update, 6, phase == Phase::running ? "10.130.0.12" : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(update, 7, id);
    sqlite3_step(update);
    sqlite3_reset(update);
  }
  sqlite3_finalize(update);
  // Each job's history as the supervisor writes it, for `report`: its phase changes and one attempt with its steps.
  exec_sql(db, "INSERT INTO events(job_id, ts_ms, kind, from_phase, to_phase, message) "
               "SELECT id, created_ms + 1000, 'phase', 'PENDING', 'QUEUED', '' FROM jobs WHERE attempt > 0");
  exec_sql(db, "INSERT INTO events(job_id, ts_ms, kind, from_phase, to_phase, message) "
               "SELECT id, created_ms + 600000, 'phase', 'QUEUED', 'PROVISIONING', '' FROM jobs WHERE attempt > 0 "
               "AND phase NOT IN ('QUEUED')");
  exec_sql(db, "INSERT INTO events(job_id, ts_ms, kind, from_phase, to_phase, message) "
               "SELECT id, created_ms + 720000, 'phase', 'PROVISIONING', 'SETUP', '' FROM jobs WHERE attempt > 0 "
               "AND phase NOT IN ('QUEUED', 'PROVISIONING')");
  exec_sql(db, "INSERT INTO events(job_id, ts_ms, kind, from_phase, to_phase, message) "
               "SELECT id, created_ms + 810000, 'phase', 'SETUP', 'RUNNING', '' FROM jobs WHERE attempt > 0 "
               "AND phase NOT IN ('QUEUED', 'PROVISIONING', 'SETUP')");
  exec_sql(db, "INSERT INTO events(job_id, ts_ms, kind, from_phase, to_phase, message) "
               "SELECT id, MAX(finished_ms, created_ms + 810000), 'phase', 'RUNNING', phase, '' FROM jobs "
               "WHERE finished_ms IS NOT NULL");
  exec_sql(db, "INSERT INTO attempts(job_id, number, queued_resource, node, zone, accelerator, hosts, pricing, "
               "started_ms, active_ms, ended_ms, released_ms, outcome, progress) "
               "SELECT id, 1, 'sweep-' || id, 'sweep-' || id, zone, accelerator, hosts, pricing, created_ms + 1000, "
               "created_ms + 720000, finished_ms, finished_ms + 30000, "
               "CASE WHEN finished_ms IS NULL THEN '' ELSE lower(phase) END, "
               "'0@' || (created_ms + 820000) || ',500@' || (created_ms + 1420000) || ';10000' FROM jobs "
               "WHERE attempt > 0");
  exec_sql(db, "UPDATE jobs SET attempt = 1 WHERE attempt > 1");
  exec_sql(db, "COMMIT");
  exec_sql(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  sqlite3_close(db);
}

// Runs jobman with `args` and the given home (autostart off, so that `list` never starts a supervisor or the mock
// of its own); drains its stdout through a pipe; returns wall milliseconds.
double time_run(const std::string& home, const std::vector<std::string>& args, std::size_t* bytes,
                const std::string& store = "") {
  const auto start = std::chrono::steady_clock::now();
  jobman::util::ProcessBuilder builder({JOBMAN_BINARY});
  builder.args(args).env("JOBMAN_HOME", home).env("JOBMAN_AUTOSTART", "0");
  if (!store.empty()) {
    builder.env("JOBMAN_STORE", store);
  }
  auto child = builder.output(jobman::util::Stream::pipe()).error(jobman::util::Stream::null()).spawn();
  char buf[1 << 16];
  std::size_t total = 0;
  ssize_t r = 0;
  while ((r = ::read(child.out_fd, buf, sizeof buf)) > 0) {
    total += static_cast<std::size_t>(r);
  }
  jobman::util::close_fd(child.out_fd);
  const int status = jobman::util::wait_exit(child.pid);
  const auto end = std::chrono::steady_clock::now();
  if (status != 0) {
    std::fprintf(stderr, "jobman exited with status %d\n", status);
    std::exit(1);
  }
  *bytes = total;
  return std::chrono::duration<double, std::milli>(end - start).count();
}

using jobman::bench::median;

// The dashboard over the same store with `live` jobs running: `jobman ui` started once, then its first page and its
// updates timed from request to last byte. Prints the medians; returns the first page's.
double time_dashboard(const std::string& home, int live, int runs) {
  sqlite3* db = nullptr;
  sqlite3_open((home + "/jobman.db").c_str(), &db);
  const std::string newest = "(SELECT id FROM jobs ORDER BY id DESC LIMIT " + std::to_string(live) + ")";
  exec_sql(db, ("UPDATE jobs SET phase = 'RUNNING', finished_ms = NULL, step = 600, step_total = 10000, "
                "step_ms = created_ms + 900000 WHERE id IN " +
                newest)
                   .c_str());
  auto child = jobman::util::ProcessBuilder({JOBMAN_BINARY})
                   .args({"ui", "--port", "0"})
                   .env("JOBMAN_HOME", home)
                   .env("JOBMAN_AUTOSTART", "0")
                   .output(jobman::util::Stream::pipe())
                   .error(jobman::util::Stream::null())
                   .spawn();
  std::string banner;
  char c = 0;
  while (banner.find('\n') == std::string::npos && ::read(child.out_fd, &c, 1) == 1) {
    banner += c;
  }
  const auto at = banner.find("http://127.0.0.1:");
  if (at == std::string::npos) {
    std::fprintf(stderr, "jobman ui printed no address: %s\n", banner.c_str());
    std::exit(1);
  }
  const int port = std::atoi(banner.c_str() + at + 17);
  const std::string token = banner.substr(banner.find("token=") + 6, 32);
  httplib::Client http("127.0.0.1", port);
  const auto timed = [&](const std::string& path, std::string* body) {
    const auto start = std::chrono::steady_clock::now();
    const auto res = http.Get(path.c_str(), {{"X-Jobman-Token", token}});
    const auto end = std::chrono::steady_clock::now();
    if (!res || res->status != 200) {
      std::fprintf(stderr, "GET %s failed\n", path.c_str());
      std::exit(1);
    }
    *body = res->body;
    return std::chrono::duration<double, std::milli>(end - start).count();
  };
  std::string page;
  std::vector<double> page_ms;
  timed("/?token=" + token, &page); // The first read of the store's pages from disk, as after a reboot.
  for (int i = 0; i < runs; ++i) {
    page_ms.push_back(timed("/?token=" + token, &page));
  }
  const auto cursor_at = page.find("data-cursor=\"");
  const std::string cursor = std::to_string(std::atoll(page.c_str() + cursor_at + 13));
  std::string changes;
  std::vector<double> idle_ms;
  for (int i = 0; i < runs; ++i) {
    idle_ms.push_back(timed("/api/changes?after=" + cursor, &changes));
  }
  // Every live job prints a step, as a progress flush writes them.
  exec_sql(db, ("UPDATE jobs SET step = step + 10, step_ms = step_ms + 5000 WHERE id IN " + newest).c_str());
  sqlite3_close(db);
  std::vector<double> busy_ms;
  std::string busy;
  for (int i = 0; i < std::max(3, runs / 3); ++i) {
    busy_ms.push_back(timed("/api/changes?after=" + cursor, &busy));
  }
  ::kill(child.pid, SIGTERM);
  jobman::util::close_fd(child.out_fd);
  jobman::util::wait_exit(child.pid);
  std::fprintf(stderr,
               "ui first page with %d live jobs: %zu bytes, min %.1f ms, max %.1f ms over %zu runs\n"
               "ui changes, none: %zu bytes, median %.2f ms; after %d changed: %zu bytes, median %.1f ms\n",
               live, page.size(), *std::min_element(page_ms.begin(), page_ms.end()),
               *std::max_element(page_ms.begin(), page_ms.end()), page_ms.size(), changes.size(), median(idle_ms), live,
               busy.size(), median(busy_ms));
  std::printf("ui_first_page_ms=%.1f ui_changes_none_ms=%.2f ui_changes_%d_ms=%.1f\n", median(page_ms), median(idle_ms),
              live, median(busy_ms));
  return median(page_ms);
}

} // namespace

// The same store on a PostgreSQL server: copied in as `jobman store migrate` does, then `list` and
// `list --all --json` timed as whole processes with JOBMAN_STORE naming the server.
void time_postgres(const std::string& home, const std::string& url, int runs) {
  const auto copy_start = std::chrono::steady_clock::now();
  {
    const auto source = jobman::store::JobStore::open(home + "/jobman.db");
    auto target = jobman::store::JobStore::open_postgres(url);
    (void)jobman::store::copy_store(source, target);
  }
  std::fprintf(stderr, "copied into PostgreSQL in %.1f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count());
  ::setenv("JOBMAN_HOME", home.c_str(), 1);
  // The server's store has a supervisor lock of its own (daemon-KEY.lock): the one `jobman daemon` of it would hold.
  ::setenv("JOBMAN_STORE", url.c_str(), 1);
  const jobman::core::DaemonPresence daemon;
  ::unsetenv("JOBMAN_STORE");
  std::size_t bytes = 0;
  // The lab's whole view (`--user all`): every user's live and recent jobs, as `list` shows yours on SQLite.
  time_run(home, {"list", "--user", "all"}, &bytes, url);
  std::vector<double> list_ms;
  list_ms.reserve(static_cast<std::size_t>(runs));
  for (int i = 0; i < runs; ++i) {
    list_ms.push_back(time_run(home, {"list", "--user", "all"}, &bytes, url));
  }
  std::fprintf(stderr, "list on PostgreSQL: %zu bytes per run, min %.2f ms, max %.2f ms over %zu runs\n", bytes,
               *std::min_element(list_ms.begin(), list_ms.end()), *std::max_element(list_ms.begin(), list_ms.end()),
               list_ms.size());
  std::vector<double> json_ms;
  for (int i = 0; i < std::max(3, runs / 3); ++i) {
    json_ms.push_back(time_run(home, {"list", "--all", "--json", "--user", "all"}, &bytes, url));
  }
  std::printf("postgres_list_ms=%.2f postgres_list_all_json_ms=%.1f\n", median(list_ms), median(json_ms));
  // The same database through a connection pooler (LIST_SCALE_POOLED_URL): a command finds a backend already
  // started and authenticated.
  if (const char* pooled = std::getenv("LIST_SCALE_POOLED_URL"); pooled != nullptr && *pooled != '\0') {
    time_run(home, {"list", "--user", "all"}, &bytes, pooled);
    std::vector<double> pooled_ms;
    for (int i = 0; i < runs; ++i) {
      pooled_ms.push_back(time_run(home, {"list", "--user", "all"}, &bytes, pooled));
    }
    std::fprintf(stderr, "list through the pooler: %zu bytes per run, min %.2f ms, max %.2f ms over %zu runs\n", bytes,
                 *std::min_element(pooled_ms.begin(), pooled_ms.end()),
                 *std::max_element(pooled_ms.begin(), pooled_ms.end()), pooled_ms.size());
    std::printf("pooled_list_ms=%.2f\n", median(pooled_ms));
  }
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100000;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 21;
  if (n <= 0 || runs <= 0) {
    std::fprintf(stderr, "usage: list_scale N [RUNS]\n");
    return 2;
  }
  char home_template[] = "/tmp/jobman-list-scale-XXXXXX";
  const std::string home = ::mkdtemp(home_template);
  std::fprintf(stderr, "building a store of %d jobs in %s\n", n, home.c_str());
  const auto build_start = std::chrono::steady_clock::now();
  build_store(home, n);
  std::fprintf(stderr, "built in %.1f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - build_start).count());

  std::size_t list_bytes = 0;
  std::size_t json_bytes = 0;
  std::vector<double> list_ms;
  std::vector<double> undriven_ms;
  std::vector<double> json_ms;
  time_run(home, {"list"}, &list_bytes); // warm the page cache once, as a researcher's shell would be
  // Without a supervisor, `list` finds the unfinished jobs nobody drives (one query) and says so on stderr.
  for (int i = 0; i < runs; ++i) {
    undriven_ms.push_back(time_run(home, {"list"}, &list_bytes));
  }
  {
    // The usual case: a supervisor runs (this process holds the daemon lock as `jobman daemon` does), and `list`
    // only probes the lock.
    ::setenv("JOBMAN_HOME", home.c_str(), 1);
    const jobman::core::DaemonPresence daemon;
    for (int i = 0; i < runs; ++i) {
      list_ms.push_back(time_run(home, {"list"}, &list_bytes));
    }
    for (int i = 0; i < std::max(3, runs / 3); ++i) {
      json_ms.push_back(time_run(home, {"list", "--all", "--json"}, &json_bytes));
    }
  }
  std::fprintf(stderr, "list: %zu bytes per run, min %.2f ms, max %.2f ms over %zu runs\n", list_bytes,
               *std::min_element(list_ms.begin(), list_ms.end()), *std::max_element(list_ms.begin(), list_ms.end()),
               list_ms.size());
  std::fprintf(stderr, "list --all --json: %zu bytes per run, min %.1f ms, max %.1f ms over %zu runs\n", json_bytes,
               *std::min_element(json_ms.begin(), json_ms.end()), *std::max_element(json_ms.begin(), json_ms.end()),
               json_ms.size());
  std::fprintf(stderr, "list without a supervisor: min %.2f ms, max %.2f ms over %zu runs\n",
               *std::min_element(undriven_ms.begin(), undriven_ms.end()),
               *std::max_element(undriven_ms.begin(), undriven_ms.end()), undriven_ms.size());
  // `report` over the year: every job's phase changes and attempts read in range scans and accounted.
  std::size_t report_bytes = 0;
  std::vector<double> report_ms;
  for (int i = 0; i < std::max(3, runs / 3); ++i) {
    report_ms.push_back(time_run(home, {"report", "--since", "365d", "--json"}, &report_bytes));
  }
  std::fprintf(stderr, "report --since 365d --json: %zu bytes, min %.1f ms, max %.1f ms over %zu runs\n", report_bytes,
               *std::min_element(report_ms.begin(), report_ms.end()),
               *std::max_element(report_ms.begin(), report_ms.end()), report_ms.size());
  time_dashboard(home, std::min(n, 1000), runs);
  std::printf("list_ms=%.2f list_undriven_ms=%.2f list_all_json_ms=%.1f report_365d_json_ms=%.1f\n", median(list_ms),
              median(undriven_ms), median(json_ms), median(report_ms));
  if (const char* url = std::getenv("LIST_SCALE_POSTGRES_URL"); url != nullptr && *url != '\0') {
    time_postgres(home, url, runs);
  }
  if (std::getenv("LIST_SCALE_KEEP") != nullptr) {
    std::fprintf(stderr, "kept the store: JOBMAN_HOME=%s\n", home.c_str());
  } else {
    std::error_code ec;
    std::filesystem::remove_all(home, ec);
  }
  return 0;
}
