// Copying a store into another: a user's SQLite history into the lab's PostgreSQL store.
#pragma once

#include "jobman/store/job_store.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace jobman::store {

// What copy_store did.
struct StoreCopy {
  enum class Into {
    empty,  // The target was empty: everything was copied.
    behind, // The target was an earlier copy of the source: what changed since was brought over.
    ahead,  // The target was a copy of the source used since: only rows it lacked were added (none, usually).
  };
  Into into = Into::empty;
  std::int64_t jobs = 0;                                     // Jobs in the source.
  std::int64_t events = 0;                                   // Events in the source.
  std::vector<std::pair<std::string, std::int64_t>> written; // Rows inserted or updated, by table.
  std::int64_t removed = 0; // Jobs the source removed since the earlier copy, removed from the target too.
  std::string user;         // Whose the source's own jobs are on the target.
};

// Copies `from` (the source), history included, into `target` (a store on PostgreSQL), in one transaction of the
// target's: all of it or nothing. Ids, change numbers and times are kept, and the target's ids go on after the source's
// highest ever given. Copying again is safe: into a store made by an earlier copy of `from`, it brings what changed
// since (or nothing); into a store with a history of its own it refuses, changing nothing. Throws jobman::Error saying
// why it refused, and when a supervisor drives jobs of `from` (it must be stopped first). The jobs of the source's
// identity (the login) are recorded as `as_user`, by default the target's identity.
StoreCopy copy_store(const JobStore& from, JobStore& target, const std::string& as_user = "");

} // namespace jobman::store
