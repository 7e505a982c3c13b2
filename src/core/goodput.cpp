#include "jobman/core/goodput.hpp"

#include "jobman/config/accelerator.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace jobman::core {

using domain::AttemptOutcome;
using domain::AttemptRecord;
using domain::JobKind;
using domain::Phase;

std::string_view to_string(Bucket bucket) {
  switch (bucket) {
  case Bucket::queued: return "queued";
  case Bucket::provisioning: return "provisioning";
  case Bucket::setup: return "setup";
  case Bucket::productive: return "productive";
  case Bucket::lost: return "lost";
  case Bucket::recovering: return "recovering";
  case Bucket::bad_hardware: return "bad-hardware";
  case Bucket::run_end: return "run-end";
  case Bucket::idle: return "idle";
  }
  return "idle";
}

const std::array<Bucket, kBucketCount>& all_buckets() {
  static constexpr std::array<Bucket, kBucketCount> buckets{
      Bucket::queued,     Bucket::provisioning, Bucket::setup,   Bucket::productive, Bucket::lost,
      Bucket::recovering, Bucket::bad_hardware, Bucket::run_end, Bucket::idle};
  return buckets;
}

std::int64_t wall_ms(const BucketTimes& ms) {
  std::int64_t total = 0;
  for (const auto value : ms) {
    total += value;
  }
  return total;
}

std::optional<double> goodput(const BucketTimes& ms) {
  const auto wall = wall_ms(ms);
  if (wall <= 0) {
    return std::nullopt;
  }
  return static_cast<double>(ms[static_cast<std::size_t>(Bucket::productive)]) / static_cast<double>(wall);
}

namespace {

constexpr std::int64_t kAllRedone = std::numeric_limits<std::int64_t>::min();

// A stretch of the job's life in one phase.
struct Interval {
  std::int64_t from = 0;
  std::int64_t to = 0;
  Phase phase = Phase::pending;
};

// Where the time after an attempt goes (RECOVERING, PENDING before the next), and its RUNNING time done again:
// bad-hardware after a bad slice, run-end after a flex-start run's end, else recovering (and lost).
Bucket between_attempts(const AttemptRecord& attempt) {
  if (domain::is_bad_slice(attempt.outcome)) {
    return Bucket::bad_hardware;
  }
  return attempt.outcome == AttemptOutcome::run_ended ? Bucket::run_end : Bucket::recovering;
}

class Accountant {
public:
  explicit Accountant(const AccountInput& input) : in_(input), job_(*input.job), attempts_(input.attempts) {
    out_.job_id = job_.id;
  }

  JobAccount run() {
    phases();
    redone();
    for (const auto& interval : intervals_) {
      split(interval);
    }
    marks();
    usage();
    std::sort(out_.notes.begin(), out_.notes.end());
    out_.notes.erase(std::unique(out_.notes.begin(), out_.notes.end()), out_.notes.end());
    return std::move(out_);
  }

private:
  // The job's life as phase intervals; the stretches spent finished before a resume are left out.
  void phases() {
    Phase phase = Phase::pending;
    std::int64_t since = job_.created_ms;
    bool any = false;
    auto close = [&](std::int64_t to) {
      if (to <= since) {
        return;
      }
      if (domain::is_terminal(phase)) {
        out_.excluded_ms += to - since;
      } else {
        intervals_.push_back({since, to, phase});
      }
    };
    for (const auto& event : in_.events) {
      if (event.kind != "phase" || !event.to) {
        continue;
      }
      any = true;
      const auto at = std::max(event.ts_ms, since);
      close(at);
      phase = *event.to;
      since = at;
    }
    if (!any && job_.phase != Phase::pending) {
      // No phase history (a store written by hand, or trimmed): the job's current phase since it began.
      out_.notes.emplace_back("no phase changes recorded: the time before the current phase counts as pending");
      close(std::max(job_.phase_since_ms, since));
      phase = job_.phase;
      since = std::max(job_.phase_since_ms, since);
    }
    if (!domain::is_terminal(phase)) {
      close(std::max(in_.now_ms, since));
    }
  }

