#include "jobman/config/job_config.hpp"

#include <charconv>
#include <sstream>

namespace jobman::config {

namespace {

// The value of --prometheus-port among gcsfuse flags ("--prometheus-port 9000", "--prometheus-port=9000"; an entry may
// hold several words), or nullopt when they name none.
std::optional<std::string> prometheus_port_flag(const std::vector<std::string>& flags) {
  std::optional<std::string> value;
  bool next = false;
  for (const auto& flag : flags) {
    std::istringstream words(flag);
    std::string word;
    while (words >> word) {
      if (next) {
        value = word;
        next = false;
      } else if (word == "--prometheus-port" || word == "-prometheus-port") {
        next = true;
        value = "";
      } else if (word.starts_with("--prometheus-port=")) {
        value = word.substr(word.find('=') + 1);
      }
    }
  }
  return value;
}

} // namespace

int GcsfuseSection::metrics_port() const {
  const auto value = prometheus_port_flag(flags);
  if (!value) {
    return kGcsfuseMetricsPort;
  }
  int port = 0;
  const auto* end = value->data() + value->size();
  if (std::from_chars(value->data(), end, port).ptr != end || port < 0 || port > 65535) {
    return 0; // gcsfuse refuses the mount; nothing to read either way.
  }
  return port;
}

bool GcsfuseSection::flags_name_metrics_port() const {
  return prometheus_port_flag(flags).has_value();
}

std::string to_string(AllocationMode value) {
  switch (value) {
  case AllocationMode::queued_resources: return "queued-resources";
  case AllocationMode::tpu_vm: return "tpu-vm";
  }
  return "queued-resources";
}

std::string to_string(EnvType value) {
  switch (value) {
  case EnvType::none: return "none";
  case EnvType::venv: return "venv";
  case EnvType::conda: return "conda";
  case EnvType::docker: return "docker";
  }
  return "none";
}

std::string to_string(CandidateOrder value) {
  return value == CandidateOrder::as_written ? "as-written" : "learned";
}

std::string to_string(CandidateStrategy value) {
  return value == CandidateStrategy::first_ready ? "first-ready" : "sequential";
}

std::string Candidate::label() const {
  return accelerator.name + " " + to_string(pricing) + " in " + zone;
}

std::vector<Candidate> candidates(const JobConfig& config, Pricing pricing) {
  const auto& tpu = config.tpu;
  const auto& accelerators =
      tpu.accelerators.empty() ? std::vector<AcceleratorType>{tpu.accelerator} : tpu.accelerators;
  const auto& zones = tpu.zones.empty() ? std::vector<std::string>{tpu.zone} : tpu.zones;
  std::vector<Candidate> all;
  all.reserve(accelerators.size() * zones.size());
  for (const auto& accelerator : accelerators) {
    for (const auto& zone : zones) {
      all.push_back(Candidate{zone, accelerator, pricing});
    }
  }
  return all;
}

std::vector<Candidate> candidates(const JobConfig& config) {
  std::vector<Candidate> all;
  const auto& pricings = config.tpu.pricings.empty() ? std::vector<Pricing>{config.tpu.pricing} : config.tpu.pricings;
  for (const auto pricing : pricings) {
    auto some = candidates(config, pricing);
    all.insert(all.end(), some.begin(), some.end());
  }
  return all;
}

JobConfig candidate_config(const JobConfig& config, const Candidate& candidate) {
  JobConfig out = config;
  out.tpu.zone = candidate.zone;
  out.tpu.pricing = candidate.pricing;
  if (out.tpu.accelerator.name != candidate.accelerator.name) {
    out.tpu.accelerator = candidate.accelerator;
    if (!out.tpu.version_given && candidate.accelerator.generation != nullptr &&
        !candidate.accelerator.generation->runtime_versions.empty()) {
      out.tpu.version = candidate.accelerator.generation->runtime_versions.front();
    }
  }
  return out;
}

std::string to_string(NotifyEvent event) {
  switch (event) {
  case NotifyEvent::begin: return "BEGIN";
  case NotifyEvent::end: return "END";
  case NotifyEvent::fail: return "FAIL";
  }
  return "END";
}

std::string WorkerSelection::to_gcloud() const {
  if (all) {
    return "all";
  }
  std::string out;
  for (const int index : indices) {
    if (!out.empty()) {
      out += ',';
    }
    out += std::to_string(index);
  }
  return out;
}

const std::string& default_progress_pattern() {
  static const std::string pattern =
      "(^|[^a-z0-9])step[[:space:]]*[=:]?[[:space:]]*([0-9]+)([[:space:]]*(/|of)[[:space:]]*([0-9]+))?";
  return pattern;
}

const std::string& default_loss_pattern() {
  static const std::string pattern =
      "(^|[^a-z0-9])loss[[:space:]]*[=:]?[[:space:]]*([-+]?(nan|inf|[0-9]*[.]?[0-9]+(e[-+]?[0-9]+)?))";
  return pattern;
}

const std::vector<std::string>& default_bad_hardware_patterns() {
  static const std::vector<std::string> patterns{
      // "step=611 loss=nan", "step: 3 | train_loss: -inf": a step line whose loss is not finite.
      "step[[:space:]]*[=:].*loss[a-z_]*[[:space:]]*[=:][[:space:]]*[-+]?(nan|inf)([^a-z0-9_]|$)",
      // jax_debug_nans: "FloatingPointError: invalid value (nan) encountered in mul".
      "invalid value \\((nan|inf)\\) encountered",
      // tf.debugging.check_numerics: "... : Tensor had NaN values".
      "tensor had (nan|inf) values",
      // torch.autograd.detect_anomaly: "Function 'MulBackward0' returned nan values in its 0th output".
      "returned nan values in its",
      // torch.nn.utils.clip_grad_norm_(error_if_nonfinite=True), and "Loss is nan, stopping training" and the like.
      "is non-finite",
      "non-finite loss",
      "(loss|gradients?|grad norm) (is|are|was|became) (nan|inf)([^a-z0-9_]|$)",
  };
  return patterns;
}

std::vector<std::string> bad_hardware_patterns(const RecoverySection& recovery) {
  std::vector<std::string> out;
  for (const auto& pattern : recovery.bad_hardware) {
    if (pattern == "default") {
      const auto& defaults = default_bad_hardware_patterns();
      out.insert(out.end(), defaults.begin(), defaults.end());
    } else {
      out.push_back(pattern);
    }
  }
  return out;
}

} // namespace jobman::config
