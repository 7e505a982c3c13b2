// The mock cloud's docker, for worker hosts: images are records, a container is its command run on the host itself.
#include "worker_tool.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <system_error>
#include <termios.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace {

// The process `docker run` waits for and forwards signals to (0 when none).
volatile std::sig_atomic_t g_container_pid = 0;

} // namespace

// Forwards a signal `docker run` received to its container, as docker's sig-proxy does.
extern "C" void forward_to_container(int signal) {
  const int saved = errno;
  const pid_t pid = g_container_pid;
  if (pid > 0) {
    ::kill(pid, signal);
  }
  errno = saved;
}

namespace jobman::mock::tools {
namespace {

// The name this program reports its failures under.
constexpr std::string_view kTool = "docker";

// docker's exit status for its own failures, as opposed to the container's.
constexpr int kDockerError = 125;

// Where this host's docker keeps its state; it dies with the slice, as a VM's disk does.
fs::path state_dir() {
  return worker_dir(kTool) / ".mock" / "docker";
}

// One record per image.
fs::path images_dir() {
  return state_dir() / "images";
}

// One record per container, named after the container's name (or id when it has none).
fs::path containers_dir() {
  return state_dir() / "containers";
}

// Seconds since the epoch.
std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// `seconds` since the epoch in RFC 3339, UTC, as docker prints times.
std::string rfc3339(std::int64_t seconds) {
  return format_time(seconds, "%Y-%m-%dT%H:%M:%SZ", TimeZone::kUtc);
}

// A duration in docker's words: "5 seconds", "About a minute", "3 hours".
std::string human_duration(std::int64_t seconds) {
  if (seconds < 1) {
    return "Less than a second";
  }
  if (seconds < 60) {
    return std::to_string(seconds) + (seconds == 1 ? " second" : " seconds");
  }
  const auto minutes = seconds / 60;
  if (minutes < 2) {
    return "About a minute";
  }
  if (minutes < 60) {
    return std::to_string(minutes) + " minutes";
  }
  const auto hours = minutes / 60;
  if (hours < 2) {
    return "About an hour";
  }
  if (hours < 48) {
    return std::to_string(hours) + " hours";
  }
  return std::to_string(hours / 24) + " days";
}

// `parts` joined with `separator` between them.
std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string text;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    text += (i == 0 ? "" : separator) + parts[i];
  }
  return text;
}

