// The SQL behind JobStore::for_each_job and JobStore::held_slices, exposed so that tests can check its query plan.
#pragma once

#include "jobman/store/job_store.hpp"

#include <string>

namespace jobman::store::queries {

// The SELECT for `filter`, ordered by id; binds :since, :p0, :p1, ... and :user. Name globs are matched afterwards.
std::string list_jobs_sql(const JobFilter& filter);

// The SELECT behind JobStore::held_slices: job_id, number, queued_resource, node, zone of the unreleased attempts.
std::string held_slices_sql();

} // namespace jobman::store::queries
