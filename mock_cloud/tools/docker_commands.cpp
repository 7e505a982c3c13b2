// docker's other commands: pull, images, rmi, inspect, ps, stop, kill, rm and info.
#include "docker.hpp"

#include <algorithm>
#include <array>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <system_error>

namespace jobman::mock::tools::docker {

int pull_command(const std::vector<std::string>& args) {
  static constexpr std::array kFlags = {OptionSpec{"quiet", 'q', false}, OptionSpec{"all-tags", 'a', false},
                                        OptionSpec{"platform", 0, true}};
  const auto parsed = parse_args(args, kFlags, "pull", FirstOperand::kMixesWithOptions);
  if (parsed.operands.size() != 1) {
    throw Failure("docker: 'docker pull' requires 1 argument.\nSee 'docker pull --help'.", 1);
  }
  const auto ref = image_ref_or_fail(parsed.operands.front(), "", 1);
  if (parsed.on("quiet")) {
    std::ostringstream ignored;
    pull(ref, ignored);
    std::cout << ref.canonical() << "\n";
  } else {
    pull(ref, std::cout);
  }
  return 0;
}

namespace {

// Prints the objects `names` name as `docker inspect` does; `find` looks one up, `missing` words a miss.
int inspect_objects(const std::vector<std::string>& names, const std::optional<std::string>& format,
                    const std::function<std::optional<json>(const std::string&)>& find, const std::string& missing) {
  json found = json::array();
  int status = 0;
  for (const auto& name : names) {
    if (auto object = find(name)) {
      found.push_back(std::move(*object));
    } else {
      std::cerr << "Error: " << missing << name << "\n";
      status = 1;
    }
  }
  if (format) {
    for (const auto& object : found) {
      std::cout << apply_format(object, *format) << "\n";
    }
  } else {
    std::cout << found.dump(4) << "\n";
  }
  return status;
}

// An image as `docker image inspect` shows it.
std::optional<json> inspect_image(const std::string& name) {
  auto image = find_image(name);
  if (image) {
    image->erase("CreatedUnix");
    image->erase("Reference");
  }
  return image;
}

} // namespace

int inspect_command(const std::vector<std::string>& args, std::string type) {
  static constexpr std::array kFlags = {OptionSpec{"type", 0, true}, OptionSpec{"format", 'f', true},
                                        OptionSpec{"size", 's', false}};
  const auto parsed =
      parse_args(args, kFlags, type == "image" ? "image inspect" : "inspect", FirstOperand::kMixesWithOptions);
  type = parsed.value("type").value_or(type);
  if (parsed.operands.empty()) {
    throw Failure("docker: 'docker inspect' requires at least 1 argument.\nSee 'docker inspect --help'.", 1);
  }
  const auto format = parsed.value("format");
  if (type == "image") {
    return inspect_objects(parsed.operands, format, inspect_image, "No such image: ");
  }
  const auto container = [](const std::string& name) -> std::optional<json> {
    if (auto c = find_container(name)) {
      return inspect_container(*c);
    }
    return std::nullopt;
  };
  if (type == "container") {
    return inspect_objects(parsed.operands, format, container, "No such container: ");
  }
  if (!type.empty()) {
    throw Failure("docker: the mock's docker inspects images and containers, not \"" + type + "\"", 1);
  }
  return inspect_objects(
      parsed.operands, format,
      [&](const std::string& name) {
        auto object = container(name);
        return object ? object : inspect_image(name);
      },
      "No such object: ");
}

int images_command(const std::vector<std::string>& args) {
  static constexpr std::array kFlags = {OptionSpec{"quiet", 'q', false}, OptionSpec{"all", 'a', false},
                                        OptionSpec{"no-trunc", 0, false}, OptionSpec{"digests", 0, false}};
  const auto parsed = parse_args(args, kFlags, "images", FirstOperand::kMixesWithOptions);
  const bool no_trunc = parsed.on("no-trunc");
  std::vector<std::vector<std::string>> rows = {{"REPOSITORY", "TAG", "IMAGE ID", "CREATED", "SIZE"}};
  for (const auto& image : all_images()) {
    const auto ref = parse_image_ref(image.value("Reference", ""));
    if (!ref) {
      continue;
    }
    if (!parsed.operands.empty() && parsed.operands.front() != ref->repository() &&
        parsed.operands.front() != ref->familiar()) {
      continue;
    }
    const std::string id = image.value("Id", "");
    if (parsed.on("quiet")) {
      std::cout << (no_trunc ? id : id.substr(7, 12)) << "\n";
      continue;
    }
    rows.push_back({ref->repository(), ref->digest.empty() ? ref->tag : "<none>", no_trunc ? id : id.substr(7, 12),
                    human_duration(now_seconds() - image.value("CreatedUnix", now_seconds())) + " ago", "0B"});
  }
  if (!parsed.on("quiet")) {
    print_table(rows);
  }
  return 0;
}

int rmi_command(const std::vector<std::string>& args) {
  static constexpr std::array kFlags = {OptionSpec{"force", 'f', false}, OptionSpec{"no-prune", 0, false}};
  const auto parsed = parse_args(args, kFlags, "rmi", FirstOperand::kMixesWithOptions);
  int status = 0;
  for (const auto& name : parsed.operands) {
    const auto image = find_image(name);
    const auto ref = image ? parse_image_ref(image->value("Reference", "")) : std::nullopt;
    if (!ref) {
      std::cerr << "Error response from daemon: No such image: " << name << "\n";
      status = 1;
      continue;
    }
    const auto containers = all_containers();
    const auto user = std::find_if(containers.begin(), containers.end(),
                                   [&](const Container& c) { return c.image == ref->familiar(); });
    if (user != containers.end() && !parsed.on("force")) {
      std::cerr << "Error response from daemon: conflict: unable to remove repository reference \"" << name
                << "\" (must force) - container " << user->id.substr(0, 12) << " is using its referenced image "
                << image->value("Id", "").substr(7, 12) << "\n";
      status = 1;
      continue;
    }
    std::error_code ec;
    fs::remove(image_file(*ref), ec);
    std::cout << "Untagged: " << ref->familiar() << "\nDeleted: " << image->value("Id", "") << "\n";
  }
  return status;
}

int ps_command(const std::vector<std::string>& args) {
  static constexpr std::array kFlags = {OptionSpec{"all", 'a', false}, OptionSpec{"quiet", 'q', false},
                                        OptionSpec{"filter", 'f', true}, OptionSpec{"no-trunc", 0, false}};
  const auto parsed = parse_args(args, kFlags, "ps", FirstOperand::kMixesWithOptions);
  if (!parsed.operands.empty()) {
    throw usage_error("ps", "\"docker ps\" accepts no arguments.");
  }
  std::multimap<std::string, std::string> filters;
  for (const auto& filter : parsed.values("filter")) {
    const auto equals = filter.find('=');
    const auto key = filter.substr(0, equals);
    if (equals == std::string::npos || (key != "name" && key != "id" && key != "status")) {
      throw Failure("Error response from daemon: invalid filter '" + filter +
                        "' (the mock's docker filters by name, id and status)",
                    1);
    }
    filters.emplace(key, filter.substr(equals + 1));
  }
  const bool no_trunc = parsed.on("no-trunc");
  const auto now = now_seconds();
  std::vector<std::vector<std::string>> rows = {
      {"CONTAINER ID", "IMAGE", "COMMAND", "CREATED", "STATUS", "PORTS", "NAMES"}};
  for (const auto& c : all_containers()) {
    const bool running = c.running();
    if (!running && !parsed.on("all") && filters.count("status") == 0) {
      continue;
    }
    const auto matches = [&](const std::string& key, const std::function<bool(const std::string&)>& test) {
      const auto [first, last] = filters.equal_range(key);
      return first == last || std::any_of(first, last, [&](const auto& entry) { return test(entry.second); });
    };
    if (!matches("name", [&](const std::string& v) { return c.display_name().find(v) != std::string::npos; }) ||
        !matches("id", [&](const std::string& v) { return c.id.starts_with(v); }) ||
        !matches("status", [&](const std::string& v) { return v == (running ? "running" : "exited"); })) {
      continue;
    }
    if (parsed.on("quiet")) {
      std::cout << (no_trunc ? c.id : c.id.substr(0, 12)) << "\n";
      continue;
    }
    std::string command = join(c.command, " ");
    if (!no_trunc && command.size() > 20) {
      command = command.substr(0, 19) + "…";
    }
    const std::string status =
        running ? "Up " + human_duration(now - c.created)
                : "Exited (" + std::to_string(c.status()) + ") " + human_duration(now - c.finished) + " ago";
    rows.push_back({no_trunc ? c.id : c.id.substr(0, 12), c.image, "\"" + command + "\"",
                    human_duration(now - c.created) + " ago", status, "", c.display_name()});
  }
  if (!parsed.on("quiet")) {
    print_table(rows);
  }
  return 0;
}

namespace {

// What became of a container a command was given.
enum class ContainerOutcome {
  kDone,    // The command did what it does: the container's name is echoed.
  kRefused, // The command could not, and said why on stderr: the exit status is 1.
};

// Runs `docker COMMAND`'s `act` on each container `names` names, as docker's stop, kill and rm do: echoes each name
// acted on; reports a name that finds no container or a container `act` refuses, and returns 1 for it (else 0).
int for_each_container(const std::string& command, const std::vector<std::string>& names,
                       const std::function<ContainerOutcome(const Container& c, const std::string& name)>& act) {
  if (names.empty()) {
    throw Failure(
        "docker: 'docker " + command + "' requires at least 1 argument.\nSee 'docker " + command + " --help'.", 1);
  }
  int status = 0;
  for (const auto& name : names) {
    const auto c = find_container(name);
    if (!c) {
      report_no_such_container(name);
      status = 1;
      continue;
    }
    if (act(*c, name) == ContainerOutcome::kRefused) {
      status = 1;
      continue;
    }
    std::cout << name << "\n";
  }
  return status;
}

} // namespace

int stop_command(const std::vector<std::string>& args) {
  static constexpr std::array kFlags = {OptionSpec{"time", 't', true}, OptionSpec{"timeout", 0, true},
                                        OptionSpec{"signal", 's', true}};
  const auto parsed = parse_args(args, kFlags, "stop", FirstOperand::kMixesWithOptions);
  const auto time = parsed.value("time") ? parsed.value("time") : parsed.value("timeout");
  char* end = nullptr;
  const long seconds = time ? std::strtol(time->c_str(), &end, 10) : 10;
  if (time && (end == time->c_str() || *end != '\0')) {
    throw usage_error("stop", "invalid argument \"" + *time + "\" for \"-t, --time\" flag: invalid syntax");
  }
  if (parsed.value("signal")) {
    throw usage_error("stop", "docker: the mock's docker stops containers with SIGTERM only (no --signal)");
  }
  return for_each_container("stop", parsed.operands, [&](const Container& c, const std::string&) {
    if (c.running()) {
      signal_container(c, SIGTERM);
      const auto gone = [&] { return !same_process(c.pid, c.pid_start); };
      // A negative timeout waits for as long as it takes, as docker's does.
      if (await(gone, seconds < 0 ? std::chrono::hours(24 * 365) : std::chrono::seconds(seconds))) {
        settle(c, 128 + SIGTERM);
      } else {
        kill_container(c);
      }
    }
    return ContainerOutcome::kDone;
  });
}

namespace {

// A signal named as docker takes it: "KILL", "SIGKILL" or "9".
int parse_signal(const std::string& text) {
  static const std::map<std::string, int> kSignals = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},
                                                      {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
                                                      {"TERM", SIGTERM}, {"STOP", SIGSTOP}, {"CONT", SIGCONT}};
  std::string name = text;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
  if (name.starts_with("SIG")) {
    name.erase(0, 3);
  }
  if (const auto it = kSignals.find(name); it != kSignals.end()) {
    return it->second;
  }
  char* end = nullptr;
  const long number = std::strtol(text.c_str(), &end, 10);
  if (end != text.c_str() && *end == '\0' && number > 0 && number < 65) {
    return static_cast<int>(number);
  }
  throw Failure("Error response from daemon: Invalid signal: " + text, 1);
}

} // namespace

