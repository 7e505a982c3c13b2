#include "systolic/train.hpp"

#include "systolic/checkpoint.hpp"
#include "systolic/hashing.hpp"
#include "systolic/selftest.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace jobman::systolic {

namespace {

using Clock = std::chrono::steady_clock;

// A loss as printed: "nan" and "inf" spelled plainly (printf may write "-nan"), else 9 significant digits.
std::string format_loss(double loss) {
  if (std::isnan(loss)) {
    return "nan";
  }
  if (std::isinf(loss)) {
    return loss > 0 ? "inf" : "-inf";
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", loss);
  return text;
}

std::string format_fraction(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", value);
  return text;
}

// "SIGINT" or "SIGTERM", the stop request `signal` is.
const char* stop_signal_name(int signal) {
  return signal == SIGINT ? "SIGINT" : "SIGTERM";
}

std::string format_milliseconds(std::chrono::nanoseconds duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(duration.count()) / 1e6);
  return text;
}

// "latency=2.000ms bandwidth=25Gbps timeout=60s" for the network between slices.
std::string describe_dcn(const DcnSettings& settings) {
  std::ostringstream text;
  text << "latency=" << format_milliseconds(settings.latency) << "ms bandwidth=";
  if (settings.bandwidth_bits_per_second == 0) {
    text << "unlimited";
  } else {
    text << static_cast<double>(settings.bandwidth_bits_per_second) / 1e9 << "Gbps";
  }
  text << " timeout=" << static_cast<double>(settings.timeout.count()) / 1000.0 << "s";
  return text.str();
}

// The coordinator's reduction: the slices' exact sums added in slice order.
PartialReducer gradient_reducer(std::uint32_t dim) {
  return [dim](const std::vector<std::string>& partials_by_slice) {
    GradientSums total = GradientSums::zeros(dim);
    for (const std::string& bytes : partials_by_slice) {
      const auto sums = GradientSums::decode(bytes, dim);
      if (!sums) {
        throw std::runtime_error("a slice sent malformed gradient sums");
      }
      total += *sums;
    }
    return total.encode();
  };
}

// The training loop of one process.
class TrainingRun {
public:
  TrainingRun(const TrainOptions& options, TrainingIo& io)
      : options_(options), io_(io), task_(options.model), mxu_(options.array),
        writer_(options.worker_id == 0 && !options.ckpt_dir.empty()) {
    if (!options.ckpt_dir.empty()) {
      checkpoints_.emplace(options.ckpt_dir);
    }
    const DcnSettings& multislice = options.multislice;
    share_ = batch_share(options.model.batch, multislice.slice_id, std::max<std::uint32_t>(multislice.num_slices, 1));
  }

