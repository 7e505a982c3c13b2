// Task scripts: the #JOBMAN headers (checked as the loader checks the same values), the command line's overrides, and
// the config document whose command writes the script on each host and runs it. Whether the script fans out to the
// slice's hosts itself is fanout_scan.cpp's.
#include "jobman/config/task_script.hpp"

#include "accelerator_shapes.hpp"
#include "fanout_scan.hpp"
#include "interpolation.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/util/base64url.hpp"
#include "jobman/util/digest.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "loader_parts.hpp"
#include "schema.hpp"
#include "yaml_tree.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <regex>

namespace jobman::config {

namespace {

using detail::Origin;
using detail::Problems;
using json = nlohmann::ordered_json;

constexpr std::string_view header_marker = "#JOBMAN";

// The keys a header may set.
const std::vector<std::string>& header_keys() {
  static const std::vector<std::string> keys{"name",    "accelerator", "zone",      "tpu-version", "max-retries",
                                             "pricing", "mail-user",   "mail-type", "priority",    "hosts"};
  return keys;
}

// A value each key takes, for hints.
std::string example_value(const std::string& key) {
  static const std::map<std::string, std::string> examples{{"name", "my-task"},
                                                           {"accelerator", "v4-8"},
                                                           {"zone", "us-central2-b"},
                                                           {"tpu-version", "tpu-ubuntu2204-base"},
                                                           {"max-retries", "3"},
                                                           {"pricing", "spot"},
                                                           {"mail-user", "you@example.com"},
                                                           {"mail-type", "END,FAIL"},
                                                           {"priority", "10"},
                                                           {"hosts", "all"}};
  const auto it = examples.find(key);
  return it == examples.end() ? "VALUE" : it->second;
}

// Calls `visit` with each line of `text` (without its newline) and its 1-based number.
template <typename Visit> void each_line(std::string_view text, Visit visit) {
  int number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    visit(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start), ++number);
    if (end == std::string_view::npos) {
      break;
    }
    start = end + 1;
  }
}

// Where the options of a header line start, or nullopt when the line is not a header: jobman-lite's
// `^#JOBMAN\s+(.+)$` on the line stripped of whitespace.
std::optional<std::size_t> header_options(std::string_view line) {
  std::size_t at = 0;
  while (at < line.size() && is_blank(line[at])) {
    ++at;
  }
  if (line.substr(at, header_marker.size()) != header_marker) {
    return std::nullopt;
  }
  at += header_marker.size();
  if (at >= line.size() || !is_blank(line[at])) {
    return std::nullopt;
  }
  while (at < line.size() && is_blank(line[at])) {
    ++at;
  }
  return at < line.size() ? std::optional(at) : std::nullopt;
}

// One --key[=value] of a header line.
struct Option {
  std::string key;
  std::optional<std::string> value;
  Origin key_at;   // Where "--key" starts.
  Origin value_at; // Where the value starts (the key's place when there is none).
};

// The key path messages about a header key name.
std::string header_path(const std::string& key) {
  return std::string(header_marker) + " --" + key;
}

// The options of every header line, in order; words that are not options are reported.
std::vector<Option> read_options(std::string_view text, const std::string& file, Problems& p) {
  std::vector<Option> options;
  each_line(text, [&](std::string_view line, int number) {
    const auto start = header_options(line);
    if (!start) {
      return;
    }
    struct Word {
      std::string_view text;
      int column;
    };
    std::vector<Word> words;
    for (std::size_t i = *start; i < line.size();) {
      if (is_blank(line[i])) {
        ++i;
        continue;
      }
      const std::size_t begin = i;
      while (i < line.size() && !is_blank(line[i])) {
        ++i;
      }
      words.push_back(Word{line.substr(begin, i - begin), static_cast<int>(begin) + 1});
    }
    for (std::size_t i = 0; i < words.size(); ++i) {
      const Word& word = words[i];
      const Origin at{file, number, word.column};
      const auto eq = word.text.find('=');
      if (!word.text.starts_with("--") || eq == 2 || word.text.size() == 2) {
        p.warn(at, std::string(header_marker),
               "'" + std::string(word.text) + "' is not an option (--key=value), ignored");
        continue;
      }
      Option option;
      option.key_at = at;
      option.value_at = at;
      if (eq != std::string_view::npos) {
        option.key = std::string(word.text.substr(2, eq - 2));
        option.value = std::string(word.text.substr(eq + 1));
        option.value_at.column = word.column + static_cast<int>(eq) + 1;
      } else {
        option.key = std::string(word.text.substr(2));
        // "--key value": jobman's extension; jobman-lite reads a bare --key there.
        if (i + 1 < words.size() && !words[i + 1].text.starts_with("--")) {
          ++i;
          option.value = std::string(words[i].text);
          option.value_at.column = words[i].column;
        }
      }
      options.push_back(std::move(option));
    }
  });
  return options;
}

