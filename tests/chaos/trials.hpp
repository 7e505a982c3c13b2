// Chaos trials: jobs run on the mock while supervisors are killed, slices preempted, the API fails, capacity
// vanishes and other processes cancel, resume and delete; then the invariants are checked.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace jobman::chaos {

// How a trial misbehaves: mean seconds between events of each kind (0: never), and its shape.
struct TrialOptions {
  std::uint64_t seed = 1;
  int initial_jobs = 4;       // Created before the chaos starts.
  int max_jobs = 8;           // More are created during the chaos, up to this many.
  double window_seconds = 30; // How long events are injected.
  int supervisors = 1;        // Running at the start (each kill is followed by a fresh start).
  double kill_every = 8;
  double preempt_every = 3;
  double faults_every = 10;
  double drops_every = 12;
  double capacity_every = 15;
  double command_every = 6;
  double create_every = 6;
  double faulty_fraction = 0; // The mock's hardware.faulty_fraction: each new machine is faulty with it.
  int settle_seconds = 300;   // How long the jobs may take to finish once the chaos stops.
  bool keep = false;          // Keep the trial's directory even when it passes.
};

// What one trial did and found.
struct TrialReport {
  std::uint64_t seed = 0;
  bool passed = false;
  std::vector<std::string> violations;
  std::map<std::string, std::int64_t> counts; // kills, preemptions (by phase), faults, drops, commands, ...
  double seconds = 0;
  std::string directory; // Kept when the trial failed.
  [[nodiscard]] nlohmann::json to_json() const;
};

// Runs one trial; never throws for a violation (it is reported), only for a harness failure.
TrialReport run_trial(const TrialOptions& options);

// The command line that repeats the trial.
std::string rerun_command(const TrialOptions& options);

} // namespace jobman::chaos
