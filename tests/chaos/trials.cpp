#include "trials.hpp"

#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "support/mock_cloud.hpp"
#include "world.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

namespace jobman::chaos {

using domain::Phase;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// What happens at one moment of a trial. Every choice is drawn from the seed when the schedule is made, so a seed
// always means the same events at the same offsets; only the system's own timing differs between runs.
struct Event {
  enum class Kind {
    kill,             // SIGKILL a live supervisor (target picks which).
    start_supervisor, // A fresh supervisor.
    preempt,          // Preempt job `target`'s current slice, whatever its phase.
    faults_on,        // The API answers `rate` of requests with one of `codes`, after `latency_ms`.
    faults_off,
    drops_on, // The proxy cuts `rate` of replies off mid-answer.
    drops_off,
    capacity_off, // The zone's `tier` pool has no chips.
    capacity_on,
    cancel, // `jobman cancel/resume/delete` of job `target`, from another process.
    resume,
    remove,
    create, // A new job.
  };
  double at = 0;
  Kind kind = Kind::kill;
  int target = 0;
  double rate = 0;
  std::vector<int> codes;
  int latency_ms = 0;
  std::string tier;
};

// One job of the trial: what it runs and what was asked of it.
struct JobSpec {
  std::string pricing;     // spot or on-demand.
  std::string accelerator; // v4-8 (1 host) or v4-16 (2 hosts).
  int hosts = 1;
  int steps = 0;
};

struct CommandRun {
  std::string verb;
  int exit_code = 0;
  std::string out;
  std::string err;
  std::int64_t started_ms = 0;
  std::int64_t ended_ms = 0;
};

struct TrackedJob {
  std::int64_t id = 0;
  JobSpec spec;
  std::vector<CommandRun> commands; // In the order they ran (one at a time per job).
};

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Draws the whole schedule: a Poisson process per kind of event, with its parameters.
std::vector<Event> make_schedule(const TrialOptions& o, std::mt19937_64& rng) {
  std::vector<Event> events;
  std::uniform_real_distribution<double> unit(0, 1);
  const auto gaps = [&](double mean, const std::function<void(double)>& add) {
    if (mean <= 0) {
      return;
    }
    std::exponential_distribution<double> gap(1 / mean);
    for (double t = gap(rng); t < o.window_seconds; t += gap(rng)) {
      add(t);
    }
  };
  gaps(o.kill_every, [&](double t) {
    events.push_back({t, Event::Kind::kill, static_cast<int>(rng() % 16), 0, {}, 0, ""});
    // The replacement comes between 0 and 2 s later.
    events.push_back({t + 2 * unit(rng), Event::Kind::start_supervisor, 0, 0, {}, 0, ""});
  });
  gaps(o.preempt_every, [&](double t) {
    events.push_back({t, Event::Kind::preempt, static_cast<int>(rng() % 64), 0, {}, 0, ""});
  });
  // Windows of one kind never overlap: the next starts after the last one ended.
  const auto windows = [&](double mean, Event::Kind on, Event::Kind off, const std::function<void(Event&)>& fill) {
    double free_at = 0;
    gaps(mean, [&](double t) {
      if (t < free_at) {
        return;
      }
      Event start{t, on, 0, 0, {}, 0, ""};
      fill(start);
      const double length = 1 + 3 * unit(rng);
      Event stop = start;
      stop.at = t + length;
      stop.kind = off;
      events.push_back(start);
      events.push_back(stop);
      free_at = stop.at;
    });
  };
  windows(o.faults_every, Event::Kind::faults_on, Event::Kind::faults_off, [&](Event& e) {
    e.rate = 0.1 + 0.3 * unit(rng);
    for (const int code : {429, 500, 503}) {
      if (unit(rng) < 0.6) {
        e.codes.push_back(code);
      }
    }
    if (e.codes.empty()) {
      e.codes.push_back(503);
    }
    const int latencies[] = {0, 0, 20, 100, 300};
    e.latency_ms = latencies[rng() % 5];
  });
  windows(o.drops_every, Event::Kind::drops_on, Event::Kind::drops_off,
          [&](Event& e) { e.rate = 0.05 + 0.25 * unit(rng); });
  windows(o.capacity_every, Event::Kind::capacity_off, Event::Kind::capacity_on,
          [&](Event& e) { e.tier = unit(rng) < 0.7 ? "spot" : "on_demand"; });
  gaps(o.command_every, [&](double t) {
    const double u = unit(rng);
    const auto kind = u < 0.4 ? Event::Kind::cancel : u < 0.8 ? Event::Kind::resume : Event::Kind::remove;
    events.push_back({t, kind, static_cast<int>(rng() % 64), 0, {}, 0, ""});
  });
  gaps(o.create_every, [&](double t) { events.push_back({t, Event::Kind::create, 0, 0, {}, 0, ""}); });
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.at < b.at; });
  return events;
}