// Whether `text` is non-empty lowercase hexadecimal.
bool is_lower_hex(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// Writes `content` to `path` unless a file is already there; of two writers racing, exactly one wins.
bool write_exclusive(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  const auto temporary = temporary_beside(path);
  write_file(kTool, temporary, content, WriteMode::kReplace);
  const bool created = ::link(temporary.c_str(), path.c_str()) == 0;
  const int error = errno;
  std::error_code ignored;
  fs::remove(temporary, ignored);
  if (!created && error != EEXIST) {
    throw Failure("docker: cannot write " + path.string() + ": " + std::strerror(error), 1);
  }
  return created;
}

// 64 hex digits that depend only on `text`: the mock's image ids and digests.
std::string stable_hex(const std::string& text) {
  std::string digits;
  for (std::uint64_t salt = 1; salt <= 4; ++salt) {
    std::uint64_t hash = 14695981039346656037ULL ^ (salt * 0x9E3779B97F4A7C15ULL);
    for (const unsigned char c : text) {
      hash ^= c;
      hash *= 1099511628211ULL;
    }
    std::array<char, 17> part{};
    std::snprintf(part.data(), part.size(), "%016llx", static_cast<unsigned long long>(hash));
    digits += part.data();
  }
  return digits;
}

// 64 random hex digits: a container id.
std::string random_hex() {
  static constexpr std::string_view kDigits = "0123456789abcdef";
  std::random_device device;
  std::string digits;
  for (int i = 0; i < 64; ++i) {
    digits += kDigits[device() % kDigits.size()];
  }
  return digits;
}

// Polls `done` every few milliseconds until it holds or `limit` passes; returns its last answer.
bool await(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return done();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// The start time of live process `pid` in clock ticks since boot (field 22 of /proc/PID/stat); nothing when it is
// gone or a zombie.
std::optional<long long> process_start(pid_t pid) {
  if (pid <= 0) {
    return std::nullopt;
  }
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto name_end = stat.rfind(')');
  if (name_end == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream rest(stat.substr(name_end + 1));
  std::vector<std::string> fields;
  for (std::string field; rest >> field;) {
    fields.push_back(field);
  }
  // fields[0] is field 3 (the state), so field 22 is fields[19].
  if (fields.size() < 20 || fields[0] == "Z" || fields[0] == "X") {
    return std::nullopt;
  }
  return std::strtoll(fields[19].c_str(), nullptr, 10);
}

// Whether `pid` is still the live process that started at `start`, not a later one that reuses its number.
bool same_process(pid_t pid, long long start) {
  const auto now = process_start(pid);
  return now && *now == start;
}

// ---------------------------------------------------------------------------------------------------------------
// Command lines.

// A usage error of `docker COMMAND`, worded and numbered as docker words and numbers them.
Failure usage_error(const std::string& command, const std::string& message) {
  return {message + "\nSee 'docker " + command + " --help'.", kDockerError};
}

// Parses the arguments of `docker COMMAND` against `specs`, as docker's flag package does: --name VALUE,
// --name=VALUE, -n VALUE, -nVALUE and bundled switches (-it). Flags and operands may mix unless the first operand
// ends the flags (docker run: IMAGE and everything after it are the container's command).
CommandLine parse_args(const std::vector<std::string>& args, std::span<const OptionSpec> specs,
                       const std::string& command, FirstOperand first_operand) {
  const auto read_flag = [&](const std::vector<std::string>& words, std::size_t& i, CommandLine& line) {
    const auto& arg = words[i];
    if (arg.size() > 2 && arg.starts_with("--")) {
      const auto equals = arg.find('=');
      const std::string name = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
      const auto spec = std::find_if(specs.begin(), specs.end(), [&](const OptionSpec& s) { return s.name == name; });
      if (spec == specs.end()) {
        throw usage_error(command, "unknown flag: --" + name);
      }
      std::string value = "true";
      if (equals != std::string::npos) {
        value = arg.substr(equals + 1);
      } else if (spec->takes_value) {
        if (i + 1 >= words.size()) {
          throw usage_error(command, "flag needs an argument: --" + name);
        }
        value = words[++i];
      }
      line.options[std::string(spec->name)].push_back(value);
      return;
    }
    for (std::size_t j = 1; j < arg.size(); ++j) {
      const char letter = arg[j];
      const auto spec =
          std::find_if(specs.begin(), specs.end(), [&](const OptionSpec& s) { return s.letter == letter; });
      if (spec == specs.end()) {
        throw usage_error(command, std::string("unknown shorthand flag: '") + letter + "' in " + arg);
      }
      if (!spec->takes_value) {
        line.options[std::string(spec->name)].emplace_back("true");
        continue;
      }
      std::string value = arg.substr(j + 1);
      if (value.starts_with('=')) {
        value.erase(0, 1);
      }
      if (value.empty()) {
        if (i + 1 >= words.size()) {
          throw usage_error(command, std::string("flag needs an argument: '") + letter + "' in -" + letter);
        }
        value = words[++i];
      }
      line.options[std::string(spec->name)].push_back(value);
      return;
    }
  };
  return parse_command_line(args, first_operand, read_flag);
}

// The number of characters in UTF-8 `text`.
std::size_t display_width(const std::string& text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U; }));
}

// Prints `rows` (the first is the header) in columns three spaces apart, as docker's tables are.
void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], display_width(row[i]));
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) {
        line += std::string(widths[i] - display_width(row[i]) + 3, ' ');
      }
    }
    std::cout << line << "\n";
  }
}

