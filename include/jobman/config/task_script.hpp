// Task scripts: shell scripts with jobman-lite's Slurm-like "#JOBMAN --key=value" headers, read into what a task asks
// for and the job config document that runs it.
//
// A header line is any line whose text, stripped of whitespace, is "#JOBMAN" then whitespace then options. Each option
// is "--key=value" or a bare "--key"; jobman also takes "--key value" (an extension: jobman-lite reads that as a bare
// "--key"). When a key is given twice, the later line wins. Keys: name, accelerator, zone, tpu-version, max-retries,
// pricing, mail-user, mail-type (jobman-lite's), priority and hosts (jobman's).
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/util/error.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace jobman::config {

// The #JOBMAN headers of a task script, each with where it was written.
struct TaskHeaders {
  std::optional<std::string> name;
  std::optional<std::string> accelerator; // The catalog's name for it ("v5litepod-16" for "v5e-16").
  std::optional<std::string> zone;
  std::optional<std::string> tpu_version;
  std::optional<Pricing> pricing; // Written as any spelling parse_pricing accepts, in any case.
  std::optional<std::string> mail_user;
  std::optional<std::string> hosts;    // "all" (every host of the slice) or "0" (host 0 only).
  std::optional<int> max_retries;      // At least 0; jobman-lite's default, 3, is applied by read_task_script.
  std::optional<int> priority;         // Higher runs first.
  std::vector<std::string> mail_types; // A subset of BEGIN, END, FAIL, in that order (ALL is all three).
  bool mail_type_given = false;        // A --mail-type header was given (NONE gives it with no types).
  // Header key ("accelerator", "max-retries") -> where its value was written: file, line, column, and the key path
  // "#JOBMAN --accelerator".
  std::map<std::string, SourceLocation> origins;
  // Unknown header keys (with a did-you-mean), keys given twice, words that are not options.
  std::vector<ConfigWarning> warnings;
  // The first line (1-based) of a call that fans out to the slice's hosts itself: `gcloud ... tpu-vm ssh ...
  // --worker=all` (or `--worker all`) outside comments, continued lines and quoted text included; 0 when none.
  int fanout_line = 0;
};

// Reads the headers of `text`; `display_name` is what messages call the file. Throws ConfigError with every problem,
// each at its file:line:column and key path ("#JOBMAN --max-retries"): a value that is not an integer, a negative
// max-retries, an unknown pricing, mail type or hosts value, NONE with other mail types, an address that is not an
// e-mail, mail-user without mail-type or the other way round, an accelerator the catalog does not have, a zone not
// shaped like one, a known key without a value. Only the value that wins (the last one) of a repeated key is checked.
TaskHeaders parse_task_headers(const std::string& text, const std::string& display_name);

// What `jobman task submit` was given besides the script: the command line's values, which win over the headers.
struct TaskOverrides {
  std::optional<std::string> name;
  std::optional<std::string> accelerator;
  std::optional<std::string> zone;
  std::optional<std::string> tpu_version;
  std::optional<std::string> pricing; // As typed; read_task_script parses it as it does the header.
  std::optional<int> max_retries;
  std::optional<int> priority;
};

// A task ready to record: what it asks for and the config document that runs it.
struct TaskRequest {
  std::string name;               // The override, else the header, else the script's file name without its extension.
  std::string accelerator;        // The catalog's name for it.
  std::string zone;               // Empty: any zone (the caller's LoadOptions::default_zone applies to the config).
  std::optional<Pricing> pricing; // nullopt when neither header nor flag gave one: a worker of any pricing.
  std::string tpu_version;        // Empty when not given.
  int max_retries = 3;
  int priority = 0;
  // The hosts header; without one, false when the script fans out itself (TaskHeaders::fanout_line), else true.
  bool all_hosts = true;
  std::string mail_user;
  std::vector<std::string> mail_types;
  std::string brevo_config; // jobman-lite's .jobman_brevo.json where `task submit` runs, when there is one.
  std::string script_path;  // Absolute.
  std::string script_text;  // Exactly the file's bytes.
  // Where accelerator, zone, tpu_version and the other values that were given came from, by header key: the header
  // (as in TaskHeaders::origins) or the flag (file "--accelerator", no line), for messages about them after loading.
  std::map<std::string, SourceLocation> origins;
  // The headers' warnings, and a note when the script's own fan-out turned all_hosts off.
  std::vector<ConfigWarning> warnings;
  // A job config document (job, tpu, command, recovery and, with a mail user and types, notify) that
  // parse_job_configs reads into the task's JobConfig. Its command writes the script, byte for byte, to
  // "$HOME/.jobman/jobs/$JOBMAN_JOB_ID/task-$JOBMAN_ATTEMPT.sh" (mode 700) and runs it: through its #! line when it
  // has one, else with bash.
  std::string config_yaml;
};

// Reads the task script at `path` and applies `overrides`, which are checked as the headers are (their messages
// name the flag, e.g. "--accelerator", as the file). Throws Error naming the path when the file cannot be read,
// ConfigError when it is empty or not text (holds a NUL byte) or has bad headers or overrides (every problem at
// once), and UsageError naming the file when neither gives an accelerator.
TaskRequest read_task_script(const std::string& path, const TaskOverrides& overrides = {});

// Whether `path` is to be read as a task script rather than a YAML config: a name ending in .yaml or .yml is a
// config; one ending in .sh or .bash is a script; otherwise a file that starts with "#!" or has a #JOBMAN header
// line is one. A file that cannot be read is not.
bool is_task_script(const std::string& path);

} // namespace jobman::config
