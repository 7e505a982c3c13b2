#include "jobman/store/jobs.hpp"

#include "jobman/config/loader.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/access.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/rivals.hpp"
#include "jobman/util/digest.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace jobman::core {

using domain::DesiredState;
using domain::Phase;

std::string store_location() {
  return config::store_location(config::load_settings());
}

store::JobStore open_store() {
  return store::JobStore::open_location(store_location());
}

std::string store_key(const std::string& location) {
  if (!util::is_postgres_url(location)) {
    std::error_code ec;
    const auto given = std::filesystem::weakly_canonical(std::filesystem::absolute(location), ec);
    if (given == std::filesystem::weakly_canonical(config::jobman_home() / "jobman.db", ec)) {
      return "";
    }
    return util::hex_digits(util::fnv1a(given.string()), 12);
  }
  // The server and database (and parameters such as a search path) name the store; who connects does not.
  std::string where = location;
  if (const auto scheme = where.find("://"); scheme != std::string::npos) {
    const auto at = where.find('@', scheme + 3);
    if (at != std::string::npos && at < where.find('/', scheme + 3)) {
      where.erase(scheme + 3, at + 1 - (scheme + 3));
    }
    where.erase(0, scheme + 3);
  }
  return util::hex_digits(util::fnv1a(where), 12);
}

std::size_t link_job_directories(const std::filesystem::path& from, const std::filesystem::path& to) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(from, ec) || fs::equivalent(from, to, ec)) {
    return 0;
  }
  std::size_t jobs = 0;
  for (const auto& job : fs::directory_iterator(from)) {
    if (!job.is_directory()) {
      continue;
    }
    ++jobs;
    for (auto it = fs::recursive_directory_iterator(job.path()); it != fs::recursive_directory_iterator(); ++it) {
      const auto target = to / fs::relative(it->path(), from);
      if (it->is_directory()) {
        util::ensure_directory(target, 0700);
      } else if (it->is_regular_file() && !fs::exists(target, ec)) {
        util::ensure_directory(target.parent_path(), 0700);
        fs::create_hard_link(it->path(), target, ec);
        if (ec) {
          fs::copy_file(it->path(), target, ec); // Another file system: a copy.
        }
        if (ec) {
          throw Error("cannot link " + it->path().string() + " to " + target.string() + ": " + ec.message());
        }
      }
    }
  }
  return jobs;
}

std::filesystem::path jobs_root(const std::string& location) {
  const auto key = store_key(location);
  return key.empty() ? config::jobman_home() / "jobs" : config::jobman_home() / "stores" / key / "jobs";
}

std::filesystem::path job_directory(std::int64_t id) {
  return jobs_root(store_location()) / domain::format_job_id(id);
}

void remove_job_directory(std::int64_t id) {
  const auto dir = job_directory(id);
  std::error_code ec;
  // remove_all stops at the first entry that vanished under it (ENOENT): another remover is at work on the same
  // tree. Going again until the tree is gone finishes the job; both removers make progress, so this ends soon.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    std::filesystem::remove_all(dir, ec);
    if (!ec) {
      return;
    }
  } while (ec == std::errc::no_such_file_or_directory && std::chrono::steady_clock::now() < deadline);
  std::error_code exists_ec;
  if (std::filesystem::exists(dir, exists_ec)) {
    throw Error("cannot remove " + dir.string() + ": " + ec.message());
  }
}

std::filesystem::path attempt_directory(std::int64_t id, int attempt) {
  return job_directory(id) / ("attempt-" + std::to_string(attempt));
}

remote::WorkloadId workload_id(std::int64_t id, int attempt) {
  return {domain::format_job_id(id), attempt};
}

std::string sweep_label(const config::JobConfig& config) {
  std::string label;
  for (const auto& [key, value] : config.sweep_point) {
    if (!label.empty()) {
      label += ',';
    }
    label += key;
    label += '=';
    label += value;
  }
  return label;
}

config::JobConfig recorded_config(const domain::JobRecord& job) {
  config::LoadOptions options;
  options.recorded = true;
  options.zone_optional = job.kind == domain::JobKind::task; // A task for any zone records none.
  return config::parse_job_configs(job.config_yaml, "config snapshot of job " + domain::format_job_id(job.id), options)
      .front();
}

namespace {

std::filesystem::path environment_path(std::int64_t id) {
  return job_directory(id) / "environment";
}

} // namespace