// ---- Checks on single values, for headers and flags alike ----

std::optional<std::string> check_accelerator(Problems& p, const Origin& at, const std::string& path,
                                             const std::string& value) {
  std::string why;
  bool off_catalog = false;
  const auto accelerator = detail::find_accelerator(value, &why, &off_catalog);
  if (!accelerator) {
    p.error(at, path, why);
    return std::nullopt;
  }
  if (off_catalog) {
    p.warn(at, path,
           why + ": it is requested as written, with " + std::to_string(accelerator->hosts) +
               " hosts, and the cloud's list of the zone's accelerator types decides");
  }
  return accelerator->name;
}

std::optional<std::string> check_zone(Problems& p, const Origin& at, const std::string& path,
                                      const std::string& value) {
  if (auto problem = detail::zone_problem(value)) {
    p.error(at, path, problem->first, problem->second);
    return std::nullopt;
  }
  return value;
}

// spot, preemptible, or on-demand under any of its names ("standard" is jobman-lite's), in any case.
std::optional<Pricing> check_pricing(Problems& p, const Origin& at, const std::string& path, const std::string& value) {
  const std::string word = util::to_lower(value);
  if (const auto pricing = domain::parse_pricing(word)) {
    return pricing;
  }
  p.error(at, path, "unknown pricing '" + value + "'", detail::suggestion(word, domain::pricing_spellings()));
  return std::nullopt;
}

std::optional<int> check_integer(Problems& p, const Origin& at, const std::string& path, const std::string& value,
                                 int min) {
  const auto number = util::parse_int(value);
  const std::string_view digits = std::string_view(value).substr(value.starts_with('-') ? 1 : 0);
  if (!number && !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) {
    p.error(at, path, "integer out of range: " + value);
    return std::nullopt;
  }
  if (!number) {
    p.error(at, path, "expected an integer, got '" + value + "'");
    return std::nullopt;
  }
  if (*number > INT_MAX || *number < INT_MIN) {
    p.error(at, path, "integer out of range: " + value);
    return std::nullopt;
  }
  if (*number < min) {
    p.error(at, path, "must be at least " + std::to_string(min) + ", got " + value);
    return std::nullopt;
  }
  return static_cast<int>(*number);
}

std::optional<std::string> check_hosts(Problems& p, const Origin& at, const std::string& path,
                                       const std::string& value) {
  const std::string word = util::to_lower(value);
  if (word == "all" || word == "0") {
    return word;
  }
  p.error(at, path, "expected all (the script runs on every host) or 0 (on host 0 only), got '" + value + "'");
  return std::nullopt;
}

