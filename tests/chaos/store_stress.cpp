#include "store_stress.hpp"

#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "support/mock_cloud.hpp"
#include "support/postgres_server.hpp"
#include "world.hpp"

#include <algorithm>
#include <fstream>
#include <random>
#include <set>
#include <thread>

namespace jobman::chaos {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// What the clients did, shared between their threads.
struct Ledger {
  std::mutex mutex;
  std::vector<std::int64_t> created;                  // Every id `create` printed, duplicates included.
  std::map<std::string, std::vector<double>> latency; // Command -> milliseconds of each run.
  std::vector<std::string> violations;
  std::int64_t refused = 0; // Resumes of succeeded jobs, refused as documented.
  // While the server restarts (from, to; ms since the epoch; to is 0 until it is back), a command may fail for want
  // of it, as documented (exit 1, "cannot connect"): counted, not a violation.
  std::atomic<std::int64_t> outage_from{0};
  std::atomic<std::int64_t> outage_to{0};
  std::int64_t outage_failures = 0;
  std::int64_t listed_duplicates = 0;

  std::int64_t pick(std::mt19937_64& rng) {
    std::lock_guard lock(mutex);
    return created.empty() ? 0 : created[rng() % created.size()];
  }
  void violation(const std::string& what) {
    std::lock_guard lock(mutex);
    if (violations.size() < 50) {
      say("VIOLATION: " + what);
    }
    violations.push_back(what);
  }
};

// Text that would mean the store failed a command, whatever its exit code.
bool mentions_store_trouble(const std::string& text) {
  return text.find("locked") != std::string::npos || text.find("busy") != std::string::npos ||
         text.find("malformed") != std::string::npos || text.find("SQLITE") != std::string::npos ||
         text.find("deadlock") != std::string::npos || text.find("could not serialize") != std::string::npos;
}

// The process id in a lease owner ("host:pid:start"), or 0.
pid_t pid_of_owner(const std::string& owner) {
  const auto first = owner.find(':');
  const auto second = owner.find(':', first + 1);
  if (first == std::string::npos || second == std::string::npos) {
    return 0;
  }
  return static_cast<pid_t>(util::parse_int(owner.substr(first + 1, second - first - 1)).value_or(0));
}

// SIGKILLs a random supervisor every `mean_seconds` on average and starts another on the same machine at once, until
// `stop`.
void kill_supervisors(ChaosCloud& cloud, double mean_seconds, std::uint64_t seed, const std::string& lease_ttl,
                      const std::stop_token& stop, int& kills) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(1.0 / mean_seconds);
  std::mutex m;
  std::condition_variable_any cv;
  while (true) {
    std::unique_lock lock(m);
    const auto wait = std::chrono::duration<double>(gap(rng));
    if (cv.wait_for(lock, stop, std::chrono::duration_cast<std::chrono::milliseconds>(wait), [] { return false; }) ||
        stop.stop_requested()) {
      return;
    }
    const auto live = cloud.live_supervisors();
    if (live.empty()) {
      continue;
    }
    const auto slot = live[rng() % live.size()];
    const auto machine = cloud.machine_of(slot);
    if (cloud.kill_supervisor(slot)) {
      ++kills;
      say("killed supervisor " + std::to_string(slot) + " (" + machine + ") with SIGKILL");
      cloud.start_supervisor("200ms", lease_ttl, machine);
    }
  }
}

