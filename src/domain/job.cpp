#include "jobman/domain/job.hpp"

#include "jobman/util/strings.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <utility>

namespace jobman::domain {

std::string format_job_id(long long id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%06lld", id);
  return buf;
}

std::optional<long long> parse_job_id(std::string_view text) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  const auto value = util::parse_int(text);
  if (!value || *value <= 0) {
    return std::nullopt;
  }
  return value;
}
namespace {

struct PhaseName {
  Phase phase;
  std::string_view name;
};

constexpr std::array<PhaseName, 10> phase_names{{
    {Phase::pending, "PENDING"},
    {Phase::queued, "QUEUED"},
    {Phase::provisioning, "PROVISIONING"},
    {Phase::setup, "SETUP"},
    {Phase::running, "RUNNING"},
    {Phase::recovering, "RECOVERING"},
    {Phase::succeeded, "SUCCEEDED"},
    {Phase::failed, "FAILED"},
    {Phase::cancelled, "CANCELLED"},
    {Phase::deleted, "DELETED"},
}};

struct DesiredName {
  DesiredState desired;
  std::string_view name;
};

constexpr std::array<DesiredName, 4> desired_names{{
    {DesiredState::run, "run"},
    {DesiredState::stop, "stop"},
    {DesiredState::remove, "delete"},
    {DesiredState::clean, "clean"},
}};

struct KindName {
  JobKind kind;
  std::string_view name;
};

constexpr std::array<KindName, 3> kind_names{{
    {JobKind::job, "job"},
    {JobKind::worker, "worker"},
    {JobKind::task, "task"},
}};

struct OutcomeName {
  AttemptOutcome outcome;
  std::string_view name;
};

constexpr std::array<OutcomeName, 17> outcome_names{{
    {AttemptOutcome::none, ""},
    {AttemptOutcome::succeeded, "succeeded"},
    {AttemptOutcome::preempted, "preempted"},
    {AttemptOutcome::failed, "failed"},
    {AttemptOutcome::restart, "restart"},
    {AttemptOutcome::cancelled, "cancelled"},
    {AttemptOutcome::bad_hardware, "bad-hardware"},
    {AttemptOutcome::rejected, "rejected"},
    {AttemptOutcome::timed_out, "timed-out"},
    {AttemptOutcome::quota, "quota"},
    {AttemptOutcome::refused, "refused"},
    {AttemptOutcome::idle, "idle"},
    {AttemptOutcome::interrupted, "interrupted"},
    {AttemptOutcome::run_ended, "run-ended"},
    {AttemptOutcome::stalled, "stalled"},
    {AttemptOutcome::rolled_back, "rolled-back"},
    {AttemptOutcome::unknown, "unknown"},
}};

struct RivalOutcomeName {
  RivalOutcome outcome;
  std::string_view name;
};

constexpr std::array<RivalOutcomeName, 5> rival_outcome_names{{
    {RivalOutcome::racing, ""},
    {RivalOutcome::outrun, "outrun"},
    {RivalOutcome::lost, "lost"},
    {RivalOutcome::abandoned, "abandoned"},
    {RivalOutcome::unknown, "unknown"},
}};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           const auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

} // namespace

std::string_view to_string(Phase phase) {
  for (const auto& entry : phase_names) {
    if (entry.phase == phase) {
      return entry.name;
    }
  }
  return "UNKNOWN";
}

std::optional<Phase> parse_phase(std::string_view text) {
  // The store's spelling first, exactly (a report reads a few phases for every one of 100k jobs), then any case.
  for (const auto& entry : phase_names) {
    if (entry.name == text) {
      return entry.phase;
    }
  }
  for (const auto& entry : phase_names) {
    if (iequals(entry.name, text)) {
      return entry.phase;
    }
  }
  return std::nullopt;
}

std::string_view to_string(JobKind kind) {
  for (const auto& entry : kind_names) {
    if (entry.kind == kind) {
      return entry.name;
    }
  }
  return "unknown";
}

std::optional<JobKind> parse_job_kind(std::string_view text) {
  for (const auto& entry : kind_names) {
    if (iequals(entry.name, text)) {
      return entry.kind;
    }
  }
  return std::nullopt;
}

bool is_terminal(Phase phase) {
  return phase == Phase::succeeded || phase == Phase::failed || phase == Phase::cancelled || phase == Phase::deleted;
}

const std::vector<Phase>& all_phases() {
  static const std::vector<Phase> phases = [] {
    std::vector<Phase> result;
    result.reserve(phase_names.size());
    for (const auto& entry : phase_names) {
      result.push_back(entry.phase);
    }
    return result;
  }();
  return phases;
}

std::string_view to_string(DesiredState desired) {
  for (const auto& entry : desired_names) {
    if (entry.desired == desired) {
      return entry.name;
    }
  }
  return "unknown";
}

std::optional<DesiredState> parse_desired_state(std::string_view text) {
  for (const auto& entry : desired_names) {
    if (iequals(entry.name, text)) {
      return entry.desired;
    }
  }
  return std::nullopt;
}

std::string_view to_string(AttemptOutcome outcome) {
  for (const auto& entry : outcome_names) {
    if (entry.outcome == outcome) {
      return entry.name;
    }
  }
  return "unknown";
}

std::optional<AttemptOutcome> parse_attempt_outcome(std::string_view text) {
  for (const auto& entry : outcome_names) {
    if (entry.name == text) {
      return entry.outcome;
    }
  }
  return std::nullopt;
}

bool is_bad_slice(AttemptOutcome outcome) {
  return outcome == AttemptOutcome::bad_hardware || outcome == AttemptOutcome::rejected;
}

bool is_request_given_up(AttemptOutcome outcome) {
  return outcome == AttemptOutcome::timed_out || outcome == AttemptOutcome::quota || outcome == AttemptOutcome::refused;
}

bool can_end_before_slice_up(AttemptOutcome outcome) {
  return is_request_given_up(outcome) || is_bad_slice(outcome) || outcome == AttemptOutcome::failed ||
         outcome == AttemptOutcome::cancelled || outcome == AttemptOutcome::preempted;
}

std::string_view to_string(RivalOutcome outcome) {
  for (const auto& entry : rival_outcome_names) {
    if (entry.outcome == outcome) {
      return entry.name;
    }
  }
  return "unknown";
}

std::optional<RivalOutcome> parse_rival_outcome(std::string_view text) {
  for (const auto& entry : rival_outcome_names) {
    if (entry.name == text) {
      return entry.outcome;
    }
  }
  return std::nullopt;
}

PhaseChange change_to(Phase to, std::string reason) {
  PhaseChange change;
  change.to = to;
  change.reason = std::move(reason);
  return change;
}

} // namespace jobman::domain