// The fields `{{.A.B}}` and `{{json .A.B}}` of `object` put into `format` (the Go templates docker's --format takes;
// only these two forms).
std::string apply_format(const json& object, const std::string& format) {
  static const std::regex field(R"(\{\{\s*(json\s+)?\.([A-Za-z0-9_.]*)\s*\}\})");
  std::string out;
  std::string literal; // The format without the fields it understood: any "{{" left there is a form it does not.
  auto rest = format.cbegin();
  for (std::sregex_iterator it(format.cbegin(), format.cend(), field), end; it != end; ++it) {
    out.append(rest, (*it)[0].first);
    literal.append(rest, (*it)[0].first);
    rest = (*it)[0].second;
    const json* value = &object;
    for (const auto& key : split((*it)[2].str(), '.')) {
      if (key.empty()) {
        continue;
      }
      value = value->is_object() && value->contains(key) ? &(*value)[key] : nullptr;
      if (value == nullptr) {
        break;
      }
    }
    if (value == nullptr) {
      out += "<no value>";
    } else if ((*it)[1].matched || !(value->is_string())) {
      out += value->dump();
    } else {
      out += value->get<std::string>();
    }
  }
  out.append(rest, format.cend());
  literal.append(rest, format.cend());
  if (literal.find("{{") != std::string::npos) {
    throw Failure("docker: the mock's docker understands only {{.Field}} and {{json .Field}} in --format", 1);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Images.

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

// Whether `component` is a valid path component of a repository name.
bool valid_component(const std::string& component) {
  return !component.empty() &&
         component.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-") == std::string::npos &&
         std::isalnum(static_cast<unsigned char>(component.front())) != 0 &&
         std::isalnum(static_cast<unsigned char>(component.back())) != 0;
}

// Parses an image reference; nothing when docker would call it an invalid reference format.
std::optional<ImageRef> parse_image_ref(const std::string& text) {
  ImageRef ref;
  std::string name = text;
  if (const auto at = name.find('@'); at != std::string::npos) {
    ref.digest = name.substr(at + 1);
    name.resize(at);
    if (!ref.digest.starts_with("sha256:") || ref.digest.size() != 71 || !is_lower_hex(ref.digest.substr(7))) {
      return std::nullopt;
    }
  }
  const auto slash = name.rfind('/');
  const auto colon = name.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    ref.tag = name.substr(colon + 1);
    name.resize(colon);
    if (ref.tag.empty() || ref.tag.size() > 128 ||
        ref.tag.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
            std::string::npos ||
        ref.tag.front() == '.' || ref.tag.front() == '-') {
      return std::nullopt;
    }
  }
  ref.tag_given = !ref.tag.empty() || !ref.digest.empty();
  if (!ref.digest.empty()) {
    ref.tag.clear();
  } else if (ref.tag.empty()) {
    ref.tag = "latest";
  }
  auto parts = split(name, '/');
  ref.registry = "docker.io";
  if (parts.size() > 1 && (parts[0].find_first_of(".:") != std::string::npos || parts[0] == "localhost")) {
    ref.registry = parts[0] == "index.docker.io" ? "docker.io" : parts[0];
    parts.erase(parts.begin());
  }
  if (!std::all_of(parts.begin(), parts.end(), valid_component)) {
    return std::nullopt;
  }
  ref.path = join(parts, "/");
  if (ref.registry == "docker.io" && parts.size() == 1) {
    ref.path = "library/" + ref.path;
  }
  return ref;
}

// `text` made safe as a file name: every character but [a-z0-9._-] as %XX.
std::string escape_file_name(const std::string& text) {
  std::string name;
  for (const unsigned char c : text) {
    if ((std::islower(c) != 0 || std::isdigit(c) != 0 || c == '.' || c == '_' || c == '-') &&
        !(name.empty() && c == '.')) {
      name += static_cast<char>(c);
    } else {
      std::array<char, 4> hex{};
      std::snprintf(hex.data(), hex.size(), "%%%02X", c);
      name += hex.data();
    }
  }
  return name;
}

// The record of image `ref`.
fs::path image_file(const ImageRef& ref) {
  return images_dir() / (escape_file_name(ref.familiar()) + ".json");
}

// Every image on this host, oldest first.
std::vector<json> all_images() {
  std::vector<json> images;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(images_dir(), ec)) {
    if (entry.path().extension() == ".json") {
      if (auto image = read_json(entry.path())) {
        images.push_back(std::move(*image));
      }
    }
  }
  std::sort(images.begin(), images.end(), [](const json& a, const json& b) {
    return std::pair(a.value("CreatedUnix", 0LL), a.value("Reference", "")) <
           std::pair(b.value("CreatedUnix", 0LL), b.value("Reference", ""));
  });
  return images;
}

