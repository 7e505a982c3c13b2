#include "systolic/train.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <limits>

namespace jobman::systolic {

namespace {

constexpr const char* kProgram = "systolic-train";

// A validator for a finite number in [low, high), or (low, high) when `open_low`.
CLI::Validator real_range(double low, double high, bool open_low, const std::string& description) {
  return {[=](std::string& text) {
            double value = 0;
            const bool ok = CLI::detail::lexical_cast(text, value) && std::isfinite(value) &&
                            (open_low ? value > low : value >= low) && value < high;
            return ok ? std::string() : "must be " + description + ", not '" + text + "'";
          },
          std::string(open_low ? "(" : "[") + CLI::detail::to_string(low) + ", " + CLI::detail::to_string(high) + ")"};
}

// A validator for an unsigned integer in [low, high], written in decimal digits only (so "-1" does not wrap).
CLI::Validator integer_range(std::uint64_t low, std::uint64_t high, const std::string& description) {
  return {[=](std::string& text) {
            std::uint64_t value = 0;
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
            const bool ok =
                !text.empty() && ec == std::errc() && end == text.data() + text.size() && value >= low && value <= high;
            return ok ? std::string() : "must be " + description + ", not '" + text + "'";
          },
          high == std::numeric_limits<std::uint64_t>::max() ? ">= " + std::to_string(low)
                                                            : std::to_string(low) + ".." + std::to_string(high)};
}

// A validator for any unsigned 64-bit integer.
CLI::Validator non_negative_integer() {
  return integer_range(0, std::numeric_limits<std::uint64_t>::max(), "a non-negative integer");
}

void define_options(CLI::App& app, TrainOptions& options) {
  app.description("Trains a two-layer tanh perceptron on a teacher-student regression task; every matrix product "
                  "of the forward and backward passes runs on a cycle-by-cycle simulation of a weight-stationary "
                  "systolic array (a TPU's matrix unit).");
  app.footer("Prints 'starting from step=0 of N' or 'resumed from step=K of N checkpoint=PATH' (N: --steps), one "
             "'step=N loss=L "
             "mxu_util=U cycles=C' line per step, and 'checksum=<16 hex digits>' (FNV-1a 64 of the final weights).\n"
             "Worker 0 (--worker-id, else JOBMAN_WORKER_ID, else 0) writes checkpoints; every worker resumes from "
             "the newest valid one.\n"
             "While the file named by MOCK_TPU_FAULT_FILE exists the simulated hardware is faulty (NaN loss).\n"
             "--selftest multiplies a fixed 12x20 by a fixed 20x10 matrix of small integers on the array (--array; "
             "the other options do not apply) and checks the product against its known answer, writing no files: it "
             "prints "
             "'selftest passed: ...' and exits 0, or 'selftest failed: ...' on stderr and exits 1.\n"
             "Exit status: 0 done, 1 non-finite loss, I/O error or failed selftest, 2 bad option or foreign "
             "checkpoints, 130 SIGINT, 143 SIGTERM.\n");
  app.add_option("--steps", options.steps, "Train until this many steps are complete")
      ->check(non_negative_integer())
      ->default_str(std::to_string(options.steps));
  app.add_option("--dim", options.model.dim, "Model width: input, hidden layer and output")
      ->check(integer_range(1, 1024, "an integer from 1 to 1024"))
      ->default_str(std::to_string(options.model.dim));
  app.add_option("--array", options.array, "Systolic array size A (A x A processing elements)")
      ->check(integer_range(1, 256, "an integer from 1 to 256"))
      ->default_str(std::to_string(options.array));
  app.add_option("--batch", options.model.batch, "Examples per step")
      ->check(integer_range(1, 65536, "an integer from 1 to 65536"))
      ->default_str(std::to_string(options.model.batch));
  app.add_option("--seed", options.model.seed, "Seeds the teacher, the initial weights and every batch")
      ->check(non_negative_integer())
      ->default_str(std::to_string(options.model.seed));
  app.add_option("--lr", options.model.learning_rate, "Learning rate")
      ->check(real_range(0, 1e6, true, "a positive number"))
      ->default_str("0.1");
  app.add_option("--momentum", options.model.momentum, "Momentum coefficient (0 for plain SGD)")
      ->check(real_range(0, 1, false, "a number in [0, 1)"))
      ->default_str("0.9");
  app.add_option("--ckpt-dir", options.ckpt_dir, "Checkpoint directory (created by worker 0); none without it");
  app.add_option("--ckpt-every", options.ckpt_every, "Worker 0 writes a checkpoint every K steps and after the last")
      ->check(integer_range(1, std::numeric_limits<std::uint64_t>::max(), "a positive integer"))
      ->default_str(std::to_string(options.ckpt_every));
  app.add_option("--keep", options.keep, "How many newest checkpoints worker 0 keeps")
      ->check(integer_range(1, 1000000, "an integer from 1 to 1000000"))
      ->default_str(std::to_string(options.keep));
  app.add_option("--step-time-ms", options.step_time_ms, "Simulated wall time: each step lasts at least T ms")
      ->check(integer_range(0, 86'400'000, "an integer from 0 to 86400000 (a day)"))
      ->default_str(std::to_string(options.step_time_ms));
  app.add_flag("!--no-save-on-stop", options.save_on_stop,
               "On SIGTERM or SIGINT exit without writing a checkpoint, as many training scripts do: the steps since "
               "the last periodic checkpoint are done again");
  app.add_flag("--selftest", options.selftest,
               "Instead of training, check the simulated hardware with a known-answer product on the array "
               "(milliseconds with the default array)");
  app.add_option("--worker-id", options.worker_id, "This worker's index; only worker 0 writes checkpoints")
      ->check(non_negative_integer())
      ->default_str("$JOBMAN_WORKER_ID or 0");
}

} // namespace

ParsedCommandLine parse_command_line(int argc, const char* const* argv, const EnvironmentLookup& environment) {
  ParsedCommandLine result;
  TrainOptions options;
  CLI::App app{"", kProgram};
  define_options(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    result.message = app.help();
    return result;
  } catch (const CLI::ParseError& e) {
    result.exit = TrainExit::usage;
    result.message = std::string(kProgram) + ": error: " + e.what() + "\nRun '" + kProgram + " --help' for usage.\n";
    return result;
  }
  if (app.count("--worker-id") == 0) {
    if (const auto text = environment("JOBMAN_WORKER_ID"); text && !text->empty()) {
      std::uint64_t id = 0;
      const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), id);
      if (ec != std::errc() || end != text->data() + text->size()) {
        result.exit = TrainExit::usage;
        result.message =
            std::string(kProgram) + ": error: JOBMAN_WORKER_ID must be a non-negative integer, not '" + *text + "'\n";
        return result;
      }
      options.worker_id = id;
    }
  }
  result.options = options;
  return result;
}

} // namespace jobman::systolic
