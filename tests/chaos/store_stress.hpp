// The store under stress: many processes create, list, show, cancel, resume and delete jobs in one store while
// supervisors drive those jobs on the mock cloud. On SQLite, all in one JOBMAN_HOME; with `postgres`, on a private
// PostgreSQL server, each supervisor in a home of its own as on a machine of its own, with supervisors killed and the
// server restarted under them if asked.
#pragma once

#include <cstdint>
#include <string>

namespace jobman::chaos {

struct StoreStressOptions {
  int processes = 64;  // Client processes running at once (each runs one jobman command after another).
  double seconds = 60; // How long the clients run.
  int supervisors = 2; // `jobman daemon`s driving the jobs meanwhile.
  std::uint64_t seed = 1;
  std::string json_file;        // Where to write the figures; none when empty.
  bool postgres = false;        // The store on a PostgreSQL server this run starts (and may restart).
  double kill_every = 0;        // Mean seconds between SIGKILLs of a random supervisor (replaced at once); 0: none.
  double restart_server_at = 0; // Seconds into the run at which the server restarts (pg_ctl restart -m fast); 0: never.
  double drain_seconds = 0;     // After the clients: seconds for every job to end, then the cloud must hold nothing.
};

// Runs the stress and checks: every command succeeded (no "database is locked"), no job lost or duplicated, no
// attempt launched twice, no job adopted by two supervisors (by a second only once the first was dead), the store
// intact; with a drain, every job ended and no slice left in the cloud. Prints figures; true when all held.
bool run_store_stress(const StoreStressOptions& options);

} // namespace jobman::chaos