// The image `text` names (a reference, an id or an id's prefix), or nothing.
std::optional<json> find_image(const std::string& text) {
  if (const auto ref = parse_image_ref(text)) {
    if (auto image = read_json(image_file(*ref))) {
      return image;
    }
  }
  const std::string id = text.starts_with("sha256:") ? text.substr(7) : text;
  if (id.size() >= 4 && is_lower_hex(id)) {
    for (auto& image : all_images()) {
      if (image.value("Id", "").substr(7).starts_with(id)) {
        return image;
      }
    }
  }
  return std::nullopt;
}

// The digest the mock's registry gives `ref`.
std::string registry_digest(const ImageRef& ref) {
  return ref.digest.empty() ? "sha256:" + stable_hex("digest " + ref.familiar()) : ref.digest;
}

// Pulls `ref` as docker does, writing docker's progress lines to `out`. Images whose name contains
// "does-not-exist" are missing from the mock's registry.
void pull(const ImageRef& ref, std::ostream& out) {
  const auto familiar = ref.familiar();
  if (familiar.find("does-not-exist") != std::string::npos) {
    throw Failure("Error response from daemon: pull access denied for " + ref.repository() +
                      ", repository does not exist or may require 'docker login': denied: requested access to the "
                      "resource is denied",
                  1);
  }
  if (!ref.tag_given) {
    out << "Using default tag: latest\n";
  }
  out << (ref.digest.empty() ? ref.tag : ref.digest) << ": Pulling from " << ref.path << "\n";
  const auto file = image_file(ref);
  const bool present = fs::exists(file);
  const auto digest = registry_digest(ref);
  if (!present) {
    for (int layer = 0; layer < 3; ++layer) {
      out << stable_hex(std::to_string(layer) + " layer " + familiar).substr(0, 12) << ": Pull complete\n";
    }
    const auto created = now_seconds();
    json image = {{"Id", "sha256:" + stable_hex("image " + familiar)},
                  {"RepoTags", ref.digest.empty() ? json::array({familiar}) : json::array()},
                  {"RepoDigests", json::array({ref.repository() + "@" + digest})},
                  {"Created", rfc3339(created)},
                  {"CreatedUnix", created},
                  {"Reference", familiar},
                  {"Size", 0}};
    write_atomic(kTool, file, image.dump(4));
  }
  out << "Digest: " << digest << "\n";
  out << "Status: " << (present ? "Image is up to date for " : "Downloaded newer image for ") << familiar << "\n";
  out << ref.canonical() << "\n";
}

// A reference that parses, or docker's error.
ImageRef image_ref_or_fail(const std::string& text, const std::string& prefix, int status) {
  auto ref = parse_image_ref(text);
  if (!ref) {
    throw Failure(prefix + "invalid reference format: " + text, status);
  }
  return *ref;
}

// ---------------------------------------------------------------------------------------------------------------
// Containers.

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

// The container recorded in `file`, or nothing.
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

// Every container on this host, newest first.
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

// The container `text` names: its name, its id or a prefix of the id no other container's shares.
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

// Sends `signal` to the container: SIGKILL to its whole process group, as docker ends every process in a container;
// anything else to its main process, as docker signals a container's PID 1.
void signal_container(const Container& c, int signal) {
  if (!same_process(c.pid, c.pid_start)) {
    return;
  }
  if (signal == SIGKILL) {
    ::kill(-c.pid, SIGKILL);
  }
  ::kill(c.pid, signal);
}

// After the container's main process ended: waits for its `docker run` to record the end (or, with --rm, to remove
// the record); when that `docker run` is gone too, records the end itself with `status`.
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

// Ends the container with SIGKILL and waits until it is gone and its end recorded.
void kill_container(const Container& c) {
  signal_container(c, SIGKILL);
  await([&] { return !same_process(c.pid, c.pid_start); }, std::chrono::seconds(10));
  settle(c, 128 + SIGKILL);
}