  // The attempt under way at `at`: the last one begun by then (nullptr before the first).
  const AttemptRecord* attempt_at(std::int64_t at) const {
    const AttemptRecord* found = nullptr;
    for (const auto& attempt : attempts_) {
      if (attempt.started_ms <= at) {
        found = &attempt;
      }
    }
    return found;
  }

  // For each attempt followed by another that printed steps: from when its work was done again (the next resumed
  // from an earlier step than it reached).
  void redone() {
    if (job_.kind == JobKind::worker) {
      return;
    }
    for (std::size_t k = 0; k + 1 < attempts_.size(); ++k) {
      const auto& attempt = attempts_[k];
      // The next attempt that printed a step (requests given up in between never ran).
      const AttemptRecord* next = nullptr;
      bool ran_silent = false;
      for (std::size_t j = k + 1; j < attempts_.size() && next == nullptr; ++j) {
        if (!attempts_[j].progress.empty()) {
          next = &attempts_[j];
        } else if (attempts_[j].active_ms && attempts_[j].ended_ms) {
          ran_silent = true;
        }
      }
      if (next == nullptr) {
        if (!attempt.progress.empty() && ran_silent) {
          out_.notes.push_back("a later attempt printed no step: what attempt " + std::to_string(attempt.number) +
                               " lost is not known");
        }
        continue;
      }
      const auto resumed = next->progress.first();
      const auto reached = attempt.progress.latest();
      if (!reached) {
        if (resumed->step == 0) {
          redone_from_[attempt.number] = kAllRedone; // Started over: all of it is done again.
        } else if (attempt.active_ms) {
          out_.notes.push_back("attempt " + std::to_string(attempt.number) +
                               " printed no step: what it lost is not known");
        }
        continue;
      }
      if (resumed->step > reached->step) {
        // Saved past the last step that came home (its last lines were cut with the slice): nothing known is redone.
        continue;
      }
      out_.lost_steps += reached->step - resumed->step;
      const auto from = attempt.progress.time_at(resumed->step);
      redone_from_[attempt.number] = from ? *from : kAllRedone;
    }
  }

  void add(std::int64_t from, std::int64_t to, Bucket bucket, int attempt, Phase phase) {
    if (to <= from) {
      return;
    }
    out_.ms[static_cast<std::size_t>(bucket)] += to - from;
    auto& timeline = out_.timeline;
    if (!timeline.empty() && timeline.back().to_ms == from && timeline.back().bucket == bucket &&
        timeline.back().attempt == attempt && timeline.back().phase == phase) {
      timeline.back().to_ms = to;
      return;
    }
    timeline.push_back({from, to, bucket, attempt, phase});
  }

  void split(const Interval& interval) {
    const AttemptRecord* attempt = attempt_at(interval.from);
    const int number = attempt != nullptr ? attempt->number : 0;
    const Bucket between = attempt == nullptr ? Bucket::recovering : between_attempts(*attempt);
    auto whole = [&](Bucket bucket) { add(interval.from, interval.to, bucket, number, interval.phase); };
    switch (interval.phase) {
    case Phase::pending:
      if (job_.kind == JobKind::task) {
        whole(Bucket::queued); // Waiting in the queue for a worker.
      } else if (attempt == nullptr) {
        whole(Bucket::idle); // Nothing asked for yet: waiting for a supervisor to take it.
      } else {
        whole(between);
      }
      return;
    case Phase::queued: whole(Bucket::queued); return;
    case Phase::provisioning: whole(Bucket::provisioning); return;
    case Phase::setup: whole(Bucket::setup); return;
    case Phase::recovering: whole(between); return;
    case Phase::running: running(interval, number, between); return;
    default: return; // Terminal phases are not part of the wall time.
    }
  }

  // `between`: the bucket of the time after the attempt (recovering, bad-hardware or run-end), which its RUNNING time
  // done again falls in too, instead of lost.
  void running(const Interval& interval, int number, Bucket between) {
    if (job_.kind == JobKind::worker) {
      worker_running(interval, number);
      return;
    }
    const auto redone = redone_from_.find(number);
    if (redone == redone_from_.end()) {
      add(interval.from, interval.to, Bucket::productive, number, interval.phase);
      return;
    }
    const auto cut = std::clamp(redone->second, interval.from, interval.to);
    add(interval.from, cut, Bucket::productive, number, interval.phase);
    add(cut, interval.to, between == Bucket::recovering ? Bucket::lost : between, number, interval.phase);
  }

