// What the mock's docker commands share (docker.cpp, docker_*.cpp): its state, its images and containers, command
// lines, tables and --format, and the commands themselves.
#pragma once

#include "worker_tool.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace jobman::mock::tools::docker {

// The name this program reports its failures under.
inline constexpr std::string_view kTool = "docker";

// docker's exit status for its own failures, as opposed to the container's.
inline constexpr int kDockerError = 125;

// ---------------------------------------------------------------------------------------------------------------
// State, clocks, ids and processes (docker_support.cpp).

// Where this host's docker keeps its state; it dies with the slice, as a VM's disk does.
fs::path state_dir();

// One record per image.
fs::path images_dir();

// One record per container, named after the container's name (or id when it has none).
fs::path containers_dir();

// Seconds since the epoch.
std::int64_t now_seconds();

// `seconds` since the epoch in RFC 3339, UTC, as docker prints times.
std::string rfc3339(std::int64_t seconds);

// A duration in docker's words: "5 seconds", "About a minute", "3 hours".
std::string human_duration(std::int64_t seconds);

// `parts` joined with `separator` between them.
std::string join(const std::vector<std::string>& parts, const std::string& separator);

// Whether `text` is non-empty lowercase hexadecimal.
bool is_lower_hex(std::string_view text);

// Writes `content` to `path` unless a file is already there; of two writers racing, exactly one wins.
bool write_exclusive(const fs::path& path, const std::string& content);

// 64 hex digits that depend only on `text`: the mock's image ids and digests.
std::string stable_hex(const std::string& text);

// 64 random hex digits: a container id.
std::string random_hex();

// Polls `done` every few milliseconds until it holds or `limit` passes; returns its last answer.
bool await(const std::function<bool()>& done, std::chrono::milliseconds limit);

// The start time of live process `pid` in clock ticks since boot (field 22 of /proc/PID/stat); nothing when it is
// gone or a zombie.
std::optional<long long> process_start(pid_t pid);

// Whether `pid` is still the live process that started at `start`, not a later one that reuses its number.
bool same_process(pid_t pid, long long start);

// ---------------------------------------------------------------------------------------------------------------
// Command lines, tables and --format (docker_support.cpp).

// A usage error of `docker COMMAND`, worded and numbered as docker words and numbers them.
Failure usage_error(const std::string& command, const std::string& message);

// Parses the arguments of `docker COMMAND` against `specs`, as docker's flag package does: --name VALUE,
// --name=VALUE, -n VALUE, -nVALUE and bundled switches (-it). Flags and operands may mix unless the first operand
// ends the flags (docker run: IMAGE and everything after it are the container's command).
CommandLine parse_args(const std::vector<std::string>& args, std::span<const OptionSpec> specs,
                       const std::string& command, FirstOperand first_operand);

// Prints `rows` (the first is the header) in columns three spaces apart, as docker's tables are.
void print_table(const std::vector<std::vector<std::string>>& rows);

// The fields `{{.A.B}}` and `{{json .A.B}}` of `object` put into `format` (the Go templates docker's --format takes;
// only these two forms).
std::string apply_format(const json& object, const std::string& format);

// ---------------------------------------------------------------------------------------------------------------
// Images (docker_images.cpp).

// An image reference, taken apart as docker takes it apart.
struct ImageRef {
  std::string registry;   // "docker.io", or the host the first component names.
  std::string path;       // "library/ubuntu", "ns/name", "project/image".
  std::string tag;        // The tag ("latest" when none was given); empty with a digest.
  std::string digest;     // "sha256:…", or empty.
  bool tag_given = false; // Whether the reference named a tag or a digest.

  // The repository as docker shows it: "ubuntu", "ns/name", "gcr.io/project/image".
  [[nodiscard]] std::string repository() const {
    if (registry == "docker.io") {
      return path.starts_with("library/") ? path.substr(8) : path;
    }
    return registry + "/" + path;
  }
  // The short form docker prints and stores: "ubuntu:latest", "gcr.io/p/img@sha256:…".
  [[nodiscard]] std::string familiar() const { return repository() + (digest.empty() ? ":" + tag : "@" + digest); }
  // The fully qualified form: "docker.io/library/ubuntu:latest".
  [[nodiscard]] std::string canonical() const {
    return registry + "/" + path + (digest.empty() ? ":" + tag : "@" + digest);
  }
};

// Parses an image reference; nothing when docker would call it an invalid reference format.
std::optional<ImageRef> parse_image_ref(const std::string& text);