JobSpec draw_job(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0, 1);
  JobSpec spec;
  spec.pricing = unit(rng) < 0.75 ? "spot" : "ondemand";
  const bool big = unit(rng) < 0.3;
  spec.accelerator = big ? "v4-16" : "v4-8";
  spec.hosts = big ? 2 : 1;
  const int steps[] = {600, 1000, 1500};
  spec.steps = steps[rng() % 3];
  return spec;
}

std::string job_config(const JobSpec& spec) {
  return "job:\n  name: chaos\n"
         "tpu:\n  accelerator: " +
         spec.accelerator + "\n  zone: " + kZone + "\n  pricing: " + spec.pricing +
         "\n"
         "gcsfuse:\n  bucket_name: chaos-bucket\n  mount_path: ~/bucket\n"
         "command:\n  cmd: |\n    systolic-train --steps " +
         std::to_string(spec.steps) +
         " --step-time-ms 10 --ckpt-dir ~/bucket/ckpt-$JOBMAN_JOB_ID --ckpt-every 20\n"
         "  workers: all\n"
         "recovery:\n  max_preemptions: 1000\n  max_failures: 100\n  max_bad_hardware: 1000\n";
}

std::string job_dir_name(std::int64_t id) {
  char name[16];
  std::snprintf(name, sizeof name, "%06lld", static_cast<long long>(id));
  return name;
}

// Runs each job's commands one after another, in the order the schedule gave them.
class CommandQueue {
public:
  CommandQueue(const ChaosCloud& cloud, TrackedJob& job) : cloud_(cloud), job_(job) {
    thread_ = std::thread([this] { loop(); });
  }
  ~CommandQueue() { drain(); }
  CommandQueue(const CommandQueue&) = delete;
  CommandQueue& operator=(const CommandQueue&) = delete;

  void push(const std::string& verb) {
    std::lock_guard lock(mutex_);
    verbs_.push_back(verb);
    changed_.notify_all();
  }
  // Runs what is queued, then stops.
  void drain() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
      changed_.notify_all();
    }
    if (thread_.joinable()) {
      thread_.join();
    }
  }

private:
  void loop() {
    for (;;) {
      std::string verb;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return closing_ || !verbs_.empty(); });
        if (verbs_.empty()) {
          return;
        }
        verb = verbs_.front();
        verbs_.pop_front();
      }
      CommandRun run;
      run.verb = verb;
      run.started_ms = wall_ms();
      const auto result = cloud_.jobman({verb, std::to_string(job_.id)});
      run.ended_ms = wall_ms();
      run.exit_code = result.exit_code;
      run.out = result.out;
      run.err = result.err;
      std::lock_guard lock(mutex_);
      job_.commands.push_back(std::move(run));
    }
  }

  const ChaosCloud& cloud_;
  TrackedJob& job_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> verbs_;
  bool closing_ = false;
  std::thread thread_;
};

