#include "jobman/core/pool.hpp"

#include "jobman/core/jobs.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <charconv>
#include <set>

namespace jobman::core {

using domain::JobKind;

std::vector<std::int64_t> start_workers(store::JobStore& store, const std::vector<config::JobConfig>& configs,
                                        const std::string& user) {
  std::vector<domain::NewJob> rows;
  rows.reserve(configs.size());
  for (const auto& config : configs) {
    auto row = to_new_job(config, user);
    row.kind = JobKind::worker;
    rows.push_back(std::move(row));
  }
  return record_jobs(store, configs, rows);
}

bool idle_released(const domain::JobRecord& worker) {
  return worker.kind == domain::JobKind::worker && worker.phase == domain::Phase::pending &&
         worker.desired == domain::DesiredState::run && worker.phase_reason.starts_with(kIdleReleaseReason);
}

std::vector<std::int64_t> submit_tasks(store::JobStore& store, const std::vector<TaskToSubmit>& tasks,
                                       const std::string& user) {
  std::vector<config::JobConfig> configs;
  std::vector<domain::NewJob> rows;
  configs.reserve(tasks.size());
  rows.reserve(tasks.size());
  for (const auto& task : tasks) {
    auto row = to_new_job(task.config, user);
    row.kind = JobKind::task;
    row.zone = task.zone;
    row.pricing = task.pricing;
    row.priority = task.priority;
    rows.push_back(std::move(row));
    configs.push_back(task.config);
  }
  return record_jobs(store, configs, rows);
}

std::string next_worker_name(const store::JobStore& store, const std::string& accelerator, const std::string& zone) {
  const std::string prefix = accelerator + "-" + zone + "-";
  store::JobFilter filter;
  filter.include_history = true;
  filter.kinds = {JobKind::worker};
  filter.name_glob = prefix + "*";
  long long largest = 0;
  store.jobs().for_each(filter, [&](const domain::JobRecord& job) {
    const std::string_view rest = std::string_view(job.name).substr(prefix.size());
    long long n = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
    if (ec == std::errc() && end == rest.data() + rest.size()) {
      largest = std::max(largest, n);
    }
  });
  std::string number = std::to_string(largest + 1);
  if (number.size() < 5) {
    number.insert(0, 5 - number.size(), '0');
  }
  return prefix + number;
}

std::vector<domain::JobRecord> status_records(const store::JobStore& store, JobKind kind, std::int64_t now_ms) {
  store::JobFilter filter;
  filter.kinds = {kind};
  filter.now_ms = now_ms;
  return store.jobs().list(filter);
}

namespace {

// An index as `status` prints it: 1 to 5 digits, no leading zero.
std::optional<std::size_t> parse_index(const std::string& ref) {
  if (ref.empty() || ref.size() > 5 || ref[0] == '0' ||
      !std::all_of(ref.begin(), ref.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return static_cast<std::size_t>(std::stoul(ref));
}

std::string noun(JobKind kind) {
  return std::string(domain::to_string(kind));
}

} // namespace

std::vector<domain::JobRecord> select_records(const store::JobStore& store, JobKind kind, const Selection& selection) {
  if (selection.empty()) {
    throw UsageError("name the " + noun(kind) +
                     "s: give references (a name, an index from `jobman status`, an id) "
                     "or --all, --accelerator, --zone" +
                     (kind == JobKind::task ? ", --pattern" : ""));
  }
  const auto shown = status_records(store, kind);
  std::vector<domain::JobRecord> chosen;
  std::set<std::int64_t> taken;
  const auto take = [&](const domain::JobRecord& job) {
    if (taken.insert(job.id).second) {
      chosen.push_back(job);
    }
  };
  std::vector<std::string> problems;
  for (const auto& ref : selection.refs) {
    if (const auto index = parse_index(ref)) {
      if (*index >= 1 && *index <= shown.size()) {
        take(shown[*index - 1]);
      } else {
        problems.push_back(ref + " (`jobman status` shows " + std::to_string(shown.size()) + " " + noun(kind) +
                           (shown.size() == 1 ? "" : "s") + ")");
      }
      continue;
    }
    if (const auto id = domain::parse_job_id(ref)) {
      if (const auto job = store.jobs().find(*id); job && job->kind == kind) {
        take(*job);
      } else {
        problems.push_back(ref + " (no " + noun(kind) + " has this id)");
      }
      continue;
    }
    store::JobFilter filter;
    filter.include_history = true;
    filter.kinds = {kind};
    filter.name_glob = ref; // Narrows the scan; the equality below decides.
    std::vector<domain::JobRecord> named;
    store.jobs().for_each(filter, [&](const domain::JobRecord& job) {
      if (job.name == ref) {
        named.push_back(job);
      }
    });
    // A name reused over time means its live record.
    std::vector<domain::JobRecord> live;
    std::copy_if(named.begin(), named.end(), std::back_inserter(live),
                 [](const auto& job) { return !domain::is_terminal(job.phase); });
    const auto& candidates = live.empty() ? named : live;
    if (candidates.size() == 1) {
      take(candidates.front());
    } else if (candidates.empty()) {
      problems.push_back(ref + " (no " + noun(kind) + " has this name)");
    } else {
      std::string problem = ref + " (" + std::to_string(candidates.size()) + " " + noun(kind) + "s have this name: ";
      for (std::size_t i = 0; i < candidates.size(); ++i) {
        problem += (i == 0 ? "" : ", ") + domain::format_job_id(candidates[i].id);
      }
      problem += "; give the id)";
      problems.push_back(std::move(problem));
    }
  }
  if (!problems.empty()) {
    std::string message = "no such " + noun(kind) + ": " + problems.front();
    for (std::size_t i = 1; i < problems.size(); ++i) {
      message += "; " + problems[i];
    }
    throw domain::NoSuchJobError(message);
  }
  if (selection.all || !selection.accelerator.empty() || !selection.zone.empty() || !selection.pattern.empty()) {
    for (const auto& job : shown) {
      if ((!selection.accelerator.empty() && job.accelerator != selection.accelerator) ||
          (!selection.zone.empty() && job.zone != selection.zone) ||
          (!selection.pattern.empty() && !util::glob_match(selection.pattern, job.name))) {
        continue;
      }
      take(job);
    }
  }
  return chosen;
}

} // namespace jobman::core
