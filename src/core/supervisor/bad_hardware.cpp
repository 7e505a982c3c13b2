// The job driver and bad hardware: a slice whose workers print non-finite losses (or the framework messages for
// them), fail the preflight, or land on a machine found bad before is replaced; the attempt ends as `bad-hardware`,
// spending the bad-hardware budget, never the failure budget, and the machine is remembered in the store.
#include "jobman/store/bad_hardware.hpp"

#include "job_driver.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

namespace fs = std::filesystem;
using domain::AttemptOutcome;
using domain::DesiredState;
using domain::Phase;

namespace {

// How much of the end of a worker's log is read again for signs of bad hardware (after a restart, or once the
// workload has ended): enough for the lines of a run's last minutes.
constexpr std::uint64_t kScanTailBytes = 1 << 20;

} // namespace

std::shared_ptr<const util::LinePatterns> JobDriver::hardware_patterns(const config::JobConfig& config) {
  const auto patterns = config::bad_hardware_patterns(config.recovery);
  if (patterns.empty()) {
    return nullptr;
  }
  const std::string key = util::join(patterns, "\n");
  if (auto shared = line_patterns_[key].lock()) {
    return shared;
  }
  auto compiled = std::make_shared<const util::LinePatterns>(patterns);
  line_patterns_[key] = compiled;
  std::erase_if(line_patterns_, [](const auto& entry) { return entry.second.expired(); });
  return compiled;
}

std::optional<HardwareFinding> JobDriver::scan_logs(const fs::path& dir, const std::vector<int>& workers, int attempt,
                                                    const util::LinePatterns& patterns) {
  for (const int worker : workers) {
    const auto tail = util::read_file_tail(remote::worker_log_path(dir, worker), kScanTailBytes);
    if (!tail) {
      continue;
    }
    if (auto line = patterns.first_match(tail->text)) {
      return HardwareFinding{attempt, worker, "output", std::string(util::trim(*line))};
    }
  }
  return std::nullopt;
}

void JobDriver::hardware_found(std::int64_t id, const HardwareFinding& finding) {
  Driven* d = host_.find(id);
  if (d == nullptr || d->busy || d->job.desired != DesiredState::run || d->job.attempt != finding.attempt ||
      (d->job.phase != Phase::running && d->job.phase != Phase::setup)) {
    return; // Decided otherwise meanwhile, or busy: the log scan when the attempt is judged finds it again.
  }
  replace_bad_slice(*d, finding);
}

void JobDriver::record_finding(const Driven& d, const HardwareFinding& finding) {
  // The slice's machines are its holder's: a task's are on its worker's attempt.
  const domain::AttemptRecord* holder = d.current();
  if (d.job.kind == domain::JobKind::task && d.job.worker_id) {
    if (const Driven* worker = host_.find(*d.job.worker_id)) {
      holder = worker->current();
    }
  }
  const auto* current = d.current();
  domain::BadHardwareRecord record;
  record.job_id = d.job.id;
  record.attempt = finding.attempt;
  record.zone = current->zone;
  record.accelerator = current->accelerator;
  record.node = current->node;
  record.worker = finding.worker;
  if (holder != nullptr && finding.worker >= 0 &&
      static_cast<std::size_t>(finding.worker) < holder->physical_hosts.size()) {
    record.physical_host = holder->physical_hosts[static_cast<std::size_t>(finding.worker)];
  }
  record.signal = finding.signal;
  record.detail = finding.detail.substr(0, 500);
  store().bad_hardware().record(record);
}

std::string JobDriver::describe(const HardwareFinding& finding) {
  const std::string worker = "worker " + std::to_string(finding.worker);
  if (finding.signal == "preflight") {
    return "bad hardware: " + worker + " failed the preflight (" + finding.detail + ")";
  }
  if (finding.signal == "stall") {
    return "bad hardware: " + finding.detail;
  }
  if (finding.signal == "health") {
    return "bad hardware: the node is " + finding.detail;
  }
  return "bad hardware: " + worker + " printed \"" + finding.detail.substr(0, 200) + "\"";
}