void save_job_environment(std::int64_t id, const std::map<std::string, std::string>& values) {
  if (values.empty()) {
    return;
  }
  util::ensure_directory(job_directory(id), 0700);
  util::write_file_atomic(environment_path(id), nlohmann::json(values).dump() + "\n", 0600);
}

std::map<std::string, std::string> job_environment(std::int64_t id) {
  const auto path = environment_path(id);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return {};
  }
  try {
    return nlohmann::json::parse(util::read_file(path)).get<std::map<std::string, std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": not the environment jobman recorded: " + e.what());
  }
}

std::vector<std::string> expand_recorded_environment(std::int64_t id, config::JobConfig& config) {
  if (config.environment_calls.empty()) {
    return {};
  }
  const auto recorded = job_environment(id);
  return config::expand_environment(config, [&](const std::string& name) -> std::optional<std::string> {
    if (auto it = recorded.find(name); it != recorded.end()) {
      return it->second;
    }
    if (const char* value = std::getenv(name.c_str()); value != nullptr) {
      return std::string(value);
    }
    return std::nullopt;
  });
}

domain::NewJob to_new_job(const config::JobConfig& config, const std::string& user) {
  domain::NewJob job;
  job.name = config.job.name;
  job.user = user;
  job.accelerator = config.tpu.accelerator.name;
  job.zone = config.tpu.zone;
  job.pricing = config.tpu.pricing;
  job.tpu_name = config.tpu.name;
  job.hosts = config.tpu.accelerator.hosts * config.tpu.slices; // Every slice's hosts.
  job.config_path = config.source_path.empty()
                        ? std::string()
                        : std::filesystem::absolute(config.source_path).lexically_normal().string();
  job.sweep_label = sweep_label(config);
  job.config_yaml = config.resolved_yaml;
  job.max_failures = config.recovery.max_failures;
  return job;
}

std::vector<std::int64_t> create_jobs(store::JobStore& store, const std::vector<config::JobConfig>& configs,
                                      const std::string& user) {
  std::vector<domain::NewJob> jobs;
  jobs.reserve(configs.size());
  for (const auto& config : configs) {
    jobs.push_back(to_new_job(config, user));
  }
  return record_jobs(store, configs, jobs);
}

std::vector<std::int64_t> record_jobs(store::JobStore& store, const std::vector<config::JobConfig>& configs,
                                      const std::vector<domain::NewJob>& jobs) {
  // The values of the environment variables the snapshots call for are written beside each job before anyone can
  // see it, so a supervisor that takes it up at once finds them.
  return store.jobs().create(jobs, [&](const std::vector<std::int64_t>& ids) {
    try {
      for (std::size_t i = 0; i < ids.size(); ++i) {
        save_job_environment(ids[i], configs[i].environment);
      }
    } catch (...) {
      for (const auto id : ids) {
        std::error_code ec;
        std::filesystem::remove(environment_path(id), ec);
      }
      throw;
    }
  });
}

std::string_view to_string(Request request) {
  switch (request) {
  case Request::resume: return "resume";
  case Request::cancel: return "cancel";
  case Request::remove: return "delete";
  case Request::clean: return "clean";
  }
  return "?";
}

