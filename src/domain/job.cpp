#include "jobman/domain/job.hpp"

#include <algorithm>
#include <array>

namespace jobman::domain {
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

} // namespace jobman::domain