int kill_command(const std::vector<std::string>& args) {
  static constexpr std::array kFlags = {OptionSpec{"signal", 's', true}};
  const auto parsed = parse_args(args, kFlags, "kill", FirstOperand::kMixesWithOptions);
  const int signal = parse_signal(parsed.value("signal").value_or("KILL"));
  return for_each_container("kill", parsed.operands, [&](const Container& c, const std::string& name) {
    if (!c.running()) {
      std::cerr << "Error response from daemon: Cannot kill container: " << name << ": Container " << c.id
                << " is not running\n";
      return ContainerOutcome::kRefused;
    }
    if (signal == SIGKILL) {
      kill_container(c);
    } else {
      signal_container(c, signal);
    }
    return ContainerOutcome::kDone;
  });
}

int rm_command(const std::vector<std::string>& args) {
  static constexpr std::array kFlags = {OptionSpec{"force", 'f', false}, OptionSpec{"volumes", 'v', false}};
  const auto parsed = parse_args(args, kFlags, "rm", FirstOperand::kMixesWithOptions);
  return for_each_container("rm", parsed.operands, [&](const Container& c, const std::string&) {
    if (c.running()) {
      if (!parsed.on("force")) {
        std::cerr << "Error response from daemon: You cannot remove a running container " << c.id
                  << ". Stop the container before attempting removal or force remove\n";
        return ContainerOutcome::kRefused;
      }
      kill_container(c);
    }
    std::error_code ec;
    fs::remove(c.file, ec);
    return ContainerOutcome::kDone;
  });
}