// The checksum each of the attempt's workers printed last ("missing" when none).
std::vector<std::string> checksums(const fs::path& home, std::int64_t id, int attempt, int hosts) {
  std::vector<std::string> sums;
  for (int w = 0; w < hosts; ++w) {
    const auto text = read_text(home / "jobs" / job_dir_name(id) / ("attempt-" + std::to_string(attempt)) /
                                ("worker-" + std::to_string(w) + ".log"));
    const auto at = text.rfind("checksum=");
    sums.push_back(at == std::string::npos ? std::string("missing") : text.substr(at + 9, 16));
  }
  return sums;
}

class Trial {
public:
  explicit Trial(const TrialOptions& options)
      : options_(options), rng_(options.seed), dir_("jobman-chaos-" + std::to_string(options.seed)) {
    report_.seed = options.seed;
  }

  TrialReport run() {
    const auto started = Clock::now();
    try {
      run_phases();
    } catch (const std::exception& e) {
      violation(std::string("harness error: ") + e.what());
    }
    report_.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    report_.passed = report_.violations.empty();
    if (!report_.passed || options_.keep) {
      dir_.keep();
      report_.directory = dir_.path().string();
    }
    return report_;
  }

private:
  void violation(const std::string& what) {
    report_.violations.push_back(what);
    say("seed " + std::to_string(options_.seed) + ": VIOLATION: " + what);
  }
  void count(const std::string& key, std::int64_t n = 1) { report_.counts[key] += n; }

  void run_phases() {
    const auto schedule = make_schedule(options_, rng_);
    cloud_ = std::make_unique<ChaosCloud>(
        dir_.path(),
        test::test_world(2, "  us-central2-b:\n    v4:\n      spot: {chips: " + std::to_string(kSpotChips) +
                                "}\n      on_demand: {chips: " + std::to_string(kOnDemandChips) + "}\n") +
            "hardware: {faulty_fraction: " + std::to_string(options_.faulty_fraction) + "}\n",
        options_.seed);
    if (!cloud_->started()) {
      throw std::runtime_error("the mock cloud did not start");
    }
    for (int i = 0; i < options_.supervisors; ++i) {
      cloud_->start_supervisor();
    }
    for (int i = 0; i < options_.initial_jobs; ++i) {
      create_job();
    }
    inject(schedule);
    settle();
    check_outcomes();
    if (!report_.violations.empty()) {
      // The evidence (logs, attempts, events) before clean removes it; a file changing meanwhile is not worth failing.
      std::error_code ec;
      fs::copy(cloud_->home(), dir_.path() / "home-before-clean", fs::copy_options::recursive, ec);
    }
    clean_and_check();
  }

  void create_job() {
    auto job = std::make_unique<TrackedJob>();
    job->spec = draw_job(rng_);
    const auto config = dir_.path() / ("job-" + std::to_string(jobs_.size() + 1) + ".yaml");
    write_text(config, job_config(job->spec));
    const auto created = cloud_->jobman({"create", config.string()});
    if (created.exit_code != 0) {
      violation("create exited " + std::to_string(created.exit_code) + ": " + created.err);
      return;
    }
    job->id = std::stoll(created.out);
    queues_.push_back(std::make_unique<CommandQueue>(*cloud_, *job));
    jobs_.push_back(std::move(job));
    count("jobs");
  }

