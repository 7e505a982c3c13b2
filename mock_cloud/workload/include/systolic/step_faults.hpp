// Faults the mock cloud injects into the steps of systolic-train through files on a worker host: a loss spike and a
// hang. Each is consumed as the steps it affects are computed, so a step computed again later (after a rollback or a
// restart) runs clean. See docs/SYSTOLIC.md, "Injected faults".
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace jobman::systolic {

// What the fault files ask of one step.
struct StepFault {
  double loss_spike = 1; // The step's reported loss and its loss gradient are multiplied by this; 1: no spike.
  bool hang = false;     // The step never completes: the process blocks until SIGTERM or SIGINT.
};

// The content of a loss spike file: "FACTOR STEPS", e.g. "10 3": the next STEPS steps spike by FACTOR.
struct LossSpike {
  double factor = 1;       // Finite and positive.
  std::uint64_t steps = 0; // Steps still to spike, at least 1.
};

// Reads "FACTOR STEPS" (surrounding white space allowed); nothing unless FACTOR is a finite positive number and
// STEPS a whole number of at least 1.
std::optional<LossSpike> parse_loss_spike(std::string_view text);

// "FACTOR STEPS\n", the factor with enough digits to be read back exactly.
std::string format_loss_spike(const LossSpike& spike);

// The fault files of one process (either path may be empty: no such fault). Checking costs one failed open(2) per
// file and step while the files are absent.
class StepFaultFiles {
public:
  // The loss spike file (MOCK_TPU_LOSS_SPIKE_FILE) and the hang file (MOCK_TPU_HANG_FILE).
  StepFaultFiles(std::filesystem::path loss_spike, std::filesystem::path hang);

  // The fault of the step about to be computed, consumed first: the hang file is removed; the loss spike file counts
  // down by one step (rewritten atomically) and is removed when spent. A fault whose file cannot be consumed, or a
  // malformed loss spike file, is reported to `warnings` and does not apply.
  StepFault next_step(std::ostream& warnings);

private:
  std::filesystem::path loss_spike_; // The loss spike file, or empty.
  std::filesystem::path hang_;       // The hang file, or empty.
};

} // namespace jobman::systolic
