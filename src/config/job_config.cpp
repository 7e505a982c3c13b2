#include "jobman/config/job_config.hpp"

namespace jobman::config {

std::string to_string(Pricing value) {
  switch (value) {
  case Pricing::spot: return "spot";
  case Pricing::ondemand: return "ondemand";
  case Pricing::preemptible: return "preemptible";
  }
  return "spot";
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

} // namespace jobman::config
