// The mock's docker containers: one record per container, and what ends and settles a container.
#include "docker.hpp"

#include <csignal>
#include <iostream>
#include <system_error>

namespace jobman::mock::tools::docker {

json to_json(const Container& c) {
  return {{"Id", c.id},
          {"Name", c.name},
          {"Image", c.image},
          {"Command", c.command},
          {"Pid", c.pid},
          {"PidStart", c.pid_start},
          {"Runner", c.runner},
          {"RunnerStart", c.runner_start},
          {"AutoRemove", c.auto_remove},
          {"Created", c.created},
          {"Finished", c.finished},
          {"ExitCode", c.exit_code ? json(*c.exit_code) : json(nullptr)}};
}

std::optional<Container> read_container(const fs::path& file) {
  const auto record = read_json(file);
  if (!record || !record->is_object()) {
    return std::nullopt;
  }
  Container c;
  c.id = record->value("Id", "");
  c.name = record->value("Name", "");
  c.image = record->value("Image", "");
  c.command = record->value("Command", std::vector<std::string>{});
  c.pid = record->value("Pid", 0);
  c.pid_start = record->value("PidStart", 0LL);
  c.runner = record->value("Runner", 0);
  c.runner_start = record->value("RunnerStart", 0LL);
  c.auto_remove = record->value("AutoRemove", false);
  c.created = record->value("Created", std::int64_t{0});
  c.finished = record->value("Finished", std::int64_t{0});
  if (record->contains("ExitCode") && (*record)["ExitCode"].is_number_integer()) {
    c.exit_code = (*record)["ExitCode"].get<int>();
  }
  c.file = file;
  if (c.id.size() != 64) {
    return std::nullopt;
  }
  return c;
}

std::vector<Container> all_containers() {
  std::vector<Container> containers;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(containers_dir(), ec)) {
    if (entry.path().extension() == ".json" && !entry.path().filename().string().starts_with(".")) {
      if (auto c = read_container(entry.path())) {
        containers.push_back(std::move(*c));
      }
    }
  }
  std::sort(containers.begin(), containers.end(), [](const Container& a, const Container& b) {
    return std::pair(a.created, a.id) > std::pair(b.created, b.id);
  });
  return containers;
}

std::optional<Container> find_container(const std::string& text) {
  const auto containers = all_containers();
  for (const auto& c : containers) {
    if (c.name == text || c.id == text) {
      return c;
    }
  }
  std::optional<Container> match;
  for (const auto& c : containers) {
    if (!text.empty() && c.id.starts_with(text)) {
      if (match) {
        return std::nullopt;
      }
      match = c;
    }
  }
  return match;
}

void signal_container(const Container& c, int signal) {
  if (!same_process(c.pid, c.pid_start)) {
    return;
  }
  if (signal == SIGKILL) {
    ::kill(-c.pid, SIGKILL);
  }
  ::kill(c.pid, signal);
}

void settle(const Container& c, int status) {
  const auto current = [&] {
    auto now = read_container(c.file);
    return now && now->id == c.id ? now : std::nullopt;
  };
  await(
      [&] {
        const auto now = current();
        return !now || now->exit_code || !same_process(c.runner, c.runner_start);
      },
      std::chrono::seconds(5));
  if (auto now = current(); now && !now->exit_code) {
    std::error_code ec;
    if (now->auto_remove) {
      fs::remove(c.file, ec);
    } else {
      now->exit_code = status;
      now->finished = now_seconds();
      write_atomic(kTool, c.file, to_json(*now).dump(2));
    }
  }
}

void kill_container(const Container& c) {
  signal_container(c, SIGKILL);
  await([&] { return !same_process(c.pid, c.pid_start); }, std::chrono::seconds(10));
  settle(c, 128 + SIGKILL);
}

void report_no_such_container(const std::string& name) {
  std::cerr << "Error response from daemon: No such container: " << name << "\n";
}

json inspect_container(const Container& c) {
  const bool running = c.running();
  return {{"Id", c.id},
          {"Created", rfc3339(c.created)},
          {"Path", c.command.empty() ? "" : c.command.front()},
          {"Args", std::vector<std::string>(c.command.begin() + (c.command.empty() ? 0 : 1), c.command.end())},
          {"State",
           {{"Status", running ? "running" : "exited"},
            {"Running", running},
            {"Pid", running ? c.pid : 0},
            {"ExitCode", running ? 0 : c.status()},
            {"StartedAt", rfc3339(c.created)},
            {"FinishedAt", c.finished == 0 ? "0001-01-01T00:00:00Z" : rfc3339(c.finished)}}},
          {"Name", "/" + c.display_name()},
          {"Config", {{"Hostname", c.id.substr(0, 12)}, {"Image", c.image}, {"Cmd", c.command}}},
          {"HostConfig", {{"AutoRemove", c.auto_remove}, {"NetworkMode", "host"}}}};
}

Failure name_conflict(const std::string& name) {
  const auto existing = read_container(containers_dir() / (name + ".json"));
  return usage_error("run", "docker: Error response from daemon: Conflict. The container name \"/" + name +
                                "\" is already in use by container \"" + (existing ? existing->id : "") +
                                "\". You have to remove (or rename) that container to be able to reuse that name.");
}

} // namespace jobman::mock::tools::docker