// The "no such container" error.
void report_no_such_container(const std::string& name) {
  std::cerr << "Error response from daemon: No such container: " << name << "\n";
}

// The container as `docker inspect` shows it.
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

// The "name in use" error of `docker run --name`.
Failure name_conflict(const std::string& name) {
  const auto existing = read_container(containers_dir() / (name + ".json"));
  return usage_error("run", "docker: Error response from daemon: Conflict. The container name \"/" + name +
                                "\" is already in use by container \"" + (existing ? existing->id : "") +
                                "\". You have to remove (or rename) that container to be able to reuse that name.");
}

// ---------------------------------------------------------------------------------------------------------------
// docker run.

// The flags `docker run` understands.
constexpr std::array kRunFlags = {OptionSpec{"rm", 0, false},
                                  OptionSpec{"name", 0, true},
                                  OptionSpec{"env", 'e', true},
                                  OptionSpec{"env-file", 0, true},
                                  OptionSpec{"volume", 'v', true},
                                  OptionSpec{"workdir", 'w', true},
                                  OptionSpec{"privileged", 0, false},
                                  OptionSpec{"network", 0, true},
                                  OptionSpec{"net", 0, true},
                                  OptionSpec{"init", 0, false},
                                  OptionSpec{"ipc", 0, true},
                                  OptionSpec{"tty", 't', false},
                                  OptionSpec{"interactive", 'i', false},
                                  OptionSpec{"shm-size", 0, true},
                                  OptionSpec{"user", 'u', true},
                                  OptionSpec{"detach", 'd', false},
                                  OptionSpec{"hostname", 'h', true},
                                  OptionSpec{"pull", 0, true},
                                  OptionSpec{"help", 0, false}};

// What `docker run` was asked to do, checked.
struct RunRequest {
  ImageRef image;                         // What to run.
  std::vector<std::string> command;       // The container's command (bash when none is given).
  std::string name;                       // --name, or empty.
  bool auto_remove = false;               // --rm.
  bool interactive = false;               // -i: the container reads docker run's stdin (else /dev/null).
  std::string pull = "missing";           // --pull: missing, always or never.
  fs::path workdir = "/";                 // -w, or docker's default.
  std::optional<std::string> hostname;    // -h, else the short container id.
  std::map<std::string, std::string> env; // The container's environment, but HOSTNAME.
};

// The PATH a container gets when the caller has none: docker's default.
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The variables a container takes from its caller: PATH and HOME, so that the host's tools keep working, and the
// mock's MOCK_* (among them the host's marker, by which the mock finds and ends the container's processes).
std::map<std::string, std::string> inherited_environment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto equals = text.find('=');
    if (equals == std::string_view::npos) {
      continue;
    }
    const std::string key(text.substr(0, equals));
    if (key == "PATH" || key == "HOME" || key.starts_with("MOCK_")) {
      env[key] = std::string(text.substr(equals + 1));
    }
  }
  env.try_emplace("PATH", kDefaultPath);
  return env;
}

// Adds `K=V` to `env`, or `K` with the caller's value (nothing when the caller has none), as -e and --env-file do.
void add_variable(std::map<std::string, std::string>& env, const std::string& entry) {
  const auto equals = entry.find('=');
  const std::string key = entry.substr(0, equals);
  if (key.empty() || key.find_first_of(" \t") != std::string::npos) {
    throw usage_error("run", "docker: poorly formatted environment: variable '" + key + "' is not valid");
  }
  if (equals != std::string::npos) {
    env[key] = entry.substr(equals + 1);
  } else if (const char* value = std::getenv(key.c_str())) {
    env[key] = value;
  }
}

// Reads an --env-file: one K=V or K a line; blank lines and # comments skipped.
void add_env_file(std::map<std::string, std::string>& env, const std::string& file) {
  std::ifstream in(file);
  if (!in) {
    throw usage_error("run", "docker: open " + file + ": no such file or directory.");
  }
  for (std::string line; std::getline(in, line);) {
    line.erase(0, line.find_first_not_of(" \t"));
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (!line.empty() && line.front() != '#') {
      add_variable(env, line);
    }
  }
}

