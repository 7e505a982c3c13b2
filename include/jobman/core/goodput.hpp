// Where a job's time went: its wall time split into buckets (queued, provisioning, setup, productive, lost,
// recovering, bad hardware, run end, idle) from the phase changes and attempts the store recorded, and the chip-hours
// its slices were up, by accelerator and tier. Pure: the caller reads the store. docs/GOODPUT.md defines every bucket.
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/domain/pricing.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::core {

enum class Bucket { queued, provisioning, setup, productive, lost, recovering, bad_hardware, run_end, idle };
inline constexpr std::size_t kBucketCount = 9;

// "queued", "provisioning", "setup", "productive", "lost", "recovering", "bad-hardware", "run-end", "idle".
std::string_view to_string(Bucket bucket);
// Every bucket, in the order above.
const std::array<Bucket, kBucketCount>& all_buckets();

// Time by bucket, in all_buckets() order.
using BucketTimes = std::array<std::int64_t, kBucketCount>;
// The sum of the buckets.
std::int64_t wall_ms(const BucketTimes& ms);
// Productive time over the wall time; nullopt when the wall time is zero.
std::optional<double> goodput(const BucketTimes& ms);

// A stretch of the job's timeline spent in one bucket, during one attempt (0: before the first).
struct TimelineSegment {
  std::int64_t from_ms = 0;
  std::int64_t to_ms = 0;
  Bucket bucket = Bucket::queued;
  int attempt = 0;
  domain::Phase phase = domain::Phase::pending;
};

// Something that happened at one moment: an attempt's end, marked on the timeline.
struct TimelineMark {
  std::int64_t at_ms = 0;
  int attempt = 0;
  domain::AttemptOutcome what = domain::AttemptOutcome::none; // The attempt's outcome: preempted, bad-hardware, ...
};

// Chip-hours of slices up (READY, which is what Cloud TPU bills) for one zone, accelerator and tier.
struct ChipUsage {
  std::string zone;
  std::string accelerator;                      // "v4-32".
  domain::Pricing tier = domain::Pricing::spot; // The pricing its attempts' slices were asked in.
  int chips = 0;                                // Of the accelerator: one slice's.
  int slices = 1; // How many slices of it each attempt held (tpu.slices: its record has every slice's hosts).
  double chip_hours = 0;
  bool borrowed = false;  // A task's time on its worker's slice: the worker pays for the slice, not the task.
  bool estimated = false; // Some of it is inferred (see JobAccount::notes).
};

// One job's account.
struct JobAccount {
  std::int64_t job_id = 0;
  BucketTimes ms{};                      // By bucket.
  std::vector<TimelineSegment> timeline; // In time order; consecutive segments differ in bucket or attempt.
  std::vector<TimelineMark> marks;
  std::vector<ChipUsage> usage;   // By zone, accelerator and tier (by its name).
  std::int64_t lost_steps = 0;    // Steps done again after resumes (bad hardware's included).
  std::int64_t excluded_ms = 0;   // Time the job sat finished before a `resume`: outside its wall time.
  std::vector<std::string> notes; // Why a figure is an estimate, or unknown.

  [[nodiscard]] std::int64_t of(Bucket bucket) const { return ms[static_cast<std::size_t>(bucket)]; }
  [[nodiscard]] std::int64_t wall_ms() const { return core::wall_ms(ms); }
  [[nodiscard]] std::optional<double> goodput() const { return core::goodput(ms); }
};

// What a worker's account needs of the tasks that ran on it: when each task attempt held its slice.
struct TaskSpan {
  std::int64_t from_ms = 0;
  std::optional<std::int64_t> to_ms; // nullopt: still on it.
};

// What account() reads: the job, its phase events (others are skipped) oldest first, its attempts oldest first with
// their progress, and for a worker the spans of the task attempts it lent its slice to.
struct AccountInput {
  const domain::JobRecord* job = nullptr;
  std::span<const domain::EventRecord> events;
  std::span<const domain::AttemptRecord> attempts;
  std::span<const TaskSpan> tasks;
  std::int64_t now_ms = 0; // The end of an unfinished job's timeline.
};

JobAccount account(const AccountInput& input);

} // namespace jobman::core
