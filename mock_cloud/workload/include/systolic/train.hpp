// systolic-train: the command line, the training loop with checkpoints and early stops, and the program itself.
#pragma once

#include "systolic/dcn.hpp"
#include "systolic/model.hpp"
#include "systolic/step_faults.hpp"
#include "systolic/stop_signal.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

namespace jobman::systolic {

// The exit statuses of systolic-train.
enum class TrainExit : int {
  ok = 0,            // Every step ran and the checksum was printed, or the selftest passed.
  failure = 1,       // A non-finite loss (faulty hardware), an I/O error, or a failed selftest.
  usage = 2,         // A bad option, a checkpoint directory that belongs to a different run, or a multislice
                     // process refused by the coordinator (or a coordinator that refused one).
  lost_peer = 3,     // Multislice: another process of the run closed its connection, stopped, or fell silent past
                     // --dcn-timeout (before step one or during a reduction).
  interrupted = 130, // SIGINT.
  terminated = 143,  // SIGTERM.
};

// The command line of systolic-train.
struct TrainOptions {
  ModelConfig model;              // Width, batch, seed, learning rate, momentum.
  std::uint64_t steps = 1000;     // Train until this many steps are complete.
  std::uint32_t array = 8;        // The systolic array is array x array processing elements.
  std::filesystem::path ckpt_dir; // Where checkpoints live; empty for none.
  std::uint64_t ckpt_every = 100; // Worker 0 writes a checkpoint every this many steps (and after the last).
  std::uint32_t keep = 5;         // Worker 0 keeps this many newest checkpoints (older ones are there to roll back to).
  std::uint64_t step_time_ms = 0; // Each step lasts at least this long (simulated wall time).
  std::uint64_t worker_id = 0;    // Only worker 0 writes checkpoints (the global index in a multislice run).
  DcnSettings multislice;         // The slices of the run (num_slices 1: no network); worker_id is copied in.
  bool selftest = false;          // --selftest: the known-answer check on the array instead of training.
  bool save_on_stop = true;       // Writes a checkpoint of the last completed step on SIGTERM or SIGINT.
  std::uint64_t resume_before = 0; // Rollback: resume from the newest checkpoint before this step (K); 0: none.
  std::uint64_t skip_steps = 0;    // With a rollback: the data of this many steps after the resume point is skipped.
};

// The outcome of reading a command line.
struct ParsedCommandLine {
  std::optional<TrainOptions> options; // Set when the run should go ahead.
  TrainExit exit = TrainExit::ok;      // Otherwise the status to exit with (ok after --help).
  std::string message;                 // Otherwise the help text (for stdout) or the error (for stderr).
};

// Looks up an environment variable; nothing when it is unset.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string& name)>;

// Reads argv with CLI11; the worker id falls back to JOBMAN_WORKER_ID from `environment`, then 0, the rollback
// options to JOBMAN_RESUME_BEFORE_STEP and JOBMAN_SKIP_STEPS, and the multislice options to MEGASCALE_NUM_SLICES,
// MEGASCALE_SLICE_ID, MEGASCALE_COORDINATOR_ADDRESS, MEGASCALE_PORT (then JOBMAN_NUM_SLICES, JOBMAN_SLICE_ID),
// JOBMAN_NUM_WORKERS, MOCK_DCN_LATENCY_US and MOCK_DCN_BANDWIDTH_BPS. A bad option or variable gives
// TrainExit::usage and a message naming it.
ParsedCommandLine parse_command_line(int argc, const char* const* argv, const EnvironmentLookup& environment);

// What a run talks to.
struct TrainingIo {
  std::ostream& out;                // The run's story, one flushed line each: start, steps, checkpoints, end.
  std::ostream& err;                // Warnings, such as checkpoints skipped because they are damaged.
  StopSignals& stop;                // Early stop requests, checked between steps and during the step-time wait.
  std::function<bool()> mxu_faulty; // Asked before every step: is the simulated hardware faulty now?
  std::function<StepFault()> step_fault = nullptr; // Asked before every step when set: its injected fault.
};

// Resumes from the newest valid checkpoint (or starts afresh; with options.resume_before, rolls back first), trains
// to options.steps and prints the checksum of the final weights. Returns how the run ended; throws nothing for I/O
// trouble (it reports it and returns failure).
TrainExit run_training(const TrainOptions& options, TrainingIo& io);

// The --selftest run: the known-answer product on an array of options.array (faulty while io.mxu_faulty says so).
// Prints "selftest passed: ..." on io.out and returns ok, or "selftest failed: ..." on io.err and returns failure.
// Writes no files.
TrainExit run_selftest(const TrainOptions& options, TrainingIo& io);

// The program: parses argv, takes over SIGTERM and SIGINT, trains (or runs the selftest), and returns the exit status.
// The simulated hardware is faulty while the file named by MOCK_TPU_FAULT_FILE exists; MOCK_TPU_LOSS_SPIKE_FILE and
// MOCK_TPU_HANG_FILE name the step fault files (StepFaultFiles).
int systolic_train_main(int argc, char** argv);

} // namespace jobman::systolic
