// Observing the cloud: what one listing per zone in use says of every driven job's slice, its rivals and its node's
// health. The loop observes once a tick; the in-process tests observe when they choose.
#pragma once

#include "driven.hpp"
#include "driver_host.hpp"
#include "operations.hpp"

#include <cstdint>
#include <map>

namespace jobman::core::supervision {

// One queuedResources.list (and, for nodes created directly or running jobs' health, one nodes.list) per zone in use:
// sets each job's `seen*` fields, its rivals' and its node's health, records the state changes as observations, and
// marks the jobs with news dirty. A listing that fails leaves its jobs as they were.
void observe_slices(std::map<std::int64_t, Driven>& driven, SliceOps& slices, DriverHost& host, Counters& counters);

} // namespace jobman::core::supervision