void JobDriver::replace_bad_slice(Driven& d, const HardwareFinding& finding) {
  record_finding(d, finding);
  const auto id = d.job.id;
  const std::string what = describe(finding);
  auto finish = [this, id, what](std::optional<int> code) {
    Driven* live = host_.find(id);
    if (live == nullptr) {
      return;
    }
    if (live->job.kind == domain::JobKind::task) {
      bad_worker_slice(*live, what);
      requeue_task(*live, AttemptOutcome::bad_hardware, code, domain::change_to(Phase::pending, what), true);
      return;
    }
    end_open_attempt(*live, AttemptOutcome::bad_hardware, code);
    live->unreachable = 0;
    move(*live, std::nullopt, after_bad_hardware(*live->config, live->job.bad_hardware, what));
  };
  if (d.job.kind != domain::JobKind::worker && d.current() != nullptr && !d.current()->ended_ms &&
      d.job.phase == Phase::running) {
    stop_workload(d, finish); // On every worker, the good ones too: the job resumes on a new slice.
  } else {
    stop_stream(d);
    finish(std::nullopt);
  }
}

void JobDriver::bad_worker_slice(const Driven& task, const std::string& what) {
  if (!task.job.worker_id) {
    return;
  }
  Driven* worker = host_.find(*task.job.worker_id);
  if (worker == nullptr || worker->job.phase != Phase::running || worker->job.desired != DesiredState::run) {
    return;
  }
  end_open_attempt(*worker, AttemptOutcome::bad_hardware, std::nullopt);
  move(*worker, Phase::running,
       after_bad_hardware(*worker->config, worker->job.bad_hardware,
                          what + " (task " + domain::format_job_id(task.job.id) + ")"));
}

bool JobDriver::act_on_health(Driven& d) {
  auto trouble = judge_health(d.node_health->health);
  if (trouble == NodeTrouble::none && d.node_health->maintenance_due) {
    trouble = NodeTrouble::maintenance;
  }
  if (trouble == NodeTrouble::none || d.job.kind != domain::JobKind::job) {
    return false;
  }
  const auto* current = d.current();
  std::string said = cloud::to_string(d.node_health->health);
  if (!d.node_health->description.empty()) {
    said += " (" + d.node_health->description + ")";
  }
  if (judge_health(d.node_health->health) == NodeTrouble::none) {
    // Healthy, with a maintenance announced: say when.
    const auto& m = *d.node_health->maintenance;
    said = "announcing " + (m.type.empty() ? std::string("a") : "a " + m.type) + " maintenance " +
           (m.status == "ONGOING" ? std::string("under way")
                                  : "whose window opens " + (m.window_start_ms ? util::format_utc(*m.window_start_ms)
                                                                               : std::string("soon")));
  }
  d.node_health.reset(); // Acted on once; the next listing tells again.
  if (trouble == NodeTrouble::bad_hardware) {
    replace_bad_slice(d, HardwareFinding{d.job.attempt, -1, "health", said});
    return true;
  }
  const auto id = d.job.id;
  const std::string what = "node " + current->node + " is " + said + "; leaving it before the maintenance";
  stop_workload(d, [this, id, what](std::optional<int> code) {
    if (Driven* live = host_.find(id); live != nullptr && live->job.phase == Phase::running) {
      preempted(*live, what, code.value_or(143));
    }
  });
  return true;
}

bool JobDriver::rejects_known_bad(Driven& d, const domain::AttemptRecord& open,
                                  const std::vector<std::string>& physical_hosts) {
  const auto known = store().bad_hardware().on(physical_hosts, host_.now_ms() - kBadHardwareMemoryMs);
  if (known.empty()) {
    return false;
  }
  const auto& last = known.front();
  int worker = 0;
  for (std::size_t w = 0; w < physical_hosts.size(); ++w) {
    if (physical_hosts[w] == last.physical_host) {
      worker = static_cast<int>(w);
      break;
    }
  }
  const std::string what = open.node + " landed on machine " + last.physical_host + " (worker " +
                           std::to_string(worker) + "), found bad by job " + domain::format_job_id(last.job_id) +
                           " on " + util::format_utc(last.ts_ms) + " (" + last.signal + ": " +
                           last.detail.substr(0, 120) + "); replacing it before setup";
  end_open_attempt(d, AttemptOutcome::rejected, std::nullopt);
  domain::PhaseChange c = domain::change_to(Phase::recovering, what);
  move(d, std::nullopt, c);
  // No budget is spent (the job never ran there), but replacements back off, in case the zone keeps handing it out.
  backoff(d);
  return true;
}

} // namespace jobman::core::supervision