  // A worker's slice is productive while a task holds it, idle otherwise.
  void worker_running(const Interval& interval, int number) {
    std::vector<std::pair<std::int64_t, std::int64_t>> busy;
    for (const auto& span : in_.tasks) {
      const auto from = std::max(span.from_ms, interval.from);
      const auto to = std::min(span.to_ms.value_or(interval.to), interval.to);
      if (to > from) {
        busy.emplace_back(from, to);
      }
    }
    std::sort(busy.begin(), busy.end());
    std::int64_t at = interval.from;
    for (const auto& [from, to] : busy) {
      if (to <= at) {
        continue;
      }
      add(at, std::max(at, from), Bucket::idle, number, interval.phase);
      add(std::max(at, from), to, Bucket::productive, number, interval.phase);
      at = to;
    }
    add(at, interval.to, Bucket::idle, number, interval.phase);
  }

  void marks() {
    for (const auto& attempt : attempts_) {
      if (attempt.ended_ms && attempt.outcome != AttemptOutcome::none && attempt.outcome != AttemptOutcome::succeeded) {
        out_.marks.push_back({*attempt.ended_ms, attempt.number, attempt.outcome});
      }
    }
  }

  void usage() {
    // Zone, accelerator, the tier's name (which orders the usage) and whether the slice was borrowed.
    using Key = std::tuple<std::string, std::string, std::string, bool>;
    std::map<Key, ChipUsage> by_kind;
    const bool settled = domain::is_terminal(job_.phase) && !job_.cleanup_pending;
    for (const auto& attempt : attempts_) {
      const std::string accelerator = attempt.accelerator.empty() ? job_.accelerator : attempt.accelerator;
      std::int64_t from = 0;
      std::int64_t to = 0;
      bool estimated = false;
      const bool borrowed = attempt.worker_id.has_value();
      if (borrowed) {
        from = attempt.started_ms;
        to = attempt.ended_ms.value_or(in_.now_ms);
      } else {
        if (!attempt.holds_slice() || !attempt.active_ms) {
          continue; // Never up: nothing billed.
        }
        from = *attempt.active_ms;
        if (attempt.released_ms) {
          to = *attempt.released_ms;
        } else if (settled || (attempt.ended_ms && attempt.number < job_.attempt)) {
          to = attempt.ended_ms.value_or(job_.finished_ms.value_or(in_.now_ms));
          estimated = true;
          out_.notes.push_back("attempt " + std::to_string(attempt.number) +
                               ": its slice's deletion was never confirmed; counted up to the attempt's end");
        } else {
          to = in_.now_ms; // Still up.
        }
      }
      if (to <= from) {
        continue;
      }
      int chips = 0;
      int slices = 1;
      if (const auto type = config::find_accelerator(accelerator)) {
        chips = type->chips;
        // A multislice attempt records every slice's hosts; a task's time is on its worker's one slice.
        slices = borrowed ? 1 : type->slices_in(attempt.hosts);
      } else {
        out_.notes.push_back("unknown accelerator '" + accelerator + "': no chips counted");
      }
      auto& entry = by_kind[{attempt.zone, accelerator, domain::to_string(attempt.pricing), borrowed}];
      entry.zone = attempt.zone;
      entry.accelerator = accelerator;
      entry.tier = attempt.pricing;
      entry.chips = chips;
      entry.slices = slices;
      entry.borrowed = borrowed;
      entry.estimated = entry.estimated || estimated;
      entry.chip_hours += static_cast<double>(chips) * slices * static_cast<double>(to - from) / 3'600'000.0;
    }
    for (auto& [key, entry] : by_kind) {
      out_.usage.push_back(std::move(entry));
    }
  }

  const AccountInput& in_;
  const domain::JobRecord& job_;
  std::span<const AttemptRecord> attempts_;
  std::vector<Interval> intervals_;
  std::map<int, std::int64_t> redone_from_; // By attempt number.
  JobAccount out_;
};

} // namespace

JobAccount account(const AccountInput& input) {
  return Accountant(input).run();
}

} // namespace jobman::core