// The record of image `ref`.
fs::path image_file(const ImageRef& ref);

// Every image on this host, oldest first.
std::vector<json> all_images();

// The image `text` names (a reference, an id or an id's prefix), or nothing.
std::optional<json> find_image(const std::string& text);

// Pulls `ref` as docker does, writing docker's progress lines to `out`. Images whose name contains
// "does-not-exist" are missing from the mock's registry.
void pull(const ImageRef& ref, std::ostream& out);

// A reference that parses, or docker's error.
ImageRef image_ref_or_fail(const std::string& text, const std::string& prefix, int status);

// ---------------------------------------------------------------------------------------------------------------
// Containers (docker_containers.cpp).

// A container, as its record describes it.
struct Container {
  std::string id;                   // 64 hex digits.
  std::string name;                 // As given with --name, or empty.
  std::string image;                // The image's familiar reference.
  std::vector<std::string> command; // What runs.
  pid_t pid = 0;                    // Its main process, the leader of the container's process group.
  long long pid_start = 0;          // That process's start time, so that a reused pid is not taken for it.
  pid_t runner = 0;                 // The `docker run` that waits for it.
  long long runner_start = 0;       // That process's start time.
  bool auto_remove = false;         // --rm: the record goes when the container ends.
  std::int64_t created = 0;         // Seconds since the epoch.
  std::int64_t finished = 0;        // When it ended; 0 while it runs.
  std::optional<int> exit_code;     // Its exit status, once it ended.
  fs::path file;                    // Its record.

  // The name docker shows: the given one, or the short id.
  [[nodiscard]] std::string display_name() const { return name.empty() ? id.substr(0, 12) : name; }
  // Whether its main process still runs.
  [[nodiscard]] bool running() const { return !exit_code && same_process(pid, pid_start); }
  // Its exit status as docker shows it: the recorded one, or 137 for a container whose `docker run` was killed.
  [[nodiscard]] int status() const { return exit_code.value_or(137); }
};

// The record's JSON.
json to_json(const Container& c);

// The container recorded in `file`, or nothing.
std::optional<Container> read_container(const fs::path& file);

// Every container on this host, newest first.
std::vector<Container> all_containers();

// The container `text` names: its name, its id or a prefix of the id no other container's shares.
std::optional<Container> find_container(const std::string& text);

// Sends `signal` to the container: SIGKILL to its whole process group, as docker ends every process in a container;
// anything else to its main process, as docker signals a container's PID 1.
void signal_container(const Container& c, int signal);

// After the container's main process ended: waits for its `docker run` to record the end (or, with --rm, to remove
// the record); when that `docker run` is gone too, records the end itself with `status`.
void settle(const Container& c, int status);

// Ends the container with SIGKILL and waits until it is gone and its end recorded.
void kill_container(const Container& c);

// The "no such container" error.
void report_no_such_container(const std::string& name);

// The container as `docker inspect` shows it.
json inspect_container(const Container& c);

// The "name in use" error of `docker run --name`.
Failure name_conflict(const std::string& name);

// ---------------------------------------------------------------------------------------------------------------
// The commands (docker_run.cpp, docker_commands.cpp).

// `docker run [OPTIONS] IMAGE [COMMAND [ARG...]]`.
int run_command(const std::vector<std::string>& args);

// `docker pull IMAGE`.
int pull_command(const std::vector<std::string>& args);

// `docker image inspect IMAGE...` and `docker inspect [--type image|container] NAME...`.
int inspect_command(const std::vector<std::string>& args, std::string type);

// `docker images [-q] [REPOSITORY[:TAG]]`.
int images_command(const std::vector<std::string>& args);

// `docker rmi [-f] IMAGE...`.
int rmi_command(const std::vector<std::string>& args);

// `docker ps [-a] [-q] [--no-trunc] [--filter name=N|id=ID|status=S]`.
int ps_command(const std::vector<std::string>& args);

// `docker stop [-t SECONDS] CONTAINER...`: SIGTERM, then SIGKILL after the timeout (10 s by default).
int stop_command(const std::vector<std::string>& args);

// `docker kill [-s SIGNAL] CONTAINER...`: SIGKILL (or the signal given) at once.
int kill_command(const std::vector<std::string>& args);

// `docker rm [-f] CONTAINER...`.
int rm_command(const std::vector<std::string>& args);

// `docker info`.
int info_command(const std::vector<std::string>& args);

} // namespace jobman::mock::tools::docker