// BEGIN, END, FAIL, ALL (the three) or NONE alone, in any case: the types in the order BEGIN, END, FAIL.
std::optional<std::vector<std::string>> check_mail_types(Problems& p, const Origin& at, const std::string& path,
                                                         const std::string& value) {
  static const std::vector<std::string> order{"BEGIN", "END", "FAIL"};
  static const std::vector<std::string> names{"BEGIN", "END", "FAIL", "ALL", "NONE"};
  std::vector<std::string> chosen;
  bool none = false;
  bool ok = true;
  for (const auto& item : util::split(value, ',')) {
    const std::string word = util::to_upper(util::trim(item));
    if (word.empty()) {
      p.error(at, path, "empty mail type in '" + value + "'", "list types with single commas, e.g. END,FAIL");
      ok = false;
    } else if (word == "NONE") {
      none = true;
    } else if (word == "ALL") {
      chosen.insert(chosen.end(), order.begin(), order.end());
    } else if (std::find(order.begin(), order.end(), word) != order.end()) {
      chosen.push_back(word);
    } else {
      p.error(at, path, "unknown mail type '" + std::string(util::trim(item)) + "'", detail::suggestion(word, names));
      ok = false;
    }
  }
  if (none && !chosen.empty()) {
    p.error(at, path, "NONE cannot be combined with other mail types", "write NONE alone, or leave it out");
    ok = false;
  }
  if (!ok) {
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& type : order) {
    if (std::find(chosen.begin(), chosen.end(), type) != chosen.end()) {
      out.push_back(type);
    }
  }
  return out;
}

std::optional<std::string> check_mail_user(Problems& p, const Origin& at, const std::string& path,
                                           const std::string& value) {
  static const std::regex address(R"([^@\s]+@[^@\s]+\.[^@\s]+)");
  if (!std::regex_match(value, address)) {
    p.error(at, path, "'" + value + "' is not an e-mail address", "e.g. you@example.com");
    return std::nullopt;
  }
  return value;
}

// ---- Headers ----

TaskHeaders read_headers(const std::string& text, const std::string& file, Problems& p) {
  TaskHeaders out;
  const auto& keys = header_keys();
  // The option that counts for each key: the last one.
  std::map<std::string, Option> winners;
  for (auto& option : read_options(text, file, p)) {
    const std::string path = header_path(option.key);
    if (std::find(keys.begin(), keys.end(), option.key) == keys.end()) {
      p.warn(option.key_at, path, "unknown key, ignored (" + detail::suggestion(option.key, keys) + ")");
      continue;
    }
    if (const auto it = winners.find(option.key); it != winners.end()) {
      p.warn(option.key_at, path,
             "also given on line " + std::to_string(it->second.key_at.line) + ": this later value is used");
      it->second = std::move(option);
    } else {
      winners.emplace(option.key, std::move(option));
    }
  }
  for (const auto& [key, option] : winners) {
    const std::string path = header_path(key);
    if (!option.value || option.value->empty()) {
      p.error(option.key_at, path, "needs a value", "e.g. '" + path + "=" + example_value(key) + "'");
      continue;
    }
    const Origin& at = option.value_at;
    const std::string& value = *option.value;
    out.origins[key] = SourceLocation{at.file, at.line, at.column, path};
    if (key == "name") {
      out.name = value;
    } else if (key == "accelerator") {
      out.accelerator = check_accelerator(p, at, path, value);
    } else if (key == "zone") {
      out.zone = check_zone(p, at, path, value);
    } else if (key == "tpu-version") {
      out.tpu_version = value;
    } else if (key == "pricing") {
      out.pricing = check_pricing(p, at, path, value);
    } else if (key == "max-retries") {
      out.max_retries = check_integer(p, at, path, value, 0);
    } else if (key == "priority") {
      out.priority = check_integer(p, at, path, value, INT_MIN);
    } else if (key == "hosts") {
      out.hosts = check_hosts(p, at, path, value);
    } else if (key == "mail-user") {
      out.mail_user = check_mail_user(p, at, path, value);
    } else if (key == "mail-type") {
      out.mail_type_given = true;
      if (auto types = check_mail_types(p, at, path, value)) {
        out.mail_types = std::move(*types);
      }
    }
  }
  // Mail needs both an address and what to send; a mail type of NONE needs no address.
  const auto user = winners.find("mail-user");
  const auto type = winners.find("mail-type");
  if (user != winners.end() && type == winners.end() && out.mail_user) {
    p.error(user->second.key_at, header_path("mail-user"), "needs a mail type too",
            "add '" + header_path("mail-type") + "=" + example_value("mail-type") + "'");
  }
  if (type != winners.end() && user == winners.end() && !out.mail_types.empty()) {
    p.error(type->second.key_at, header_path("mail-type"), "needs a mail user too",
            "add '" + header_path("mail-user") + "=" + example_value("mail-user") + "'");
  }
  out.fanout_line = find_fanout(text);
  return out;
}