void client(const ChaosCloud& cloud, const fs::path& config, std::uint64_t seed, Clock::time_point deadline,
            Ledger& ledger) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  while (Clock::now() < deadline) {
    const double u = unit(rng);
    const auto id = ledger.pick(rng);
    std::vector<std::string> args;
    if (u < 0.2 || id == 0) {
      args = {"create", config.string()};
    } else if (u < 0.35) {
      args = {"list"};
    } else if (u < 0.5) {
      args = {"list", "--all", "--json"};
    } else if (u < 0.7) {
      args = {"show", std::to_string(id), unit(rng) < 0.5 ? "--json" : "--events"};
    } else if (u < 0.8) {
      args = {"cancel", std::to_string(id), "--no-wait"};
    } else if (u < 0.92) {
      args = {"resume", std::to_string(id)};
    } else {
      args = {"delete", std::to_string(id), "--no-wait"};
    }
    const auto started = Clock::now();
    const auto started_ms = util::now_ms();
    const auto result = cloud.jobman(args);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    const std::string command = args[0] + (args.back() == "--json" && args[0] == "list" ? " --json" : "");
    {
      std::lock_guard lock(ledger.mutex);
      ledger.latency[command].push_back(ms);
    }
    const bool refused_resume =
        args[0] == "resume" && result.exit_code == 1 && result.err.find("has already succeeded") != std::string::npos;
    const auto outage_from = ledger.outage_from.load();
    const auto outage_to = ledger.outage_to.load();
    const bool in_outage =
        outage_from > 0 && util::now_ms() >= outage_from && (outage_to == 0 || started_ms <= outage_to + 2000);
    const bool server_away = result.exit_code == 1 && (result.err.find("cannot connect") != std::string::npos ||
                                                       result.err.find("lost the connection") != std::string::npos ||
                                                       result.err.find("cannot be reached") != std::string::npos ||
                                                       result.err.find("cannot reconnect") != std::string::npos);
    if (refused_resume) {
      std::lock_guard lock(ledger.mutex);
      ++ledger.refused;
    } else if (in_outage && server_away) {
      std::lock_guard lock(ledger.mutex);
      ++ledger.outage_failures;
      continue;
    } else if (result.exit_code != 0) {
      ledger.violation("`jobman " + args[0] + " " + (args.size() > 1 ? args[1] : "") + "` exited " +
                       std::to_string(result.exit_code) + ": " + result.err);
      continue;
    }
    if (mentions_store_trouble(result.err)) {
      ledger.violation("`jobman " + args[0] + "` said: " + result.err);
    }
    if (args[0] == "create") {
      std::lock_guard lock(ledger.mutex);
      ledger.created.push_back(std::stoll(result.out));
    } else if (command == "list --json") {
      const auto listed = json::parse(result.out, nullptr, false);
      std::set<std::int64_t> seen;
      for (const auto& job : listed.is_array() ? listed : json::array()) {
        if (!seen.insert(job.value("id", std::int64_t{0})).second) {
          std::lock_guard lock(ledger.mutex);
          ++ledger.listed_duplicates;
        }
      }
      if (!listed.is_array()) {
        ledger.violation("`jobman list --all --json` printed no JSON array");
      }
    }
  }
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1));
  return values[index];
}

} // namespace

