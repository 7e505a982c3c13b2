// The mock cloud's docker, for worker hosts: images are records, a container is its command run on the host itself.
// Its commands are in docker_*.cpp; what they share is in docker.hpp.
#include "docker.hpp"

#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace jobman::mock::tools::docker {

namespace {

// `docker --help`.
void print_usage() {
  std::cout << "Usage:  docker COMMAND  (the mock cloud's stand-in on its worker hosts)\n\n"
               "Commands:\n"
               "  run       Run a command as a container on this host\n"
               "  ps        List containers\n"
               "  stop      Stop containers (SIGTERM, then SIGKILL)\n"
               "  kill      Kill containers\n"
               "  rm        Remove containers\n"
               "  pull      Pull an image (recorded; nothing is downloaded)\n"
               "  images    List images\n"
               "  rmi       Remove images\n"
               "  inspect   Show images and containers as JSON\n"
               "  info      Show a summary of this host's docker\n"
               "  version   Show the version\n";
}

// Runs `docker ARGS...`.
int dispatch(std::vector<std::string> args) {
  if (args.empty() || args.front() == "--help" || args.front() == "help") {
    print_usage();
    return 0;
  }
  if (args.front() == "--version" || args.front() == "-v") {
    std::cout << "Docker version 24.0.0-mock, build mock\n";
    return 0;
  }
  std::string command = args.front();
  args.erase(args.begin());
  if (command == "version") {
    std::cout << "Client:\n Version:           24.0.0-mock\n\nServer: Docker Engine (mock)\n Engine:\n"
                 "  Version:          24.0.0-mock\n";
    return 0;
  }
  // `docker image X` and `docker container X`, the management forms, to the classic commands.
  static const std::map<std::string, std::string> kImageCommands = {
      {"pull", "pull"}, {"ls", "images"}, {"list", "images"}, {"inspect", "image-inspect"}, {"rm", "rmi"}};
  static const std::map<std::string, std::string> kContainerCommands = {
      {"run", "run"},   {"ls", "ps"},     {"list", "ps"}, {"ps", "ps"},
      {"stop", "stop"}, {"kill", "kill"}, {"rm", "rm"},   {"inspect", "container-inspect"}};
  if (command == "image" || command == "container") {
    const auto& table = command == "image" ? kImageCommands : kContainerCommands;
    const auto it = args.empty() ? table.end() : table.find(args.front());
    if (it == table.end()) {
      throw Failure("docker: '" + command + (args.empty() ? "" : " " + args.front()) +
                        "' is not a docker command the mock supports.\nSee 'docker --help'",
                    1);
    }
    command = it->second;
    args.erase(args.begin());
  }
  // The classic commands, by name.
  using Command = std::function<int(const std::vector<std::string>&)>;
  static const std::map<std::string, Command, std::less<>> kCommands = {
      {"run", run_command},
      {"pull", pull_command},
      {"images", images_command},
      {"rmi", rmi_command},
      {"inspect", [](const std::vector<std::string>& rest) { return inspect_command(rest, ""); }},
      {"image-inspect", [](const std::vector<std::string>& rest) { return inspect_command(rest, "image"); }},
      {"container-inspect", [](const std::vector<std::string>& rest) { return inspect_command(rest, "container"); }},
      {"ps", ps_command},
      {"stop", stop_command},
      {"kill", kill_command},
      {"rm", rm_command},
      {"info", info_command}};
  if (const auto it = kCommands.find(command); it != kCommands.end()) {
    return it->second(args);
  }
  throw Failure("docker: '" + command + "' is not a docker command.\nSee 'docker --help'", 1);
}

} // namespace

} // namespace jobman::mock::tools::docker

int main(int argc, char** argv) {
  namespace docker = jobman::mock::tools::docker;
  const std::vector<std::string> args(argv + 1, argv + argc);
  return jobman::mock::tools::run_on_worker_host(docker::kTool, [&] { return docker::dispatch(args); });
}
