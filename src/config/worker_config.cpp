#include "jobman/config/worker_config.hpp"

#include "jobman/domain/pricing.hpp"

#include <yaml-cpp/yaml.h>

namespace jobman::config {

std::string worker_config_yaml(const WorkerFlags& flags) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "job" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << flags.name;
  if (!flags.ssh_user.empty()) {
    out << YAML::Key << "remote_user" << YAML::Value << flags.ssh_user;
  }
  out << YAML::EndMap;
  out << YAML::Key << "tpu" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << flags.name;
  out << YAML::Key << "accelerator" << YAML::Value << flags.accelerator;
  out << YAML::Key << "zone" << YAML::Value << flags.zone;
  if (flags.pricing) {
    out << YAML::Key << "pricing" << YAML::Value << domain::to_string(*flags.pricing);
  }
  if (!flags.allocation_mode.empty()) {
    out << YAML::Key << "allocation_mode" << YAML::Value << flags.allocation_mode;
  }
  if (!flags.version.empty()) {
    out << YAML::Key << "version" << YAML::Value << flags.version;
  }
  if (!flags.idle_release.empty()) {
    out << YAML::Key << "idle_release" << YAML::Value << flags.idle_release;
  }
  out << YAML::EndMap;
  if (!flags.startup_script.empty()) {
    out << YAML::Key << "setup" << YAML::Value << YAML::BeginMap;
    // The path: the loader reads the file, and the snapshot keeps its text as it was at start.
    out << YAML::Key << "script" << YAML::Value << flags.startup_script;
    out << YAML::EndMap;
  }
  // A worker runs its tasks, never a command of its own; the section is there because every config has one.
  out << YAML::Key << "command" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "cmd" << YAML::Value << "# a worker runs the tasks it takes from the queue";
  out << YAML::EndMap;
  out << YAML::Key << "recovery" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "max_failures" << YAML::Value << flags.max_setup_failures.value_or(5);
  out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

} // namespace jobman::config
