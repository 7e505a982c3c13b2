#include "jobman/core/checkpoint_paths.hpp"

#include "jobman/core/jobs.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <utility>

namespace jobman::core {

namespace {

// The flags training programs take their checkpoint directory from.
constexpr std::array<std::string_view, 12> kCheckpointFlags{
    "--ckpt-dir",  "--ckpt_dir",  "--checkpoint-dir", "--checkpoint_dir", "--checkpoint-path", "--checkpoint_path",
    "--ckpt-path", "--ckpt_path", "--save-dir",       "--save_dir",       "--output-dir",      "--output_dir"};

// How far back create looks for jobs that wrote checkpoints, and how many of them it reads at most.
constexpr std::int64_t kLookBackMs = 90LL * 24 * 3600 * 1000;
constexpr std::size_t kJobsRead = 1000;

// The words of a command, split at blanks, with quotes taken off (enough for the flags above).
std::vector<std::string> words(const std::string& command) {
  std::vector<std::string> out;
  std::string word;
  char quote = 0;
  bool in_word = false;
  for (const char c : command) {
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '\\') {
      if (in_word) {
        out.push_back(word);
      }
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) {
    out.push_back(word);
  }
  return out;
}

// Where `path` is in the shared storage: "gs://BUCKET/..." for a path under the config's bucket mount or a gs://
// path; nullopt for a path of the worker's own disk (each slice has its own) or one the shell expands.
std::optional<std::string> shared_location(const config::JobConfig& config, const std::string& path) {
  if (path.find('$') != std::string::npos || path.find('`') != std::string::npos) {
    return std::nullopt;
  }
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') {
    trimmed.pop_back();
  }
  if (trimmed.starts_with("gs://")) {
    return trimmed;
  }
  if (!config.gcsfuse || config.gcsfuse->bucket_name.empty() || config.gcsfuse->mount_path.empty()) {
    return std::nullopt;
  }
  std::string mount = config.gcsfuse->mount_path;
  while (mount.size() > 1 && mount.back() == '/') {
    mount.pop_back();
  }
  if (trimmed == mount) {
    return "gs://" + config.gcsfuse->bucket_name;
  }
  if (trimmed.starts_with(mount + "/")) {
    return "gs://" + config.gcsfuse->bucket_name + trimmed.substr(mount.size());
  }
  return std::nullopt;
}

// The shared checkpoint locations of a config's command, each with the path as written.
std::vector<std::pair<std::string, std::string>> shared_checkpoints(const config::JobConfig& config) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& path : checkpoint_paths(config.command.cmd)) {
    if (auto where = shared_location(config, path)) {
      out.emplace_back(*where, path);
    }
  }
  return out;
}

} // namespace

std::vector<std::string> checkpoint_paths(const std::string& command) {
  std::vector<std::string> paths;
  const auto all = words(command);
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (const auto flag : kCheckpointFlags) {
      const std::string_view word = all[i];
      if (word == flag && i + 1 < all.size()) {
        paths.push_back(all[i + 1]);
      } else if (word.size() > flag.size() + 1 && word.starts_with(flag) && word[flag.size()] == '=') {
        paths.emplace_back(word.substr(flag.size() + 1));
      }
    }
  }
  return paths;
}

std::vector<std::string> shared_checkpoint_warnings(const store::JobStore& store,
                                                    const std::vector<config::JobConfig>& configs) {
  // Where each new config would keep its checkpoints.
  std::map<std::string, std::vector<std::size_t>> wanted;
  std::vector<std::vector<std::pair<std::string, std::string>>> of_config(configs.size());
  for (std::size_t i = 0; i < configs.size(); ++i) {
    of_config[i] = shared_checkpoints(configs[i]);
    for (const auto& [where, path] : of_config[i]) {
      wanted[where].push_back(i);
    }
  }
  if (wanted.empty()) {
    return {};
  }
  // Jobs that ran and whose commands name one of those places: the newest first.
  std::map<std::string, std::string> written_by;
  store::JobFilter filter;
  filter.include_history = true;
  filter.with_config = true;
  const auto since = util::now_ms() - kLookBackMs;
  std::vector<domain::JobRecord> ran;
  store.jobs().for_each(filter, [&](const domain::JobRecord& job) {
    if (job.attempt >= 1 && job.created_ms >= since && job.kind != domain::JobKind::worker) {
      ran.push_back(job);
    }
  });
  std::reverse(ran.begin(), ran.end());
  if (ran.size() > kJobsRead) {
    ran.resize(kJobsRead);
  }
  for (const auto& job : ran) {
    if (std::none_of(kCheckpointFlags.begin(), kCheckpointFlags.end(),
                     [&](std::string_view flag) { return job.config_yaml.find(flag) != std::string::npos; })) {
      continue;
    }
    try {
      for (const auto& [where, path] : shared_checkpoints(recorded_config(job))) {
        if (wanted.contains(where) && !written_by.contains(where)) {
          written_by[where] = "job " + domain::format_job_id(job.id) + " (" + job.name + ")";
        }
      }
    } catch (const std::exception&) {
      // A snapshot that no longer parses names no checkpoints.
    }
  }
  std::vector<std::string> warnings;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const std::string file = configs[i].source_path.empty() ? "the config" : configs[i].source_path;
    for (const auto& [where, path] : of_config[i]) {
      std::string other;
      if (const auto found = written_by.find(where); found != written_by.end()) {
        other = found->second + ", which wrote its checkpoints there";
      } else if (const auto& sharing = wanted[where]; sharing.size() > 1 && sharing.front() != i) {
        other = "job '" + configs[sharing.front()].job.name + "' of this create";
      } else {
        continue;
      }
      std::string warning = file;
      warning += ": command.cmd: checkpoint directory ";
      warning += path;
      warning += " (";
      warning += where;
      warning += ") is also ";
      warning += other;
      warning += ": this job would resume from those checkpoints; key the directory on $JOBMAN_JOB_ID (--ckpt-dir ";
      warning += path;
      warning += "-$JOBMAN_JOB_ID) to start afresh";
      warnings.push_back(std::move(warning));
    }
  }
  return warnings;
}

} // namespace jobman::core