int info_command(const std::vector<std::string>& args) {
  static constexpr std::array kFlags = {OptionSpec{"format", 'f', true}};
  const auto parsed = parse_args(args, kFlags, "info", FirstOperand::kMixesWithOptions);
  const auto containers = all_containers();
  const auto running =
      std::count_if(containers.begin(), containers.end(), [](const Container& c) { return c.running(); });
  const json info = {{"ServerVersion", "mock"},
                     {"Containers", containers.size()},
                     {"ContainersRunning", running},
                     {"ContainersStopped", static_cast<long>(containers.size()) - running},
                     {"Images", all_images().size()},
                     {"Driver", "none"},
                     {"DockerRootDir", state_dir().string()},
                     {"OperatingSystem", "the mock cloud's worker host"}};
  if (const auto format = parsed.value("format")) {
    std::cout << apply_format(info, *format) << "\n";
    return 0;
  }
  std::cout << "Client:\n Version:    mock\n\nServer:\n"
            << " Containers: " << info["Containers"] << "\n"
            << "  Running: " << info["ContainersRunning"] << "\n"
            << "  Paused: 0\n"
            << "  Stopped: " << info["ContainersStopped"] << "\n"
            << " Images: " << info["Images"] << "\n"
            << " Server Version: mock\n"
            << " Storage Driver: none (containers run on the mock host's own filesystem)\n"
            << " Docker Root Dir: " << state_dir().string() << "\n";
  return 0;
}

} // namespace jobman::mock::tools::docker