// `path` without "." and ".." and trailing slashes, to compare mount paths.
std::string normal_path(const fs::path& path) {
  auto text = path.lexically_normal().string();
  while (text.size() > 1 && text.back() == '/') {
    text.pop_back();
  }
  return text;
}

// Checks -v SPEC. The mock's containers see the host's filesystem, so a bind mount at the same path is a no-op
// (whose missing source is created, as docker creates it); anything else cannot be emulated and fails.
void check_volume(const std::string& spec) {
  const auto parts = split(spec, ':');
  if (parts.size() < 2 || parts.size() > 3) {
    throw usage_error("run",
                      "docker: the mock's docker supports only bind mounts at the same path, -v DIR:DIR[:OPTIONS], "
                      "not -v " +
                          spec);
  }
  const fs::path source = parts[0];
  const fs::path target = parts[1];
  if (!source.is_absolute()) {
    throw usage_error("run", "docker: the mock's docker has no named volumes (-v " + spec +
                                 "): bind-mount a host directory at the same path instead");
  }
  if (!target.is_absolute()) {
    throw usage_error("run", "docker: Error response from daemon: invalid volume specification: '" + spec +
                                 "': mount path must be absolute.");
  }
  if (normal_path(source) != normal_path(target)) {
    throw usage_error("run", "docker: Error response from daemon: the mock's docker runs containers on the host's "
                             "filesystem, so a bind mount needs the same path on both sides: -v " +
                                 spec + " would mount " + source.string() + " at a different target path, " +
                                 target.string() + ".");
  }
  std::error_code ec;
  fs::create_directories(source, ec);
}

// Turns `docker run`'s arguments into a checked request; fails as docker fails, with 125.
RunRequest parse_run(const std::vector<std::string>& args) {
  const auto parsed = parse_args(args, kRunFlags, "run", FirstOperand::kEndsOptions);
  if (parsed.on("help")) {
    throw Failure("Usage:  docker run [OPTIONS] IMAGE [COMMAND] [ARG...]  (the mock cloud's docker)", 0);
  }
  if (parsed.on("detach")) {
    throw usage_error("run", "docker: -d/--detach is not supported by the mock's docker: a container runs in the "
                             "foreground of its `docker run` (start `docker run` itself in the background instead)");
  }
  if (parsed.operands.empty()) {
    throw usage_error("run", "docker: 'docker run' requires at least 1 argument.");
  }
  for (const auto* flag : {"network", "net"}) {
    for (const auto& value : parsed.values(flag)) {
      if (value != "host") {
        throw usage_error("run", "docker: --" + std::string(flag) + "=" + value +
                                     " is not supported: the mock's containers share the host's network "
                                     "(use --network=host)");
      }
    }
  }
  for (const auto& value : parsed.values("ipc")) {
    if (value != "host") {
      throw usage_error("run", "docker: --ipc=" + value +
                                   " is not supported: the mock's containers share the host's IPC (use --ipc=host)");
    }
  }
  RunRequest request;
  request.image = image_ref_or_fail(parsed.operands.front(), "docker: ", kDockerError);
  request.command.assign(parsed.operands.begin() + 1, parsed.operands.end());
  if (request.command.empty()) {
    request.command = {"bash"};
  }
  request.name = parsed.value("name").value_or("");
  static const std::regex valid_name("[a-zA-Z0-9][a-zA-Z0-9_.-]+");
  if (parsed.value("name") && !std::regex_match(request.name, valid_name)) {
    throw usage_error("run", "docker: Error response from daemon: Invalid container name (" + request.name +
                                 "), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed.");
  }
  request.auto_remove = parsed.on("rm");
  request.interactive = parsed.on("interactive");
  request.hostname = parsed.value("hostname");
  request.pull = parsed.value("pull").value_or("missing");
  if (request.pull != "missing" && request.pull != "always" && request.pull != "never") {
    throw usage_error("run", "docker: invalid pull option: '" + request.pull +
                                 "': must be one of \"always\", "
                                 "\"missing\" or \"never\"");
  }
  for (const auto& spec : parsed.values("volume")) {
    check_volume(spec);
  }
  if (const auto workdir = parsed.value("workdir")) {
    request.workdir = *workdir;
    if (!request.workdir.is_absolute()) {
      throw usage_error("run", "docker: Error response from daemon: the working directory '" + *workdir +
                                   "' is invalid, it needs to be an absolute path.");
    }
    std::error_code ec;
    if (!fs::is_directory(request.workdir, ec)) {
      throw usage_error("run", "docker: Error response from daemon: workdir " + *workdir +
                                   " does not exist on this mock host (the mock's containers run on the host's "
                                   "filesystem).");
    }
  }
  request.env = inherited_environment();
  for (const auto& file : parsed.values("env-file")) {
    add_env_file(request.env, file);
  }
  for (const auto& entry : parsed.values("env")) {
    add_variable(request.env, entry);
  }
  if (parsed.on("tty")) {
    request.env.try_emplace("TERM", "xterm");
  }
  return request;
}