bool run_store_stress(const StoreStressOptions& options) {
  ScratchDir dir("jobman-store-stress");
  std::unique_ptr<test::PostgresServer> server;
  if (options.postgres) {
    try {
      server = std::make_unique<test::PostgresServer>();
    } catch (const std::exception& e) {
      say(std::string("the PostgreSQL server did not start: ") + e.what());
      return false;
    }
  }
  ChaosCloud cloud(dir.path(),
                   test::test_world(2, "  us-central2-b:\n    v4:\n      spot: {chips: 100000, quota: 100000}\n"
                                       "      on_demand: {chips: 100000, quota: 100000}\n"),
                   options.seed);
  if (!cloud.started()) {
    say("the mock cloud did not start");
    dir.keep();
    return false;
  }
  const auto config = dir.path() / "job.yaml";
  write_text(config, std::string("job:\n  name: stress\ntpu:\n  accelerator: v4-8\n  zone: ") + kZone +
                         "\n  pricing: ondemand\ncommand:\n  cmd: echo trained\n");
  if (server) {
    cloud.use_store(server->admin_url());
  }
  // Without kills, the default lease (15 s): no supervisor dies, so no job may ever change hands. With them, 2 s, so
  // that the jobs of a killed one are taken over soon.
  const std::string lease_ttl = options.kill_every > 0 ? "2s" : "15s";
  for (int i = 0; i < options.supervisors; ++i) {
    cloud.start_supervisor("200ms", lease_ttl, server ? "machine-" + std::to_string(i) : "");
  }

  Ledger ledger;
  const auto started = Clock::now();
  const auto deadline =
      started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.seconds));
  int kills = 0;
  int restarts = 0;
  {
    std::jthread killer;
    if (options.kill_every > 0) {
      killer = std::jthread([&](const std::stop_token& stop) {
        kill_supervisors(cloud, options.kill_every, options.seed, lease_ttl, stop, kills);
      });
    }
    std::jthread restarter;
    if (server && options.restart_server_at > 0) {
      restarter = std::jthread([&](const std::stop_token& stop) {
        std::mutex m;
        std::condition_variable_any cv;
        std::unique_lock lock(m);
        const auto at = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::duration<double>(options.restart_server_at));
        if (!cv.wait_for(lock, stop, at, [] { return false; }) && !stop.stop_requested()) {
          say("restarting the PostgreSQL server (pg_ctl restart -m fast)");
          ledger.outage_from = util::now_ms();
          server->restart_fast();
          ledger.outage_to = util::now_ms();
          ++restarts;
          say("the PostgreSQL server is back");
        }
      });
    }
    std::vector<std::jthread> clients;
    clients.reserve(static_cast<std::size_t>(options.processes));
    for (int i = 0; i < options.processes; ++i) {
      clients.emplace_back(
          [&, i] { client(cloud, config, options.seed * 1000 + static_cast<std::uint64_t>(i), deadline, ledger); });
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  if (options.drain_seconds > 0) {
    // Every job ends (they echo one line), and then nothing of theirs may be left in the cloud. A cancelled job keeps
    // its slice (for a resume): those are deleted, as a user done with them would, as they come.
    say("draining: waiting for every job to end, deleting the cancelled ones");
    const auto drained_by = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(options.drain_seconds));
    store::JobFilter all;
    all.include_history = true;
    std::set<std::int64_t> deleted;
    std::size_t unfinished = 0;
    do {
      unfinished = 0;
      std::vector<std::string> to_delete = {"delete", "--no-wait"};
      for (const auto& job : cloud.store().jobs().list(all)) {
        if (job.phase == domain::Phase::cancelled && deleted.insert(job.id).second) {
          to_delete.push_back(std::to_string(job.id));
        }
        unfinished += domain::is_terminal(job.phase) && job.phase != domain::Phase::cancelled ? 0 : 1;
      }
      if (to_delete.size() > 2) {
        if (const auto result = cloud.jobman(to_delete); result.exit_code != 0) {
          ledger.violation("`jobman delete` of cancelled jobs exited " + std::to_string(result.exit_code) + ": " +
                           result.err);
        }
      }
      if (unfinished > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
    } while (unfinished > 0 && Clock::now() < drained_by);
    if (unfinished > 0) {
      ledger.violation(std::to_string(unfinished) + " jobs had not ended " + std::to_string(options.drain_seconds) +
                       " s after the clients stopped");
    } else {
      bool empty = cloud.mock_is_empty();
      for (int i = 0; i < 60 && !empty; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        empty = cloud.mock_is_empty();
      }
      if (!empty) {
        ledger.violation("every job ended, and the cloud still holds a queued resource, a node or a workload");
      }
    }
  }

  // No job lost, none duplicated: the ids printed are unique, and the store holds exactly those.
  auto& db = cloud.store();
  std::set<std::int64_t> unique(ledger.created.begin(), ledger.created.end());
  if (unique.size() != ledger.created.size()) {
    ledger.violation(std::to_string(ledger.created.size() - unique.size()) + " ids were handed out twice");
  }
  store::JobFilter all;
  all.include_history = true;
  std::set<std::int64_t> stored;
  for (const auto& job : db.jobs().list(all)) {
    stored.insert(job.id);
  }
  if (stored != unique) {
    ledger.violation("the store holds " + std::to_string(stored.size()) + " jobs; creates printed " +
                     std::to_string(unique.size()));
  }
  if (ledger.listed_duplicates > 0) {
    ledger.violation("list --json showed a job twice " + std::to_string(ledger.listed_duplicates) + " times");
  }
  // No job driven by two supervisors at once. A job changes hands when its driver let it go, which happens when the
  // job finishes, when its driver was killed (its lease then expires), or when its driver, cut off from the store
  // longer than its lease (the server's restart), found the lease gone and said so in the job's events (at any time
  // after its own adoption: it learns it on its next renewal, often after the other's adoption). Another
  // supervisor's adoption without any of these means two drove it. And each attempt is started and launched once.
  const auto killed = cloud.killed_at_ms();
  std::int64_t adopted = 0;
  std::int64_t launched = 0;
  for (const auto id : stored) {
    const auto events = db.events().of(id);
    std::string driver;
    bool let_go = true;
    std::size_t driven_since = 0; // The index of the current driver's adoption event.
    // Whether `owner` recorded the loss of its lease after event `since`.
    const auto lost_lease_after = [&](const std::string& owner, std::size_t since) {
      const std::string said = "supervisor " + owner + " lost its lease";
      return std::any_of(events.begin() + static_cast<std::ptrdiff_t>(since), events.end(),
                         [&](const auto& later) { return later.message.starts_with(said); });
    };
    for (std::size_t i = 0; i < events.size(); ++i) {
      const auto& e = events[i];
      if (e.message.starts_with("driven by supervisor ")) {
        ++adopted;
        const auto owner = e.message.substr(std::string_view("driven by supervisor ").size());
        const auto death = killed.find(pid_of_owner(driver));
        if ((death != killed.end() && death->second <= e.ts_ms) ||
            (!let_go && lost_lease_after(driver, driven_since))) {
          let_go = true;
        }
        if (!let_go && owner != driver) {
          ledger.violation("job " + std::to_string(id) + " was adopted by " + owner + " while " + driver + " drove it");
        }
        driver = owner;
        driven_since = i;
        let_go = false;
      } else if (e.kind == "phase" && e.to && domain::is_terminal(*e.to)) {
        let_go = true;
      }
    }
    for (const auto& [attempt, launches] : launches_per_attempt(events)) {
      launched += launches;
      if (launches > 1) {
        ledger.violation("job " + std::to_string(id) + " attempt " + std::to_string(attempt) + " launched " +
                         std::to_string(launches) + " times");
      }
    }
    for (const auto& [attempt, starts] : starts_per_attempt(events)) {
      if (starts > 1) {
        ledger.violation("job " + std::to_string(id) + " attempt " + std::to_string(attempt) + " started " +
                         std::to_string(starts) + " times");
      }
    }
  }
  if (!db.on_postgres() && !db.integrity_ok()) {
    ledger.violation("PRAGMA integrity_check failed");
  }
  if (cloud.live_supervisors().size() != static_cast<std::size_t>(options.supervisors)) {
    ledger.violation("a supervisor died");
  }
  if (const int unclean = cloud.stop_supervisors(); unclean > 0) {
    ledger.violation(std::to_string(unclean) + " supervisors did not exit 0 on SIGTERM");
  }
  const auto logs = cloud.supervisor_logs();
  if (mentions_store_trouble(logs)) {
    ledger.violation("a supervisor's log mentions store trouble (locked, busy, malformed)");
  }

  json figures;
  std::int64_t commands = 0;
  for (const auto& [command, values] : ledger.latency) {
    commands += static_cast<std::int64_t>(values.size());
    figures["latency_ms"][command] = {{"runs", values.size()},
                                      {"p50", percentile(values, 0.5)},
                                      {"p99", percentile(values, 0.99)},
                                      {"max", percentile(values, 1.0)}};
  }
  figures["processes"] = options.processes;
  figures["supervisors"] = options.supervisors;
  figures["seconds"] = elapsed;
  figures["commands"] = commands;
  figures["commands_per_second"] = static_cast<double>(commands) / elapsed;
  figures["jobs_created"] = ledger.created.size();
  figures["jobs_adopted"] = adopted;
  figures["attempts_launched"] = launched;
  figures["resumes_refused"] = ledger.refused;
  figures["store"] = options.postgres ? "postgresql" : "sqlite";
  figures["supervisors_killed"] = kills;
  figures["server_restarts"] = restarts;
  figures["commands_failed_while_the_server_restarted"] = ledger.outage_failures;
  figures["violations"] = ledger.violations;
  say("store stress: " + figures.dump());
  if (!options.json_file.empty()) {
    std::ofstream(options.json_file) << figures.dump(2) << '\n';
  }
  if (!ledger.violations.empty()) {
    dir.keep();
    // The store goes with its server: its jobs' timelines are kept beside the supervisors' logs.
    std::ofstream timelines(dir.path() / "events.txt");
    for (const auto id : stored) {
      const auto job = db.jobs().find(id);
      timelines << "job " << id << " " << (job ? std::string(domain::to_string(job->phase)) : "removed") << '\n';
      for (const auto& e : db.events().of(id)) {
        timelines << "  " << e.ts_ms << " " << e.kind << " " << e.message << '\n';
      }
    }
    say("kept " + dir.path().string());
  }
  return ledger.violations.empty();
}

} // namespace jobman::chaos