// Warnings in document order; those without a line last.
void sort_warnings(std::vector<ConfigWarning>& warnings) {
  std::stable_sort(warnings.begin(), warnings.end(), [](const ConfigWarning& a, const ConfigWarning& b) {
    const auto key = [](const ConfigWarning& w) {
      return std::pair(w.where.line == 0 ? INT_MAX : w.where.line, w.where.column);
    };
    return key(a) < key(b);
  });
}

[[noreturn]] void fail(std::vector<Diagnostic> errors) {
  detail::sort_by_position(errors);
  throw ConfigError(std::move(errors));
}

// ---- The config document ----

// A here-document delimiter that occurs nowhere in `body`.
std::string delimiter_for(const std::string& body) {
  std::string delimiter = "JOBMAN_SCRIPT_" + util::hex_digits(util::fnv1a(body), 16);
  while (body.find(delimiter) != std::string::npos) {
    delimiter += "_" + util::hex_digits(util::fnv1a(delimiter) ^ util::fnv1a(body), 16);
  }
  return delimiter;
}

// Standard base64 in lines of 76, each ending in a newline.
std::string base64_lines(std::string_view bytes) {
  std::string text = util::base64url_encode(bytes);
  std::replace(text.begin(), text.end(), '-', '+');
  std::replace(text.begin(), text.end(), '_', '/');
  while (text.size() % 4 != 0) {
    text += '=';
  }
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 76) {
    out.append(text, i, 76);
    out += '\n';
  }
  return out;
}

// How the script travels in the command.
enum class Carrier {
  text,   // As it is, in a quoted here-document: readable in `jobman show`.
  base64, // Encoded, for bytes a config cannot hold as they are (not UTF-8, or "\${", which references unescape).
};

// The job's command: writes the script to the job's directory on the host and runs it there.
std::string task_command(const std::string& script, Carrier carrier) {
  const std::string body = carrier == Carrier::text ? script : base64_lines(script);
  std::string writer = "cat";
  if (carrier == Carrier::base64) {
    writer = "base64 -d";
  } else if (!script.ends_with('\n')) {
    // The here-document ends the last line; the file must not.
    writer = "head -c " + std::to_string(script.size());
  }
  const std::string delimiter = delimiter_for(body);
  std::string cmd = "# The task script, written to the job's directory on the host, then run.\n";
  if (carrier == Carrier::base64) {
    cmd += "# It is carried in base64: it holds bytes that a config does not keep as they are.\n";
  }
  cmd += "task=\"$HOME/.jobman/jobs/$JOBMAN_JOB_ID/task-$JOBMAN_ATTEMPT.sh\"\n";
  cmd += "mkdir -p \"$(dirname \"$task\")\" || exit 1\n";
  cmd += "(umask 077 && " + writer + " > \"$task\") <<'" + delimiter + "' || exit 1\n";
  cmd += body;
  if (!body.ends_with('\n')) {
    cmd += '\n';
  }
  cmd += delimiter + "\n";
  cmd += "chmod 700 \"$task\" || exit 1\n";
  cmd += script.starts_with("#!") ? "exec \"$task\"\n" : "exec bash \"$task\"\n";
  return cmd;
}

