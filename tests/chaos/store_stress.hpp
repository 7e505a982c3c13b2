// The store under stress: many processes create, list, show, cancel, resume and delete jobs in one JOBMAN_HOME while
// supervisors drive those jobs on the mock cloud.
#pragma once

#include <cstdint>
#include <string>

namespace jobman::chaos {

struct StoreStressOptions {
  int processes = 64;  // Client processes running at once (each runs one jobman command after another).
  double seconds = 60; // How long the clients run.
  int supervisors = 2; // `jobman daemon`s driving the jobs meanwhile.
  std::uint64_t seed = 1;
  std::string json_file; // Where to write the figures; none when empty.
};

// Runs the stress and checks: every command succeeded (no "database is locked"), no job lost or duplicated, no
// attempt launched twice, no job adopted by two supervisors, the store intact. Prints figures; true when all held.
bool run_store_stress(const StoreStressOptions& options);

} // namespace jobman::chaos
