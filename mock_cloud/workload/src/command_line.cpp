#include "systolic/train.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

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

// The multislice options as given on the command line, before the environment fills in the rest.
struct MultisliceFlags {
  std::uint32_t num_slices = 1;  // --num-slices.
  std::uint32_t slice_id = 0;    // --slice-id.
  std::uint64_t num_workers = 0; // --num-workers.
  std::string coordinator;       // --coordinator.
  std::uint32_t port = 8081;     // --dcn-port.
  double timeout_seconds = 60;   // --dcn-timeout.
  double latency_ms = 0;         // --dcn-latency-ms.
  double bandwidth_gbps = 0;     // --dcn-bandwidth-gbps.
};

void define_multislice_options(CLI::App& app, MultisliceFlags& flags) {
  const char* group = "Multislice (data parallelism over the data-center network between slices)";
  app.add_option("--num-slices", flags.num_slices, "N: slices in the run; each computes 1/N of every batch")
      ->check(integer_range(1, 4096, "an integer from 1 to 4096"))
      ->default_str("$MEGASCALE_NUM_SLICES, $JOBMAN_NUM_SLICES or 1")
      ->group(group);
  app.add_option("--slice-id", flags.slice_id, "This process's slice, 0..N-1")
      ->check(integer_range(0, 4095, "an integer from 0 to 4095"))
      ->default_str("$MEGASCALE_SLICE_ID, $JOBMAN_SLICE_ID or 0")
      ->group(group);
  app.add_option("--num-workers", flags.num_workers, "Processes in the run, all slices together (N x hosts per slice)")
      ->check(integer_range(1, 1'000'000, "an integer from 1 to 1000000"))
      ->default_str("$JOBMAN_NUM_WORKERS, else N")
      ->group(group);
  app.add_option("--coordinator", flags.coordinator,
                 "ADDRESS or ADDRESS:PORT where worker 0 listens and every other process connects")
      ->default_str("$MEGASCALE_COORDINATOR_ADDRESS")
      ->group(group);
  app.add_option("--dcn-port", flags.port, "The coordinator's TCP port when --coordinator names none")
      ->check(integer_range(1, 65535, "a port number from 1 to 65535"))
      ->default_str("$MEGASCALE_PORT or 8081")
      ->group(group);
  app.add_option("--dcn-timeout", flags.timeout_seconds,
                 "Seconds any wait on the network may last (joining, each reduction) before the run ends with "
                 "status 3")
      ->check(real_range(0, 86'400, true, "a positive number of seconds up to a day"))
      ->default_str("60")
      ->group(group);
  app.add_option("--dcn-latency-ms", flags.latency_ms, "Emulated latency of every message between different slices")
      ->check(real_range(0, 60'000, false, "a number of milliseconds from 0 to 60000"))
      ->default_str("$MOCK_DCN_LATENCY_US / 1000, or 0")
      ->group(group);
  app.add_option(
         "--dcn-bandwidth-gbps", flags.bandwidth_gbps,
         "Emulated bandwidth between slices in Gbit/s: each message also takes its size over it; 0 is unlimited")
      ->check(real_range(0, 1e6, false, "a number of Gbit/s from 0 to 1000000"))
      ->default_str("$MOCK_DCN_BANDWIDTH_BPS / 1e9, or 0")
      ->group(group);
}

// Reads environment variable `name` as an unsigned integer up to `high` into `value` when it is set and not empty;
// false (with `error` naming it) when it is malformed.
bool environment_integer(const EnvironmentLookup& environment, const std::string& name, std::uint64_t high,
                         std::optional<std::uint64_t>& value, std::string& error) {
  const auto text = environment(name);
  if (!text || text->empty()) {
    return true;
  }
  std::uint64_t parsed = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), parsed);
  if (ec != std::errc() || end != text->data() + text->size() || parsed > high) {
    error = name + " must be " +
            (high == std::numeric_limits<std::uint64_t>::max() ? std::string("a whole number, 0 or more")
                                                               : "an integer from 0 to " + std::to_string(high)) +
            ", not '" + *text + "'";
    return false;
  }
  value = parsed;
  return true;
}

// The rollback settings from the flags given and the environment; an error message naming the variable at fault, or
// "".
std::string resolve_rollback(const CLI::App& app, const EnvironmentLookup& environment, TrainOptions& options) {
  constexpr auto kAny = std::numeric_limits<std::uint64_t>::max();
  std::string error;
  std::optional<std::uint64_t> before;
  std::optional<std::uint64_t> skip;
  if (app.count("--resume-before-step") == 0) {
    if (!environment_integer(environment, "JOBMAN_RESUME_BEFORE_STEP", kAny, before, error)) {
      return error;
    }
    if (before == 0U) {
      return "JOBMAN_RESUME_BEFORE_STEP must be a step number of at least 1, not '0'";
    }
    options.resume_before = before.value_or(0);
  }
  if (app.count("--skip-steps") == 0) {
    if (!environment_integer(environment, "JOBMAN_SKIP_STEPS", kAny, skip, error)) {
      return error;
    }
    options.skip_steps = skip.value_or(0);
  }
  return "";
}

// The multislice settings from the flags given and the environment; an error message naming the option or
// variable at fault, or "".
std::string resolve_multislice(const CLI::App& app, const MultisliceFlags& flags, const EnvironmentLookup& environment,
                               TrainOptions& options) {
  DcnSettings& settings = options.multislice;
  std::string error;
  // The first of `names` that is set, when the option `flag` was not given.
  const auto from_environment = [&](const char* flag, std::initializer_list<const char*> names, std::uint64_t high,
                                    std::optional<std::uint64_t>& value) {
    if (app.count(flag) > 0) {
      return true;
    }
    for (const char* name : names) {
      if (!environment_integer(environment, name, high, value, error)) {
        return false;
      }
      if (value) {
        return true;
      }
    }
    return true;
  };
  std::optional<std::uint64_t> slices;
  std::optional<std::uint64_t> slice;
  std::optional<std::uint64_t> workers;
  std::optional<std::uint64_t> port;
  std::optional<std::uint64_t> latency_us;
  std::optional<std::uint64_t> bandwidth;
  if (!from_environment("--num-slices", {"MEGASCALE_NUM_SLICES", "JOBMAN_NUM_SLICES"}, 4096, slices) ||
      !from_environment("--slice-id", {"MEGASCALE_SLICE_ID", "JOBMAN_SLICE_ID"}, 4095, slice) ||
      !from_environment("--num-workers", {"JOBMAN_NUM_WORKERS"}, 1'000'000, workers) ||
      !from_environment("--dcn-port", {"MEGASCALE_PORT"}, 65535, port) ||
      !from_environment("--dcn-latency-ms", {"MOCK_DCN_LATENCY_US"}, 60'000'000, latency_us) ||
      !from_environment("--dcn-bandwidth-gbps", {"MOCK_DCN_BANDWIDTH_BPS"}, std::numeric_limits<std::uint64_t>::max(),
                        bandwidth)) {
    return error;
  }
  settings.num_slices = static_cast<std::uint32_t>(slices.value_or(flags.num_slices));
  settings.slice_id = static_cast<std::uint32_t>(slice.value_or(flags.slice_id));
  settings.worker_id = options.worker_id;
  if (settings.num_slices == 0) {
    return "MEGASCALE_NUM_SLICES must be at least 1";
  }
  if (settings.num_slices == 1) {
    // A run of its own: nothing else applies.
    settings.slice_id = 0;
    settings.num_workers = 1;
    return "";
  }
  settings.num_workers = workers.value_or(app.count("--num-workers") > 0 ? flags.num_workers : settings.num_slices);
  const std::uint64_t port_number = port.value_or(flags.port);
  if (port_number == 0) {
    return "MEGASCALE_PORT must be a port number from 1 to 65535";
  }
  std::string coordinator = flags.coordinator;
  if (app.count("--coordinator") == 0) {
    coordinator = environment("MEGASCALE_COORDINATOR_ADDRESS").value_or("");
  }
  std::ostringstream problem;
  const std::string slices_text = "--num-slices (MEGASCALE_NUM_SLICES) " + std::to_string(settings.num_slices);
  if (coordinator.empty()) {
    problem << slices_text << " needs the coordinator's address: --coordinator or MEGASCALE_COORDINATOR_ADDRESS";
  } else if (const auto address = parse_dcn_address(coordinator, static_cast<std::uint16_t>(port_number)); !address) {
    problem << "--coordinator (MEGASCALE_COORDINATOR_ADDRESS) must be ADDRESS or ADDRESS:PORT, not '" << coordinator
            << "'";
  } else if (settings.num_workers % settings.num_slices != 0) {
    problem << "--num-workers (JOBMAN_NUM_WORKERS) " << settings.num_workers << " is not a multiple of " << slices_text;
  } else if (settings.slice_id >= settings.num_slices) {
    problem << "--slice-id (MEGASCALE_SLICE_ID) " << settings.slice_id << " is not below " << slices_text;
  } else if (settings.worker_id >= settings.num_workers) {
    problem << "--worker-id (JOBMAN_WORKER_ID) " << settings.worker_id << " is not below --num-workers "
            << "(JOBMAN_NUM_WORKERS) " << settings.num_workers;
  } else if (settings.slice_of(settings.worker_id) != settings.slice_id) {
    problem << "--slice-id (MEGASCALE_SLICE_ID) " << settings.slice_id << " does not hold --worker-id "
            << "(JOBMAN_WORKER_ID) " << settings.worker_id << ": with " << settings.hosts_per_slice()
            << " processes per slice it is in slice " << settings.slice_of(settings.worker_id);
  } else {
    settings.coordinator_host = address->host;
    settings.port = address->port;
  }
  if (problem.tellp() > 0) {
    return problem.str();
  }
  settings.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(flags.timeout_seconds * 1000)));
  settings.latency = latency_us
                         ? std::chrono::microseconds(static_cast<std::int64_t>(*latency_us))
                         : std::chrono::microseconds(static_cast<std::int64_t>(std::llround(flags.latency_ms * 1000)));
  settings.bandwidth_bits_per_second =
      bandwidth.value_or(static_cast<std::uint64_t>(std::llround(flags.bandwidth_gbps * 1e9)));
  return "";
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
             "Rollback (jobman sets JOBMAN_RESUME_BEFORE_STEP=K and JOBMAN_SKIP_STEPS=M after a loss spike): resume "
             "from the newest valid checkpoint before step K (from step 0 when there is none), moving the "
             "checkpoints of step K and later into rolled-back/ under --ckpt-dir, and skip the data of M steps; "
             "this prints 'rolling back: ...' first. The shift is kept in later checkpoints, so K and M given again "
             "(after a preemption) do not skip twice.\n"
             "The mock cloud injects step faults through files: the next N steps spike (loss and gradient times F) "
             "while MOCK_TPU_LOSS_SPIKE_FILE holds 'F N' (counted down step by step), and the next step blocks "
             "without a word until SIGTERM or SIGINT once the file MOCK_TPU_HANG_FILE exists (removed as it "
             "hangs).\n"
             "--selftest multiplies a fixed 12x20 by a fixed 20x10 matrix of small integers on the array (--array; "
             "the other options do not apply) and checks the product against its known answer, writing no files: it "
             "prints "
             "'selftest passed: ...' and exits 0, or 'selftest failed: ...' on stderr and exits 1.\n"
             "With N > 1 slices (--num-slices, else MEGASCALE_NUM_SLICES) each slice computes its share of every "
             "batch and the slices all-reduce their exact gradient sums over TCP through worker 0 (--coordinator, "
             "else MEGASCALE_COORDINATOR_ADDRESS; --dcn-port, else MEGASCALE_PORT): the weights are bit for bit those "
             "of one process. Step lines then end with ' dcn_ms=X' (the step's time in the reduction).\n"
             "Exit status: 0 done, 1 non-finite loss, I/O error or failed selftest, 2 bad option, foreign "
             "checkpoints or a refused multislice process, 3 lost another process of a multislice run, 130 SIGINT, "
             "143 SIGTERM.\n");
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
  app.add_option("--keep", options.keep,
                 "How many newest checkpoints worker 0 keeps (a rollback goes back to the newest before its step)")
      ->check(integer_range(1, 1000000, "an integer from 1 to 1000000"))
      ->default_str(std::to_string(options.keep));
  app.add_option("--resume-before-step", options.resume_before,
                 "Roll back: resume from the newest valid checkpoint before step K, not a later one")
      ->check(integer_range(1, std::numeric_limits<std::uint64_t>::max(), "a positive integer"))
      ->default_str("$JOBMAN_RESUME_BEFORE_STEP, else none");
  app.add_option("--skip-steps", options.skip_steps,
                 "With --resume-before-step: skip the data of M steps after the resume point")
      ->check(non_negative_integer())
      ->default_str("$JOBMAN_SKIP_STEPS, else 0");
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
  MultisliceFlags multislice;
  CLI::App app{"", kProgram};
  define_options(app, options);
  define_multislice_options(app, multislice);
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
  std::string problem = resolve_rollback(app, environment, options);
  if (problem.empty()) {
    problem = resolve_multislice(app, multislice, environment, options);
  }
  if (!problem.empty()) {
    result.exit = TrainExit::usage;
    result.message = std::string(kProgram) + ": error: " + problem + "\n";
    return result;
  }
  result.options = options;
  return result;
}

} // namespace jobman::systolic