// The config document of a task whose command is `cmd`. Strings are written so that the loader's references (${a.b})
// read back as written.
std::string config_document(const TaskRequest& task, const std::string& cmd) {
  const auto text = [](const std::string& value) { return detail::escape_references(value); };
  json doc = json::object();
  doc["job"] = json{{"name", text(task.name)}};
  json tpu = json::object();
  tpu["accelerator"] = task.accelerator;
  if (!task.zone.empty()) {
    tpu["zone"] = task.zone;
  }
  if (!task.tpu_version.empty()) {
    tpu["version"] = text(task.tpu_version);
  }
  if (task.pricing) {
    tpu["pricing"] = domain::to_string(*task.pricing);
  }
  doc["tpu"] = tpu;
  doc["command"] = json{{"cmd", text(cmd)}, {"workers", task.all_hosts ? json("all") : json::array({0})}};
  doc["recovery"] = json{{"max_failures", task.max_retries}};
  if (!task.mail_user.empty() && !task.mail_types.empty()) {
    // The Brevo key and sender are read when a mail goes out (notify.brevo_config, the environment, the settings);
    // the document names only whom to mail and when.
    json notify = {{"events", task.mail_types}, {"mail_to", json::array({text(task.mail_user)})}};
    if (!task.brevo_config.empty()) {
      notify["brevo_config"] = text(task.brevo_config);
    }
    doc["notify"] = notify;
  }
  return detail::emit_yaml(doc);
}

// True when the loader reads command.cmd of `document` (references resolved) as exactly `cmd`.
bool carries_command(const std::string& document, const std::string& cmd) {
  std::vector<Diagnostic> errors;
  const detail::Node root = detail::parse_yaml(document, "task", errors);
  const detail::Entry* command = errors.empty() ? root.find("command") : nullptr;
  const detail::Entry* entry = command == nullptr ? nullptr : command->value.find("cmd");
  if (entry == nullptr || !entry->value.is_scalar()) {
    return false;
  }
  detail::Node value = entry->value;
  detail::resolve_references(value, detail::ReferenceDefaults{}, errors);
  return errors.empty() && value.is_scalar() && value.text == cmd;
}

// Where the first NUL byte of `text` is.
Origin nul_origin(const std::string& file, const std::string& text, std::size_t at) {
  const std::size_t line_start = text.rfind('\n', at);
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  const std::size_t column = line_start == std::string::npos ? at + 1 : at - line_start;
  return Origin{file, static_cast<int>(line), static_cast<int>(column)};
}

} // namespace

TaskHeaders parse_task_headers(const std::string& text, const std::string& display_name) {
  Problems p;
  TaskHeaders headers = read_headers(text, display_name, p);
  if (!p.errors.empty()) {
    fail(std::move(p.errors));
  }
  sort_warnings(p.warnings);
  headers.warnings = std::move(p.warnings);
  return headers;
}

