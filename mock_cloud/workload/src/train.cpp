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

// "dim 32 there, 16 here; ..." for the fields in which a checkpoint's run differs from this one.
std::string describe_differences(const ModelConfig& there, const ModelConfig& here) {
  std::ostringstream text;
  const auto field = [&](const char* option, const auto& a, const auto& b) {
    if (a != b) {
      text << (text.tellp() > 0 ? ", " : "") << option << " " << a << " there, " << b << " here";
    }
  };
  field("--dim", there.dim, here.dim);
  field("--batch", there.batch, here.batch);
  field("--seed", there.seed, here.seed);
  field("--lr", there.learning_rate, here.learning_rate);
  field("--momentum", there.momentum, here.momentum);
  return text.str();
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
  }

  TrainExit run() {
    if (const auto exit = start(); exit != TrainExit::ok) {
      return exit;
    }
    while (state_.step < options_.steps) {
      if (const int signal = io_.stop.pending(); signal != 0) {
        return stop(signal);
      }
      const auto step_deadline = Clock::now() + std::chrono::milliseconds(options_.step_time_ms);
      mxu_.set_fault(io_.mxu_faulty && io_.mxu_faulty() ? MxuFault::nan_multiplier : MxuFault::none);
      const StepReport report = task_.train_step(state_, mxu_);
      io_.out << "step=" << report.step << " loss=" << format_loss(report.loss)
              << " mxu_util=" << format_fraction(report.mxu.utilisation()) << " cycles=" << report.mxu.cycles()
              << std::endl;
      if (!report.applied) {
        io_.out << "error: non-finite loss at step " << report.step << std::endl;
        return TrainExit::failure;
      }
      if (state_.step % options_.ckpt_every == 0 || state_.step == options_.steps) {
        if (!save()) {
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
  // Resumes from the newest valid checkpoint or starts from the initial state; prints the first line.
  TrainExit start() {
    state_ = task_.initial_state();
    if (!checkpoints_) {
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
      loaded = checkpoints_->load_newest_valid([&](const SkippedCheckpoint& bad) {
        io_.err << "systolic-train: warning: skipping checkpoint " << bad.path.string() << ": " << bad.reason
                << std::endl;
        skipped.push_back(bad);
      });
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
      io_.out << "starting from step=0 of " << options_.steps << std::endl;
      return TrainExit::ok;
    }
    if (!(loaded->checkpoint.config == options_.model)) {
      io_.out << "error: checkpoint " << loaded->path.string() << " belongs to a different run ("
              << describe_differences(loaded->checkpoint.config, options_.model)
              << "); use the same options or another --ckpt-dir" << std::endl;
      return TrainExit::usage;
    }
    state_ = std::move(loaded->checkpoint.state);
    last_saved_ = state_.step;
    io_.out << "resumed from step=" << state_.step << " of " << options_.steps
            << " checkpoint=" << loaded->path.string() << std::endl;
    return TrainExit::ok;
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
    io_.out << "terminated at step=" << state_.step << " by " << (signal == SIGINT ? "SIGINT" : "SIGTERM") << std::endl;
    if (state_.step > 0 && options_.save_on_stop) {
      save();
    }
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
    TrainingIo io{std::cout, std::cerr, *stop, [fault_file] {
                    std::error_code ec;
                    return fault_file != nullptr && *fault_file != '\0' && std::filesystem::exists(fault_file, ec);
                  }};
    const auto& options = *parsed.options;
    return static_cast<int>(options.selftest ? run_selftest(options, io) : run_training(options, io));
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << std::endl;
    return static_cast<int>(TrainExit::failure);
  }
}

} // namespace jobman::systolic
