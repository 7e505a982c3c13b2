// A store with thousands of jobs and their history, for tests of reports longer than one of build_report's chunks:
// jobs on slices of their own (finished, preempted and run again, still running), a worker and the tasks it ran,
// and jobs that never got a slice.
#pragma once

#include "jobman/store/job_store.hpp"

#include <cstdint>
#include <vector>

namespace jobman::test {

struct ReportHistory {
  std::int64_t worker = 0;        // The worker, created first.
  std::vector<std::int64_t> jobs; // The others, in id order: jobs and (a few) tasks.
};

// Adds `count` jobs and a worker to `store`, with their phase changes and attempts. Every 7th job has a slice of its
// own, a third of those were preempted once, half of them finished; every 997th (from the 6th) is a task the worker
// ran to its end.
ReportHistory add_report_history(store::JobStore& store, int count);

} // namespace jobman::test