TaskRequest read_task_script(const std::string& path, const TaskOverrides& overrides) {
  TaskRequest task;
  task.script_text = util::read_file(path);
  const std::string& text = task.script_text;
  if (text.empty()) {
    fail({detail::make_diagnostic(Origin{path, 0, 0}, "", "the task script is empty",
                                  "a task script holds a command to run and its '#JOBMAN --accelerator=...' line")});
  }
  if (const auto nul = text.find('\0'); nul != std::string::npos) {
    fail({detail::make_diagnostic(nul_origin(path, text, nul), "", "not a text file: it holds a NUL byte",
                                  "a task script is a shell script")});
  }
  Problems p;
  const TaskHeaders headers = read_headers(text, path, p);
  task.origins = headers.origins;

  // The command line's values win over the headers and are checked as they are; messages name the flag.
  const auto flag = [&](const std::string& key) { return Origin{"--" + key, 0, 0}; };
  const auto given = [&](const std::string& key, const std::optional<std::string>& value) {
    if (value && value->empty()) {
      p.error(flag(key), "", "needs a value", "e.g. --" + key + "=" + example_value(key));
      return false;
    }
    return value.has_value();
  };
  const auto from_flag = [&](const std::string& key) { task.origins[key] = SourceLocation{"--" + key, 0, 0, ""}; };
  std::optional<std::string> name = headers.name;
  std::optional<std::string> accelerator = headers.accelerator;
  std::optional<std::string> zone = headers.zone;
  std::optional<std::string> tpu_version = headers.tpu_version;
  std::optional<Pricing> pricing = headers.pricing;
  std::optional<int> max_retries = headers.max_retries;
  std::optional<int> priority = headers.priority;
  if (given("name", overrides.name)) {
    name = overrides.name;
    from_flag("name");
  }
  if (given("accelerator", overrides.accelerator)) {
    accelerator = check_accelerator(p, flag("accelerator"), "", *overrides.accelerator);
    from_flag("accelerator");
  }
  if (given("zone", overrides.zone)) {
    zone = check_zone(p, flag("zone"), "", *overrides.zone);
    from_flag("zone");
  }
  if (given("tpu-version", overrides.tpu_version)) {
    tpu_version = overrides.tpu_version;
    from_flag("tpu-version");
  }
  if (given("pricing", overrides.pricing)) {
    pricing = check_pricing(p, flag("pricing"), "", *overrides.pricing);
    from_flag("pricing");
  }
  if (overrides.max_retries) {
    max_retries = check_integer(p, flag("max-retries"), "", std::to_string(*overrides.max_retries), 0);
    from_flag("max-retries");
  }
  if (overrides.priority) {
    priority = overrides.priority;
    from_flag("priority");
  }
  if (!p.errors.empty()) {
    fail(std::move(p.errors));
  }
  if (!accelerator) {
    throw UsageError(path + ": no accelerator: give --accelerator or a '#JOBMAN --accelerator=...' line");
  }

  task.name = name.value_or(std::filesystem::path(path).stem().string());
  if (task.name.empty()) {
    task.name = "task";
  }
  task.accelerator = *accelerator;
  task.zone = zone.value_or("");
  task.pricing = pricing;
  task.tpu_version = tpu_version.value_or("");
  task.max_retries = max_retries.value_or(3);
  task.priority = priority.value_or(0);
  if (headers.hosts) {
    task.all_hosts = *headers.hosts == "all";
  } else {
    task.all_hosts = headers.fanout_line == 0;
    if (!task.all_hosts) {
      const std::string line = std::to_string(headers.fanout_line);
      p.warn(Origin{path, headers.fanout_line, 0}, header_path("hosts"),
             "runs on host 0 only, as jobman-lite ran it: line " + line +
                 " fans out to every host itself; '#JOBMAN --hosts=all' runs it on every host");
    }
  }
  task.mail_user = headers.mail_user.value_or("");
  task.mail_types = headers.mail_types;
  if (!task.mail_user.empty()) {
    // Where jobman-lite keeps its Brevo key and sender: .jobman_brevo.json in the directory `task submit` runs in.
    std::error_code ec;
    const auto lite = std::filesystem::current_path(ec) / ".jobman_brevo.json";
    if (!ec && std::filesystem::is_regular_file(lite, ec)) {
      task.brevo_config = lite.lexically_normal().string();
    }
  }
  task.script_path = std::filesystem::absolute(std::filesystem::path(path)).lexically_normal().string();
  sort_warnings(p.warnings);
  task.warnings = std::move(p.warnings);

  // The script as it is when the loader reads it back exactly, else encoded.
  for (const Carrier carrier : {Carrier::text, Carrier::base64}) {
    const std::string cmd = task_command(text, carrier);
    task.config_yaml = config_document(task, cmd);
    if (carries_command(task.config_yaml, cmd)) {
      return task;
    }
  }
  throw Error(path + ": cannot write the task's config: its command does not read back as written");
}

bool is_task_script(const std::string& path) {
  const std::string extension = util::to_lower(std::filesystem::path(path).extension().string());
  if (extension == ".yaml" || extension == ".yml") {
    return false;
  }
  if (extension == ".sh" || extension == ".bash") {
    return true;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return false;
  }
  // Enough of any script to hold its headers; a config is far smaller.
  std::string head(std::size_t{1} << 20, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  if (head.starts_with("#!")) {
    return true;
  }
  bool header = false;
  each_line(head, [&](std::string_view line, int) { header = header || header_options(line).has_value(); });
  return header;
}

} // namespace jobman::config