  TrainExit run() {
    if (const auto exit = start(); exit != TrainExit::ok) {
      return exit;
    }
    if (const auto exit = join(); exit != TrainExit::ok) {
      return exit;
    }
    while (state_.step < options_.steps) {
      if (const int signal = io_.stop.pending(); signal != 0) {
        return stop(signal);
      }
      const auto step_deadline = Clock::now() + std::chrono::milliseconds(options_.step_time_ms);
      mxu_.set_fault(io_.mxu_faulty && io_.mxu_faulty() ? MxuFault::nan_multiplier : MxuFault::none);
      const StepFault fault = io_.step_fault ? io_.step_fault() : StepFault{};
      if (fault.hang) {
        return hang();
      }
      const auto gradient_scale = static_cast<float>(fault.loss_spike);
      StepReport report;
      std::chrono::nanoseconds reduction{0};
      if (link_) {
        const PartialStep partial = task_.partial_step(state_, mxu_, share_, gradient_scale);
        std::string reduced;
        const auto reduce_start = Clock::now();
        const DcnOutcome outcome = link_->all_reduce(state_.step + 1, partial.sums.encode(), reduced);
        reduction = Clock::now() - reduce_start;
        if (outcome.status != DcnStatus::ok) {
          return network_failure(outcome);
        }
        const auto sums = GradientSums::decode(reduced, options_.model.dim);
        if (!sums) {
          return fail("the coordinator sent malformed gradient sums for step=" + std::to_string(state_.step + 1));
        }
        report = task_.apply_step(state_, *sums, partial.mxu);
      } else {
        report = task_.train_step(state_, mxu_, gradient_scale);
      }
      report.loss *= fault.loss_spike;
      io_.out << "step=" << report.step << " loss=" << format_loss(report.loss)
              << " mxu_util=" << format_fraction(report.mxu.utilisation()) << " cycles=" << report.mxu.cycles();
      if (link_) {
        io_.out << " dcn_ms=" << format_milliseconds(reduction);
      }
      io_.out << std::endl;
      if (!report.applied) {
        io_.out << "error: non-finite loss at step " << report.step << std::endl;
        leave("a non-finite loss at step=" + std::to_string(report.step));
        return TrainExit::failure;
      }
      if (state_.step % options_.ckpt_every == 0 || state_.step == options_.steps) {
        if (!save()) {
          leave("its checkpoint of step=" + std::to_string(state_.step) + " failed");
          return TrainExit::failure;
        }
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(step_deadline - Clock::now());
      if (const int signal = io_.stop.wait_for(std::max(left, std::chrono::milliseconds(0))); signal != 0) {
        return stop(signal);
      }
    }
    io_.out << "checksum=" << hex64(weights_checksum(state_.weights)) << std::endl;
    return TrainExit::ok;
  }

private:
  // With N > 1 slices: prints the layout and joins the run's network; ok at once without.
  TrainExit join() {
    const DcnSettings& multislice = options_.multislice;
    if (multislice.num_slices <= 1) {
      return TrainExit::ok;
    }
    io_.out << "multislice: slice " << multislice.slice_id << " of " << multislice.num_slices << ", worker "
            << multislice.worker_id << " of " << multislice.num_workers << " (" << multislice.hosts_per_slice()
            << " per slice), examples " << share_.begin << ".." << share_.end << " of " << options_.model.batch
            << ", coordinator " << multislice.coordinator_host << ":" << multislice.port
            << (multislice.coordinator() ? " (this process)" : "") << ", dcn " << describe_dcn(multislice) << std::endl;
    link_ = make_dcn_link(multislice, io_.stop, gradient_reducer(options_.model.dim));
    const DcnOutcome outcome = link_->join({options_.model, options_.steps, state_.step});
    return outcome.status == DcnStatus::ok ? TrainExit::ok : network_failure(outcome);
  }

  // Ends the run after a network operation did not succeed.
  TrainExit network_failure(const DcnOutcome& outcome) {
    switch (outcome.status) {
    case DcnStatus::stopped: return stop(outcome.signal);
    case DcnStatus::lost:
      io_.out << "error: " << outcome.message << std::endl;
      // The last completed step is the same everywhere: keep it, as a stop would.
      if (state_.step > 0 && options_.save_on_stop) {
        save();
      }
      return TrainExit::lost_peer;
    case DcnStatus::refused: io_.out << "error: " << outcome.message << std::endl; return TrainExit::usage;
    case DcnStatus::ok:
    case DcnStatus::failed: break;
    }
    io_.out << "error: " << outcome.message << std::endl;
    return TrainExit::failure;
  }

  // Reports `message` as the run's end, tells the other processes, and fails.
  TrainExit fail(const std::string& message) {
    io_.out << "error: " << message << std::endl;
    leave(message);
    return TrainExit::failure;
  }

  // Tells the other processes of a multislice run that this one leaves it because of `reason`.
  void leave(const std::string& reason) {
    if (link_) {
      link_->leave(reason);
    }
  }

  // Resumes from the newest valid checkpoint (before options_.resume_before, with one) or starts from the initial
  // state; prints the first line (or two, when rolling back).
  TrainExit start() {
    state_ = task_.initial_state();
    if (!checkpoints_) {
      roll_back(std::nullopt);
      io_.out << "starting from step=0 of " << options_.steps << std::endl;
      return TrainExit::ok;
    }
    std::optional<LoadedCheckpoint> loaded;
    try {
      if (writer_) {
        for (const auto& file : checkpoints_->remove_temporaries()) {
          io_.err << "systolic-train: removed " << file.string() << ", left by a writer that died mid-write"
                  << std::endl;
        }
      }
      std::vector<SkippedCheckpoint> skipped;
      // A rollback before step K passes over the checkpoints of step K and later, unless they were written after
      // this same rollback (an attempt that rolled back, passed K, and was stopped before jobman saw it pass).
      const std::uint64_t before = options_.resume_before;
      std::vector<std::filesystem::path> discarded;
      loaded = checkpoints_->load_newest_valid(
          [&](const SkippedCheckpoint& bad) {
            io_.err << "systolic-train: warning: skipping checkpoint " << bad.path.string() << ": " << bad.reason
                    << std::endl;
            skipped.push_back(bad);
          },
          [&](const LoadedCheckpoint& candidate) {
            const TrainingState& state = candidate.checkpoint.state;
            if (before == 0 || state.step < before || state.rollback_step == before) {
              return true;
            }
            discarded.push_back(candidate.path);
            return false;
          });
      // The writer moves them aside, so that no later resume without a rollback can pick them.
      for (const auto& file : discarded) {
        if (writer_) {
          if (const auto moved = checkpoints_->roll_back(file)) {
            io_.err << "systolic-train: rolled back " << file.string() << " to " << moved->string() << std::endl;
          }
        }
      }
      // The writer moves damaged files aside: left in place they would shadow the checkpoints it writes next.
      for (const SkippedCheckpoint& bad : skipped) {
        if (writer_) {
          if (const auto moved = checkpoints_->set_aside(bad.path)) {
            io_.err << "systolic-train: moved " << bad.path.string() << " to " << moved->string() << std::endl;
          }
        }
      }
    } catch (const CheckpointError& e) {
      io_.out << "error: " << e.what() << std::endl;
      return TrainExit::failure;
    }
    if (!loaded) {
      roll_back(std::nullopt);
      io_.out << "starting from step=0 of " << options_.steps << std::endl;
      return TrainExit::ok;
    }
    if (!(loaded->checkpoint.config == options_.model)) {
      io_.out << "error: checkpoint " << loaded->path.string() << " belongs to a different run ("
              << describe_config_differences(loaded->checkpoint.config, options_.model)
              << "); use the same options or another --ckpt-dir" << std::endl;
      return TrainExit::usage;
    }
    state_ = std::move(loaded->checkpoint.state);
    last_saved_ = state_.step;
    roll_back(loaded->path);
    io_.out << "resumed from step=" << state_.step << " of " << options_.steps
            << " checkpoint=" << loaded->path.string() << std::endl;
    return TrainExit::ok;
  }

  // With a rollback before step K, once the state to resume from (that of `checkpoint`, or the initial state) is
  // chosen: says so, and skips the data of options_.skip_steps steps unless the state includes this rollback already.
  void roll_back(const std::optional<std::filesystem::path>& checkpoint) {
    const std::uint64_t before = options_.resume_before;
    if (before == 0) {
      return;
    }
    io_.out << "rolling back: ";
    if (!checkpoint) {
      io_.out << "starting from step=0, no checkpoint before step " << before;
    } else if (state_.step < before) {
      io_.out << "resuming from step=" << state_.step << ", the newest checkpoint before step " << before;
    } else {
      io_.out << "resuming from step=" << state_.step << ", a checkpoint written after this rollback before step "
              << before;
    }
    if (state_.rollback_step == before) {
      io_.out << "; its data shift " << state_.data_shift << " already includes this rollback's skip";
    } else {
      state_.data_shift += options_.skip_steps;
      state_.rollback_step = before;
      if (options_.skip_steps > 0) {
        io_.out << "; skipping the data of " << options_.skip_steps << " steps (data shift " << state_.data_shift
                << ")";
      }
    }
    io_.out << std::endl;
  }

  // Writes the current state when this process is the writer and it is not saved yet; false after an I/O error.
  bool save() {
    if (!writer_ || last_saved_ == state_.step) {
      return true;
    }
    try {
      const auto path = checkpoints_->save({options_.model, state_});
      last_saved_ = state_.step;
      io_.out << "checkpoint step=" << state_.step << " path=" << path.string() << std::endl;
      checkpoints_->prune(options_.keep, state_.step);
      return true;
    } catch (const CheckpointError& e) {
      io_.out << "error: " << e.what() << std::endl;
      return false;
    }
  }

  // Ends the run early after `signal`, saving the last completed step first (unless --no-save-on-stop) so no work is
  // lost.
  TrainExit stop(int signal) {
    const char* name = stop_signal_name(signal);
    io_.out << "terminated at step=" << state_.step << " by " << name << std::endl;
    leave(std::string("stopped by ") + name + " after step=" + std::to_string(state_.step));
    if (state_.step > 0 && options_.save_on_stop) {
      save();
    }
    return signal == SIGINT ? TrainExit::interrupted : TrainExit::terminated;
  }

  // Blocks at the start of step state_.step + 1 without a word, as a process stuck in a collective that never returns
  // does, until SIGTERM or SIGINT ends it; a hung process saves nothing.
  TrainExit hang() {
    const int signal = io_.stop.block_until_stopped();
    const char* name = stop_signal_name(signal);
    io_.out << "terminated at step=" << state_.step << " by " << name << " while hung in step=" << state_.step + 1
            << ", nothing saved" << std::endl;
    leave(std::string("stopped by ") + name + " while hung in step=" + std::to_string(state_.step + 1));
    return signal == SIGINT ? TrainExit::interrupted : TrainExit::terminated;
  }

  const TrainOptions& options_;                    // The command line.
  TrainingIo& io_;                                 // Output, stop requests, the fault probe.
  TeacherStudentTask task_;                        // The model and its data.
  SystolicArray mxu_;                              // The simulated matrix unit.
  bool writer_;                                    // True for worker 0 with a checkpoint directory.
  std::optional<CheckpointDirectory> checkpoints_; // Set with --ckpt-dir.
  TrainingState state_;                            // Where training is.
  std::optional<std::uint64_t> last_saved_;        // The step of the newest checkpoint on disk, if known.
  ExampleRange share_;                             // This slice's examples of every batch.
  std::unique_ptr<DcnLink> link_;                  // The network between slices; null in a run of one slice.
};

} // namespace

TrainExit run_training(const TrainOptions& options, TrainingIo& io) {
  TrainingRun run(options, io);
  return run.run();
}

TrainExit run_selftest(const TrainOptions& options, TrainingIo& io) {
  SystolicArray mxu(options.array);
  // The same probe the training asks before every step.
  mxu.set_fault(io.mxu_faulty && io.mxu_faulty() ? MxuFault::nan_multiplier : MxuFault::none);
  const auto report = multiply_known_answer(mxu);
  (report.passed() ? io.out : io.err) << report.summary() << std::endl;
  return report.passed() ? TrainExit::ok : TrainExit::failure;
}

int systolic_train_main(int argc, char** argv) {
  const auto parsed = parse_command_line(argc, argv, [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    return value == nullptr ? std::nullopt : std::optional<std::string>(value);
  });
  if (!parsed.options) {
    (parsed.exit == TrainExit::ok ? std::cout : std::cerr) << parsed.message << std::flush;
    return static_cast<int>(parsed.exit);
  }
  try {
    const auto stop = make_process_stop_signals();
    const char* fault_file = std::getenv("MOCK_TPU_FAULT_FILE");
    const auto path_from = [](const char* variable) {
      const char* value = std::getenv(variable);
      return std::filesystem::path(value == nullptr ? "" : value);
    };
    StepFaultFiles step_faults(path_from("MOCK_TPU_LOSS_SPIKE_FILE"), path_from("MOCK_TPU_HANG_FILE"));
    TrainingIo io{std::cout, std::cerr, *stop,
                  [fault_file] {
                    std::error_code ec;
                    return fault_file != nullptr && *fault_file != '\0' && std::filesystem::exists(fault_file, ec);
                  },
                  [&step_faults] { return step_faults.next_step(std::cerr); }};
    const auto& options = *parsed.options;
    return static_cast<int>(options.selftest ? run_selftest(options, io) : run_training(options, io));
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << std::endl;
    return static_cast<int>(TrainExit::failure);
  }
}

} // namespace jobman::systolic
