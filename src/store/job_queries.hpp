// The SQL behind Jobs::for_each, Attempts::held_slices and Queue::board, exposed so that tests can
// check its query plan.
#pragma once

#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"

#include <string>

namespace jobman::store::queries {

// The SELECT for `filter`, ordered by id; binds :since, :p0, :p1, ... and :user. Name globs are matched afterwards.
// On PostgreSQL (`postgres`), the id list is an array the primary key is probed with: its planner would otherwise
// join the list against a scan of the whole table.
std::string list_jobs_sql(const JobFilter& filter, bool postgres = false);

// The SELECT behind Attempts::held_slices: job_id, number, queued_resource, node, zone of the unreleased attempts.
std::string held_slices_sql();

// The SELECTs behind Queue::board: the ids of the first ?1 queued tasks in queue order; and the id and
// whether it waits in the queue of every task `status` lists (unfinished, or finished at ?1 or later), by id.
std::string queue_head_sql();

// The SELECT behind Jobs::changes_since: the job columns, then the change number, the removed id (NULL for a
// changed job), the change number of the oldest removal kept and its n; binds ?1 (the cursor).
std::string job_changes_sql();
std::string task_places_sql();

} // namespace jobman::store::queries