// Makes sure the image is on the host, pulling it as `docker run` does (progress on stderr).
void ensure_image(const RunRequest& request) {
  const bool present = fs::exists(image_file(request.image));
  if (present && request.pull != "always") {
    return;
  }
  if (!present && request.pull == "never") {
    throw usage_error("run", "docker: Error response from daemon: No such image: " + request.image.familiar() + ".");
  }
  if (!present) {
    std::cerr << "Unable to find image '" << request.image.familiar() << "' locally\n";
  }
  try {
    pull(request.image, std::cerr);
  } catch (const Failure& failure) {
    throw usage_error("run", std::string("docker: ") + failure.what());
  }
}

// Ends the container's remaining processes and gives the terminal back, once its main process has ended.
void after_container(pid_t pid, bool foreground) {
  // A container's processes die with its main process, as they do in a container's PID namespace.
  ::kill(-pid, SIGKILL);
  if (foreground) {
    sigset_t block;
    sigset_t old;
    sigemptyset(&block);
    sigaddset(&block, SIGTTOU);
    ::sigprocmask(SIG_BLOCK, &block, &old);
    ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
  }
}

// The signals `docker run` forwards to its container.
constexpr std::array kForwardedSignals = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// Runs the container's command as a child process in a process group of its own, records it while it runs,
// forwards the signals docker's sig-proxy forwards, and returns its exit status (128 + signal when killed).
int start_container(Container& c, const RunRequest& request) {
  // Everything the child needs is built before fork.
  auto env = request.env;
  env["HOSTNAME"] = request.hostname.value_or(c.id.substr(0, 12));
  std::vector<std::string> env_entries;
  env_entries.reserve(env.size());
  for (const auto& [key, value] : env) {
    env_entries.push_back(key);
    env_entries.back().append("=").append(value);
  }
  auto env_pointers = exec_array(env_entries);
  std::vector<std::string> argv = c.command;
  const auto argv_pointers = exec_array(argv);
  const std::string workdir = request.workdir.string();

  std::array<int, 2> go{};     // Parent to child: the record is written, start.
  std::array<int, 2> failed{}; // Child to parent: errno of a failed exec; closed by a successful one.
  if (::pipe2(go.data(), O_CLOEXEC) != 0 || ::pipe2(failed.data(), O_CLOEXEC) != 0) {
    throw Failure(std::string("docker: pipe: ") + std::strerror(errno), kDockerError);
  }
  const bool foreground = ::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
  const pid_t pid = ::fork();
  if (pid < 0) {
    throw Failure(std::string("docker: fork: ") + std::strerror(errno), kDockerError);
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::close(go[1]);
    ::close(failed[0]);
    char start = 0;
    if (::read(go[0], &start, 1) != 1) {
      ::_exit(kDockerError);
    }
    // A container does not inherit its caller's ignored or blocked signals.
    for (const int signal : kForwardedSignals) {
      std::signal(signal, SIG_DFL);
    }
    std::signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!request.interactive) {
      const int null = ::open("/dev/null", O_RDONLY);
      if (null >= 0) {
        ::dup2(null, STDIN_FILENO);
        ::close(null);
      }
    }
    int error = 0;
    if (::chdir(workdir.c_str()) != 0) {
      error = errno;
    } else {
      environ = env_pointers.data();
      ::execvp(argv_pointers[0], argv_pointers.data());
      error = errno;
    }
    (void)!::write(failed[1], &error, sizeof error);
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(go[0]);
  ::close(failed[1]);
  c.pid = pid;
  c.pid_start = process_start(pid).value_or(0);
  const auto reap = [pid] {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  };
  if (!write_exclusive(c.file, to_json(c).dump(2))) {
    ::close(go[1]);
    ::close(failed[0]);
    ::kill(pid, SIGKILL);
    reap();
    throw name_conflict(c.name);
  }

  g_container_pid = pid;
  struct sigaction forward {};
  forward.sa_handler = forward_to_container;
  sigemptyset(&forward.sa_mask);
  for (const int signal : kForwardedSignals) {
    ::sigaction(signal, &forward, nullptr);
  }
  if (foreground) {
    ::tcsetpgrp(STDIN_FILENO, pid);
  }
  (void)!::write(go[1], "x", 1);
  ::close(go[1]);
  int exec_error = 0;
  ssize_t got = 0;
  do {
    got = ::read(failed[0], &exec_error, sizeof exec_error);
  } while (got < 0 && errno == EINTR);
  ::close(failed[0]);
  const int status = reap();
  g_container_pid = 0;
  after_container(pid, foreground);

  const bool exec_failed = got == static_cast<ssize_t>(sizeof exec_error);
  const int code = exec_failed         ? (exec_error == ENOENT ? 127 : 126)
                   : WIFEXITED(status) ? WEXITSTATUS(status)
                                       : 128 + WTERMSIG(status);
  if (auto now = read_container(c.file); now && now->id == c.id) {
    std::error_code ec;
    if (c.auto_remove) {
      fs::remove(c.file, ec);
    } else if (!now->exit_code) {
      now->exit_code = code;
      now->finished = now_seconds();
      write_atomic(kTool, c.file, to_json(*now).dump(2));
    }
  }
  if (exec_failed) {
    throw Failure("docker: Error response from daemon: failed to create task for container: failed to create shim "
                  "task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"" +
                      c.command.front() + "\": " +
                      (exec_error == ENOENT ? std::string("executable file not found in $PATH")
                                            : std::string(std::strerror(exec_error))) +
                      ": unknown.",
                  code);
  }
  return code;
}

