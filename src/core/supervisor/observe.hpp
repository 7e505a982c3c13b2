// Observing the cloud: what one listing per zone in use says of every driven job's slice, its rivals and its node's
// health. The loop observes once a tick; the in-process tests observe when they choose.
#pragma once

#include "driven.hpp"
#include "driver_host.hpp"
#include "operations.hpp"

#include <cstdint>
#include <map>

namespace jobman::core::supervision {

// Whether the open slice of `d` is flex-start and its run ends within the job's recovery.deadline_lead (or has ended),
// as the listings told.
bool run_ending(const Driven& d, const DriverHost& host);

// Whether the running job's attempt has been silent past recovery.stall_timeout (recovery.stall_first_line before
// its first output, when longer): no worker's output came home for that long, in the loop's time, since its launch
// (or since this supervisor took the job up). Takes in the output its stream counted since the last look, so a call
// each tick is what measures the silence.
bool stall_due(Driven& d, const DriverHost& host);

// One queuedResources.list (and, for nodes created directly or running jobs' health, one nodes.list) per zone in use:
// sets each job's `seen*` fields, its rivals' and its node's health, records the state changes as observations, and
// marks the jobs with news dirty. A listing that fails leaves its jobs as they were. A zone's queued resources are
// listed through v2alpha1 while one of them is flex-start, which tells when its run ends (Driven::run_ends_ms).

void observe_slices(std::map<std::int64_t, Driven>& driven, SliceOps& slices, DriverHost& host, Counters& counters);

// After each observation: marks for a step the serving and parked workers (they look at the queue every tick) and
// the jobs silent past their stall timeout (stall_due).
void mark_due_after_observation(std::map<std::int64_t, Driven>& driven, const DriverHost& host);

} // namespace jobman::core::supervision
