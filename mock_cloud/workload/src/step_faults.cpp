#include "systolic/step_faults.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <system_error>
#include <unistd.h>

namespace jobman::systolic {

namespace {

namespace fs = std::filesystem;

// `text` without leading and trailing blanks and newlines.
std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// The whole content of the file open on `fd` (a few bytes), then closes it; nothing after a read error.
std::optional<std::string> read_and_close(int fd) {
  std::string text;
  char chunk[256];
  for (;;) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got > 0) {
      text.append(chunk, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      const bool ok = got == 0;
      ::close(fd);
      return ok ? std::optional<std::string>(text) : std::nullopt;
    }
  }
}

} // namespace

std::optional<LossSpike> parse_loss_spike(std::string_view text) {
  text = trimmed(text);
  const auto blank = text.find_first_of(" \t");
  if (blank == std::string_view::npos) {
    return std::nullopt;
  }
  const std::string_view factor_text = text.substr(0, blank);
  const std::string_view steps_text = trimmed(text.substr(blank));
  LossSpike spike;
  const auto [factor_end, factor_error] =
      std::from_chars(factor_text.data(), factor_text.data() + factor_text.size(), spike.factor);
  const auto [steps_end, steps_error] =
      std::from_chars(steps_text.data(), steps_text.data() + steps_text.size(), spike.steps);
  if (factor_error != std::errc() || factor_end != factor_text.data() + factor_text.size() ||
      !std::isfinite(spike.factor) || spike.factor <= 0 || steps_error != std::errc() ||
      steps_end != steps_text.data() + steps_text.size() || spike.steps == 0) {
    return std::nullopt;
  }
  return spike;
}

std::string format_loss_spike(const LossSpike& spike) {
  char factor[40];
  std::snprintf(factor, sizeof factor, "%.17g", spike.factor);
  return std::string(factor) + " " + std::to_string(spike.steps) + "\n";
}

StepFaultFiles::StepFaultFiles(fs::path loss_spike, fs::path hang)
    : loss_spike_(std::move(loss_spike)), hang_(std::move(hang)) {}

StepFault StepFaultFiles::next_step(std::ostream& warnings) {
  StepFault fault;
  // A fault that cannot be consumed is reported once and ignored from then on: applied, it would apply forever.
  const auto give_up = [&warnings](fs::path& file, const std::string& problem, const std::string& reason) {
    warnings << "systolic-train: warning: " << problem << " " << file.string() << (reason.empty() ? "" : ": ") << reason
             << "; ignoring it from now on" << std::endl;
    file.clear();
  };
  const auto reason_of = [](int error) { return std::generic_category().message(error); };
  if (!hang_.empty()) {
    // Removing it is the check: a hang is consumed exactly once.
    if (::unlink(hang_.c_str()) == 0) {
      fault.hang = true;
      return fault;
    }
    if (const int error = errno; error != ENOENT) {
      give_up(hang_, "cannot remove the hang file", reason_of(error));
    }
  }
  if (loss_spike_.empty()) {
    return fault;
  }
  const int fd = ::open(loss_spike_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (const int error = errno; error != ENOENT) {
      give_up(loss_spike_, "cannot open the loss spike file", reason_of(error));
    }
    return fault;
  }
  const auto text = read_and_close(fd);
  const auto spike = text ? parse_loss_spike(*text) : std::nullopt;
  if (!spike) {
    give_up(loss_spike_, "no 'FACTOR STEPS' in the loss spike file", "");
    return fault;
  }
  if (spike->steps == 1) {
    if (::unlink(loss_spike_.c_str()) != 0) {
      const int error = errno;
      give_up(loss_spike_, "cannot remove the spent loss spike file", reason_of(error));
      return fault;
    }
  } else {
    // Rewritten through a temporary file and a rename, so that no reader ever sees half a count.
    const fs::path temporary = loss_spike_.string() + ".tmp-" + std::to_string(::getpid());
    {
      std::ofstream out(temporary, std::ios::trunc);
      out << format_loss_spike({spike->factor, spike->steps - 1});
    }
    std::error_code ec;
    fs::rename(temporary, loss_spike_, ec);
    if (ec) {
      const std::string reason = ec.message();
      fs::remove(temporary, ec);
      give_up(loss_spike_, "cannot count down the loss spike file", reason);
      return fault;
    }
  }
  fault.loss_spike = spike->factor;
  return fault;
}

} // namespace jobman::systolic