// `docker run [OPTIONS] IMAGE [COMMAND [ARG...]]`.
int run_command(const std::vector<std::string>& args) {
  const auto request = parse_run(args);
  // A name in use fails before anything is pulled.
  if (!request.name.empty() && fs::exists(containers_dir() / (request.name + ".json"))) {
    throw name_conflict(request.name);
  }
  ensure_image(request);
  Container c;
  c.id = random_hex();
  c.name = request.name;
  c.image = request.image.familiar();
  c.command = request.command;
  c.auto_remove = request.auto_remove;
  c.created = now_seconds();
  c.runner = ::getpid();
  c.runner_start = process_start(c.runner).value_or(0);
  c.file = containers_dir() / ((c.name.empty() ? c.id : c.name) + ".json");
  return start_container(c, request);
}

// ---------------------------------------------------------------------------------------------------------------
// The other commands.

// `docker pull IMAGE`.
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

// `docker image inspect IMAGE...` and `docker inspect [--type image|container] NAME...`.
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

// `docker images [-q] [REPOSITORY[:TAG]]`.
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

// `docker rmi [-f] IMAGE...`.
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

// `docker ps [-a] [-q] [--no-trunc] [--filter name=N|id=ID|status=S]`.
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

// `docker stop [-t SECONDS] CONTAINER...`: SIGTERM, then SIGKILL after the timeout (10 s by default).
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

// `docker kill [-s SIGNAL] CONTAINER...`: SIGKILL (or the signal given) at once.
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

// `docker rm [-f] CONTAINER...`.
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

// `docker info`.
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
} // namespace jobman::mock::tools

int main(int argc, char** argv) {
  namespace tools = jobman::mock::tools;
  const std::vector<std::string> args(argv + 1, argv + argc);
  return tools::run_on_worker_host(tools::kTool, [&] { return tools::dispatch(args); });
}