  void inject(const std::vector<Event>& schedule) {
    const auto start = Clock::now();
    for (const auto& event : schedule) {
      std::this_thread::sleep_until(
          start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(event.at)));
      apply(event);
    }
    std::this_thread::sleep_until(
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.window_seconds)));
  }

  void apply(const Event& event) {
    switch (event.kind) {
    case Event::Kind::kill: {
      const auto live = cloud_->live_supervisors();
      if (!live.empty() && cloud_->kill_supervisor(live[static_cast<std::size_t>(event.target) % live.size()])) {
        count("supervisor_kills");
      }
      break;
    }
    case Event::Kind::start_supervisor:
      cloud_->start_supervisor();
      count("supervisor_starts");
      break;
    case Event::Kind::preempt: preempt(event.target); break;
    case Event::Kind::faults_on:
      if (cloud_->set_faults(event.rate, event.codes, event.latency_ms) != 200) {
        violation("the mock refused a fault setting");
      }
      count("fault_windows");
      break;
    case Event::Kind::faults_off: cloud_->set_faults(0, {}, 0); break;
    case Event::Kind::drops_on:
      cloud_->proxy().set_drop_rate(event.rate);
      count("drop_windows");
      break;
    case Event::Kind::drops_off: cloud_->proxy().set_drop_rate(0); break;
    case Event::Kind::capacity_off:
      if (cloud_->set_capacity(event.tier, 0) != 200) {
        violation("the mock refused a capacity change");
      }
      count("capacity_cuts");
      break;
    case Event::Kind::capacity_on:
      cloud_->set_capacity(event.tier, event.tier == "spot" ? kSpotChips : kOnDemandChips);
      break;
    case Event::Kind::cancel:
    case Event::Kind::resume:
    case Event::Kind::remove: {
      const auto index = static_cast<std::size_t>(event.target) % jobs_.size();
      const char* verb = event.kind == Event::Kind::cancel   ? "cancel"
                         : event.kind == Event::Kind::resume ? "resume"
                                                             : "delete";
      queues_.at(index)->push(verb);
      count(std::string("command_") + verb);
      break;
    }
    case Event::Kind::create:
      if (static_cast<int>(jobs_.size()) < options_.max_jobs) {
        create_job();
      }
      break;
    }
  }

  // Preempts the slice of one of the jobs holding one (`target` picks which), counted under the job's phase.
  void preempt(int target) {
    std::vector<std::pair<std::string, std::string>> slices; // Node, phase of its job.
    for (const auto& job : jobs_) {
      const auto record = cloud_->store().jobs().find(job->id);
      const auto attempts = cloud_->store().attempts().of(job->id);
      if (record && !attempts.empty() && !attempts.back().node.empty() && !attempts.back().released_ms) {
        slices.emplace_back(attempts.back().node, std::string(domain::to_string(record->phase)));
      }
    }
    if (slices.empty()) {
      count("preemptions_without_slice");
      return;
    }
    const auto& [node, phase] = slices[static_cast<std::size_t>(target) % slices.size()];
    if (cloud_->preempt(node) == 200) {
      count("preemptions");
      count("preemptions_in_" + phase);
    } else {
      count("preemptions_refused");
    }
  }

  // The chaos stops: the API heals, capacity returns, a supervisor runs, queued commands finish.
  void settle() {
    cloud_->set_faults(0, {}, 0);
    cloud_->proxy().set_drop_rate(0);
    cloud_->set_capacity("spot", kSpotChips);
    cloud_->set_capacity("on_demand", kOnDemandChips);
    if (cloud_->live_supervisors().empty()) {
      cloud_->start_supervisor();
    }
    for (auto& queue : queues_) {
      queue->drain();
    }
    count("dropped_connections", cloud_->proxy().dropped());
    count("proxied_connections", cloud_->proxy().connections());
    std::vector<std::string> wait{"wait", "--timeout", std::to_string(options_.settle_seconds)};
    for (const auto& job : jobs_) {
      wait.push_back(std::to_string(job->id));
    }
    const auto waited = cloud_->jobman(wait);
    // 0: all succeeded; 4 or 5: some failed or were cancelled/deleted (checked job by job below); 124: timed out.
    if (waited.exit_code == 124 || waited.exit_code > 5) {
      violation("jobman wait exited " + std::to_string(waited.exit_code) + ": " + waited.out + waited.err);
    }
  }

  // What bad hardware cost a job: each slice found bad (or rejected as known bad), from its request until it was given
  // up; the part of it between the launch and the finding (the steps until the first NaN line, and its detection);
  // and the time the next slice took to come up.
  void count_bad_hardware(const std::vector<domain::AttemptRecord>& attempts,
                          const std::vector<domain::EventRecord>& events) {
    for (std::size_t i = 0; i < attempts.size(); ++i) {
      const auto& a = attempts[i];
      if (!domain::is_bad_slice(a.outcome) || !a.ended_ms) {
        continue;
      }
      count(a.outcome == domain::AttemptOutcome::rejected ? "rejected_slices" : "bad_slices");
      count("bad_hardware_lost_ms", *a.ended_ms - a.started_ms);
      if (i + 1 < attempts.size() && attempts[i + 1].active_ms) {
        count("bad_hardware_reprovision_ms", *attempts[i + 1].active_ms - attempts[i + 1].started_ms);
      }
      // The launch of this attempt, and the finding: events in between name it.
      std::optional<std::int64_t> launched;
      for (const auto& e : events) {
        if (e.ts_ms < a.started_ms || e.ts_ms > *a.ended_ms) {
          continue;
        }
        if (e.kind == "phase" && e.to == Phase::running && !launched) {
          launched = e.ts_ms;
        }
        if (e.kind == "observation" && e.message.starts_with("bad hardware on ") && launched) {
          count("bad_hardware_launch_to_finding_ms", e.ts_ms - *launched);
          break;
        }
      }
    }
  }

  // Every job ended where its history says it must, with the uninterrupted checksum when it trained to the end.
  void check_outcomes() {
    auto& db = cloud_->store();
    std::set<std::string> queued_resources;
    for (const auto& job : jobs_) {
      const auto name = job_dir_name(job->id);
      for (const auto& run : job->commands) {
        const bool refused_resume =
            run.verb == "resume" && run.exit_code == 1 && run.err.find("already succeeded") != std::string::npos;
        if (run.exit_code != 0 && !refused_resume) {
          violation(name + ": `jobman " + run.verb + "` exited " + std::to_string(run.exit_code) + ": " + run.err);
        }
        count(refused_resume ? "commands_refused" : "commands_done");
      }
      const auto record = db.jobs().get(job->id);
      const auto attempts = db.attempts().of(job->id);
      for (const auto& a : attempts) {
        if (!a.queued_resource.empty()) {
          queued_resources.insert(a.queued_resource);
        }
      }
      count("attempts", static_cast<std::int64_t>(attempts.size()));
      count_bad_hardware(attempts, db.events().of(job->id));
      count(std::string("final_") + std::string(domain::to_string(record.phase)));
      // What the commands demand: resume undoes cancel and delete; cancel never undoes delete; a resume refused
      // because the job had succeeded changes nothing.
      std::string last = "none";
      for (const auto& run : job->commands) {
        if (run.exit_code == 0 && !(run.verb == "cancel" && last == "delete")) {
          last = run.verb;
        }
      }
      const bool trained =
          record.phase == Phase::succeeded && checksums(cloud_->home(), job->id, record.attempt, job->spec.hosts) ==
                                                  std::vector<std::string>(static_cast<std::size_t>(job->spec.hosts),
                                                                           uninterrupted_checksum(job->spec.steps));
      if (record.phase == Phase::succeeded && !trained) {
        violation(name + ": SUCCEEDED without the uninterrupted run's checksum " +
                  uninterrupted_checksum(job->spec.steps) + " on every worker of attempt " +
                  std::to_string(record.attempt));
      }
      const bool ok = last == "delete"   ? record.phase == Phase::deleted
                      : last == "cancel" ? record.phase == Phase::cancelled || trained
                                         : trained;
      if (!ok) {
        violation(name + ": ended " + std::string(domain::to_string(record.phase)) + " (" + record.phase_reason +
                  ") after last command '" + last + "'");
      }
      const auto events = db.events().of(job->id);
      for (const auto& [attempt, launches] : launches_per_attempt(events)) {
        if (launches > 1) {
          violation(name + ": attempt " + std::to_string(attempt) + " was launched " + std::to_string(launches) +
                    " times");
        }
      }
      for (const auto& [attempt, starts] : starts_per_attempt(events)) {
        if (starts > 1) {
          violation(name + ": attempt " + std::to_string(attempt) + " was started " + std::to_string(starts) +
                    " times");
        }
      }
    }
    const auto metrics = cloud_->metrics();
    const auto created = metrics.is_object() ? metrics.value("queuedResourcesCreated", std::int64_t{-1}) : -1;
    count("queued_resources_created", created);
    if (created < 0 || created > static_cast<std::int64_t>(queued_resources.size())) {
      violation("the mock created " + std::to_string(created) + " queued resources for " +
                std::to_string(queued_resources.size()) + " named by attempts");
    }
    if (!db.integrity_ok()) {
      violation("PRAGMA integrity_check failed");
    }
  }

  // `clean --all-finished` leaves nothing: no record, directory, queued resource, node, worker process, or process
  // of this home once the supervisors stop.
  void clean_and_check() {
    const auto cleaned = cloud_->jobman({"clean", "--all-finished"});
    if (cleaned.exit_code != 0) {
      violation("clean --all-finished exited " + std::to_string(cleaned.exit_code) + ": " + cleaned.err);
    }
    store::JobFilter all;
    all.include_history = true;
    if (const auto left = cloud_->store().jobs().list(all); !left.empty()) {
      violation(std::to_string(left.size()) + " jobs left in the store after clean");
    }
    std::error_code ec;
    if (fs::exists(cloud_->home() / "jobs", ec) && !fs::is_empty(cloud_->home() / "jobs", ec)) {
      violation("job directories left after clean");
    }
    if (!test::eventually([&] { return cloud_->mock_is_empty(); }, std::chrono::seconds(60))) {
      violation("the mock still holds resources or processes after clean: " + cloud_->metrics().dump());
    }
    if (!cloud_->store().integrity_ok()) {
      violation("PRAGMA integrity_check failed after clean");
    }
    if (const int unclean = cloud_->stop_supervisors(); unclean > 0) {
      violation(std::to_string(unclean) + " supervisors did not exit 0 on SIGTERM");
    }
    std::vector<std::pair<int, std::string>> left;
    if (!test::eventually(
            [&] {
              left = processes_of(cloud_->home());
              return left.empty();
            },
            std::chrono::seconds(10))) {
      for (const auto& [pid, cmdline] : left) {
        violation("process left running: " + std::to_string(pid) + " " + cmdline);
      }
    }
    const auto logs = cloud_->supervisor_logs();
    for (const char* bad : {"database is locked", "AddressSanitizer", "runtime error:"}) {
      if (logs.find(bad) != std::string::npos) {
        violation(std::string("a supervisor log says '") + bad + "'");
      }
    }
  }

  static constexpr int kSpotChips = 64;
  static constexpr int kOnDemandChips = 32;

  TrialOptions options_;
  std::mt19937_64 rng_;
  ScratchDir dir_;
  TrialReport report_;
  std::unique_ptr<ChaosCloud> cloud_;
  std::vector<std::unique_ptr<TrackedJob>> jobs_;
  std::vector<std::unique_ptr<CommandQueue>> queues_;
};

} // namespace

json TrialReport::to_json() const {
  return {{"seed", seed},     {"passed", passed},   {"violations", violations},
          {"counts", counts}, {"seconds", seconds}, {"directory", directory}};
}

TrialReport run_trial(const TrialOptions& options) {
  Trial trial(options);
  return trial.run();
}

std::string rerun_command(const TrialOptions& o) {
  std::ostringstream s;
  s << "jobman-chaos trials --seed " << o.seed << " --trials 1 --jobs " << o.initial_jobs << " --max-jobs "
    << o.max_jobs << " --seconds " << o.window_seconds << " --supervisors " << o.supervisors << " --kill-every "
    << o.kill_every << " --preempt-every " << o.preempt_every << " --faults-every " << o.faults_every
    << " --drops-every " << o.drops_every << " --capacity-every " << o.capacity_every << " --command-every "
    << o.command_every << " --create-every " << o.create_every;
  if (o.faulty_fraction > 0) {
    s << " --faulty-fraction " << o.faulty_fraction;
  }
  return s.str();
}

} // namespace jobman::chaos
