// `jobman list`: the jobs that matter now (or all of them), read from the store alone.
#include "commands.hpp"
#include "jobman/config/accelerator.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "output.hpp"
#include "waiting.hpp"

#include <map>
#include <optional>

namespace jobman::cli {

namespace {

struct ListOptions {
  bool all = false;
  std::vector<std::string> statuses;
  std::string name_glob;
  std::string user;
  bool quiet = false;
  bool json = false;
  std::string kind = "job"; // job, worker, task or all.
};

std::vector<domain::Phase> parse_statuses(const std::vector<std::string>& args) {
  std::vector<std::string> names;
  for (const auto p : domain::all_phases()) {
    names.emplace_back(domain::to_string(p));
  }
  std::vector<domain::Phase> phases;
  for (const auto& arg : args) {
    for (const auto& part : util::split(arg, ',')) {
      const auto trimmed = std::string(util::trim(part));
      if (trimmed.empty()) {
        continue;
      }
      if (auto phase = domain::parse_phase(trimmed)) {
        phases.push_back(*phase);
        continue;
      }
      const std::string upper = util::to_upper(trimmed);
      std::string message = "--status: unknown status '" + trimmed + "'";
      if (auto near = util::closest_match(upper, names)) {
        message += " (did you mean " + *near + "?)";
      } else {
        message += " (one of " + util::join(names, ", ") + ")";
      }
      throw UsageError(message);
    }
  }
  return phases;
}

// Writes in large chunks: `list --all` can print a hundred thousand rows.
class ChunkedWriter {
public:
  explicit ChunkedWriter(std::ostream& out) : out_(out) { buffer_.reserve(kChunk + 4096); }
  ~ChunkedWriter() { flush(); }
  ChunkedWriter(const ChunkedWriter&) = delete;
  ChunkedWriter& operator=(const ChunkedWriter&) = delete;
  void append(std::string_view text) {
    buffer_ += text;
    if (buffer_.size() >= kChunk) {
      flush();
    }
  }
  void flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
  }

private:
  static constexpr std::size_t kChunk = 1 << 16;
  std::ostream& out_;
  std::string buffer_;
};

int run_list(Context& ctx, const ListOptions& options) {
  if (options.json) {
    silence_logging();
  }
  store::JobFilter filter;
  filter.include_history = options.all;
  filter.phases = parse_statuses(options.statuses);
  filter.name_glob = options.name_glob;
  filter.user = user_filter(ctx.store(), options.user);
  if (options.kind != "all") {
    filter.kinds = {*domain::parse_job_kind(options.kind)};
  }
  // A status filter names what the user wants to see, finished or not.
  if (!filter.phases.empty()) {
    filter.include_history = true;
  }
  auto& store = ctx.store();
  keep_jobs_driven(ctx);
  if (options.json) {
    ChunkedWriter writer(*ctx.out);
    bool first = true;
    std::string text;
    writer.append("[");
    store.jobs().for_each(filter, [&](const domain::JobRecord& job) {
      text.assign(first ? "\n  " : ",\n  ");
      first = false;
      append_job_json(text, job);
      writer.append(text);
    });
    writer.append(first ? "]\n" : "\n]\n");
    return 0;
  }
  if (options.quiet) {
    ChunkedWriter writer(*ctx.out);
    store.jobs().for_each(filter, [&](const domain::JobRecord& job) {
      writer.append(domain::format_job_id(job.id));
      writer.append("\n");
    });
    return 0;
  }
  const std::int64_t now = util::now_ms();
  Table table({"JOB ID", "USER", "NAME", "ACCELERATOR", "ZONE", "HOST0 IP", "STATUS", "ATTEMPT", "PROGRESS", "AGE"});
  // Each accelerator resolved once: a job on several slices reads "v4-16x2" (its record counts every slice's hosts).
  std::map<std::string, std::optional<config::AcceleratorType>, std::less<>> accelerators;
  const auto accelerator_text = [&accelerators](const domain::JobRecord& job) {
    auto it = accelerators.find(job.accelerator);
    if (it == accelerators.end()) {
      it = accelerators.emplace(job.accelerator, config::find_accelerator(job.accelerator)).first;
    }
    return it->second ? it->second->label(it->second->slices_in(job.hosts)) : job.accelerator;
  };
  store.jobs().for_each(filter, [&](const domain::JobRecord& job) {
    table.add_row({domain::format_job_id(job.id), printable(job.user), printable(job.name), accelerator_text(job),
                   job.zone, job.host0_ip.empty() ? "-" : printable(job.host0_ip), status_text(job),
                   std::to_string(job.attempt), progress_text(job),
                   util::format_duration((now - job.created_ms) / 1000)},
                  phase_color(job.phase), 6);
  });
  if (table.size() == 0 && !options.all) {
    *ctx.err << (filter.phases.empty() && filter.name_glob.empty() && filter.user.empty()
                     ? "No active or recent jobs. 'jobman list --all' shows the whole history.\n"
                     : "No matching jobs.\n");
    return 0;
  }
  table.print(*ctx.out, ctx.color);
  return 0;
}

} // namespace

void add_list_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<ListOptions>();
  auto* cmd = app.add_subcommand("list", "List jobs: unfinished ones and those finished in the last 24 hours");
  cmd->alias("ls");
  cmd->add_flag("-a,--all", options->all, "Show every job in the store, however old");
  cmd->add_option("-s,--status", options->statuses,
                  "Only jobs in these phases (comma-separated or repeated), e.g. RUNNING,QUEUED")
      ->allow_extra_args(false)
      ->type_name("PHASE");
  cmd->add_option("-n,--name", options->name_glob, "Only jobs whose name matches this shell glob")->type_name("GLOB");
  cmd->add_option("-u,--user", options->user, kUserOptionHelp)->type_name("USER|all");
  cmd->add_flag("-q,--quiet", options->quiet, "Print job ids only, one per line");
  cmd->add_option("-k,--kind", options->kind,
                  "Which records: job (default: those `create` made), worker, task or all (`jobman status` shows "
                  "workers and tasks)")
      ->check(CLI::IsMember({"job", "worker", "task", "all"}));
  add_json_flag(*cmd, options->json);
  cmd->footer("Examples:\n"
              "  jobman list\n"
              "  jobman list --all --status FAILED\n"
              "  jobman list --name 'sweep-*' -q | xargs jobman cancel\n"
              "  jobman list --json | jq '.[] | select(.status == \"RUNNING\") | .id'\n"
              "Reads the local store only: no network, no daemon.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_list(ctx, *options); }; });
}

} // namespace jobman::cli