namespace {

DesiredState desired_for(Request request) {
  switch (request) {
  case Request::resume: return DesiredState::run;
  case Request::cancel: return DesiredState::stop;
  case Request::remove: return DesiredState::remove;
  case Request::clean: return DesiredState::clean;
  }
  return DesiredState::run;
}

// A job has something in the cloud while one of its attempts holds a slice not yet released, or while it may be
// requesting one (not yet finished); only the supervisor, under the job's lease, may touch that.
bool has_cloud_footprint(store::JobStore& store, const domain::JobRecord& job) {
  if (job.kind == domain::JobKind::task) {
    // A task has something running only while it holds a worker's slice; queued or done, it has nothing anywhere.
    return job.worker_id.has_value();
  }
  if (job.attempt == 0) {
    return false;
  }
  if (!domain::is_terminal(job.phase)) {
    return true;
  }
  const auto attempts = store.attempts().of(job.id);
  if (std::any_of(attempts.begin(), attempts.end(), [](const auto& a) { return !a.released_ms; })) {
    return true;
  }
  // A first-ready race's rivals are slices too, until their deletion is confirmed.
  const auto rivals = store.rivals().of(job.id);
  return std::any_of(rivals.begin(), rivals.end(), [](const auto& r) { return !r.released_ms; });
}

// How far along the stop/delete/clean ladder a desired state is.
int teardown_rank(DesiredState desired) {
  switch (desired) {
  case DesiredState::run: return 0;
  case DesiredState::stop: return 1;
  case DesiredState::remove: return 2;
  case DesiredState::clean: return 3;
  }
  return 0;
}

RequestOutcome outcome(const domain::JobRecord& job, bool changed, bool done, std::string message) {
  return RequestOutcome{job.id, changed, done, std::move(message), std::string(domain::to_string(job.phase))};
}

RequestOutcome resume(store::JobStore& store, const domain::JobRecord& job) {
  if (job.phase == Phase::succeeded && job.kind != domain::JobKind::task) {
    throw Error("job " + domain::format_job_id(job.id) + " has already succeeded; create it again to rerun it");
  }
  if (job.desired == DesiredState::run && !domain::is_terminal(job.phase)) {
    return outcome(job, false, false, "already " + std::string(domain::to_string(job.phase)));
  }
  const bool task = job.kind == domain::JobKind::task;
  store.jobs().set_desired_state(job.id, DesiredState::run,
                                 std::string(task ? "requeue" : "resume") + " requested by " + store.identity());
  if (domain::is_terminal(job.phase)) {
    auto change = domain::change_to(Phase::pending, task ? "requeued by the user" : "resumed by the user");
    if (job.phase == Phase::failed || (task && job.phase == Phase::succeeded)) {
      // A fresh start: the budgets count from here (the events keep what was spent).
      change.add_failures = -job.failures;
      change.add_preemptions = -job.preemptions;
      change.reason += "; failure and preemption budgets reset";
    }
    store.jobs().transition(job.id, job.phase, change);
  }
  if (task) {
    return outcome(store.jobs().get(job.id), true, true, "requeued");
  }
  return outcome(store.jobs().get(job.id), true, false, "resume requested");
}

RequestOutcome tear_down(store::JobStore& store, const domain::JobRecord& job, Request request) {
  const DesiredState desired = desired_for(request);
  const bool already_asked = teardown_rank(job.desired) >= teardown_rank(desired);
  const std::string verb(to_string(request));
  if (!already_asked) {
    store.jobs().set_desired_state(job.id, desired, verb + " requested by " + store.identity());
  }
  if (has_cloud_footprint(store, job)) {
    // Stopping the workload and releasing the slice is the supervisor's work, under the job's lease.
    return outcome(store.jobs().get(job.id), !already_asked, false, verb + " requested");
  }
  switch (request) {
  case Request::cancel:
    if (!domain::is_terminal(job.phase)) {
      const bool task = job.kind == domain::JobKind::task;
      if (store.jobs().transition(
              job.id, job.phase,
              domain::change_to(Phase::cancelled,
                                task ? "paused while queued" : "cancelled before a slice was requested"))) {
        return outcome(store.jobs().get(job.id), true, true, task ? "paused" : "cancelled");
      }
      // A supervisor moved the job meanwhile; it reads the desired state.
      return outcome(store.jobs().get(job.id), true, false, verb + " requested");
    }
    return outcome(job, !already_asked, true, "already " + std::string(domain::to_string(job.phase)));
  case Request::remove:
    if (job.phase != Phase::deleted) {
      if (store.jobs().transition(job.id, job.phase,
                                  domain::change_to(Phase::deleted, job.kind == domain::JobKind::task
                                                                        ? "deleted while queued"
                                                                        : "deleted before a slice was requested"))) {
        return outcome(store.jobs().get(job.id), true, true, "deleted");
      }
      return outcome(store.jobs().get(job.id), true, false, verb + " requested");
    }
    return outcome(job, !already_asked, true, "already DELETED");
  case Request::clean: {
    // A supervisor may carry out the same clean meanwhile (it saw the desired state set above): gone is gone.
    remove_job_directory(job.id);
    store.jobs().remove_if_present(job.id);
    RequestOutcome removed{job.id, true, true, "removed", ""};
    return removed;
  }
  case Request::resume: break;
  }
  return outcome(job, false, false, "");
}

} // namespace

RequestOutcome apply_request(store::JobStore& store, std::int64_t id, Request request) {
  const domain::JobRecord job = store.jobs().get(id);
  if (!store.access().may_act_on(job.user)) {
    throw Error(std::string(job.kind == domain::JobKind::task ? "task " : "job ") + domain::format_job_id(job.id) +
                " is " + job.user + "'s: " + store.identity() + " may not " + std::string(to_string(request)) +
                " it (" + job.user + " or an admin may; see `jobman store admins`)");
  }
  if (request == Request::resume) {
    return resume(store, job);
  }
  return tear_down(store, job, request);
}

} // namespace jobman::core
