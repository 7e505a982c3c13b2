// `jobman report`: where the time and money of many jobs went, from the store alone. jobman-lite's `analytics cost`
// is the same command.
#include "commands.hpp"
#include "jobman/reporting/report.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "output.hpp"

#include <sstream>

namespace jobman::cli {

namespace {

struct ReportOptions {
  std::vector<std::string> ids;
  std::string since = "7d";
  std::string user;
  std::string name_glob;
  std::string kind = "all";
  bool json = false;
  bool csv = false;
  std::string html;
  std::string prices;
  bool compare = false;
};

// `report --compare` as text, CSV or JSON: the finished runs grouped, no row per job.
int run_compare(Context& ctx, const ReportOptions& options, reporting::ReportSelection selection,
                const config::PriceTable& prices, std::int64_t now) {
  const auto report = reporting::build_comparison(ctx.store(), std::move(selection), prices, now);
  if (options.json) {
    reporting::write_compare_json(*ctx.out, report, prices);
  } else if (options.csv) {
    reporting::write_compare_csv(*ctx.out, report, prices);
  } else {
    reporting::write_compare_text(*ctx.out, report, prices, ctx.color);
  }
  return 0;
}

int run_report(Context& ctx, const ReportOptions& options) {
  if (options.json || options.csv) {
    silence_logging();
  }
  reporting::ReportSelection selection;
  const std::int64_t now = util::now_ms();
  for (const auto& id : options.ids) {
    selection.ids.push_back(parse_job_id_argument(id));
  }
  const auto since = util::parse_duration_seconds(options.since);
  if (!since) {
    throw UsageError("--since: '" + options.since + "' is not a duration (90s, 30m, 2h, 7d)");
  }
  selection.since_ms = selection.ids.empty() ? now - *since * 1000 : 0;
  selection.user = user_filter(ctx.store(), options.user);
  selection.name_glob = options.name_glob;
  if (options.kind != "all") {
    selection.kinds = {*domain::parse_job_kind(options.kind)};
  }
  const auto prices =
      config::load_prices(options.prices.empty() ? std::nullopt : std::optional<std::filesystem::path>(options.prices));
  selection.compare = options.compare;
  if (options.compare && options.html.empty()) {
    return run_compare(ctx, options, selection, prices, now);
  }
  if (options.json || options.csv) {
    // Written as the rows come: a year of jobs never sits in memory.
    // Begun with the first row, so that an error before it (an id not in the store) leaves nothing half-written.
    bool first = true;
    bool begun = false;
    const auto begin = [&] {
      if (!begun && options.json) {
        reporting::write_report_json_head(*ctx.out, now, selection.since_ms, prices);
      } else if (!begun) {
        reporting::write_report_csv_header(*ctx.out);
      }
      begun = true;
    };
    std::string chunk; // Rows go out 64 KiB at a time.
    const auto report =
        reporting::build_report(ctx.store(), selection, prices, now, [&](const reporting::ReportRow& row) {
          begin();
          if (options.json) {
            reporting::append_report_json_row(chunk, row, prices, first);
          } else {
            reporting::append_report_csv_row(chunk, row, prices);
          }
          first = false;
          if (chunk.size() >= std::size_t{64} * 1024) {
            *ctx.out << chunk;
            chunk.clear();
          }
        });
    begin();
    *ctx.out << chunk;
    if (options.json) {
      reporting::write_report_json_tail(*ctx.out, report, prices, !first);
    }
    return 0;
  }
  selection.detailed_rows = options.html.empty() ? 0 : reporting::kHtmlTimelines;
  const auto report = reporting::build_report(ctx.store(), selection, prices, now);
  if (!options.html.empty()) {
    std::ostringstream html;
    reporting::write_report_html(html, report, prices);
    util::write_file_atomic(options.html, html.str(), 0644); // Whole or not at all.
    *ctx.err << "wrote " << options.html << " (" << report.jobs << (report.jobs == 1 ? " job" : " jobs") << ")\n";
    return 0;
  }
  reporting::write_report_text(*ctx.out, report, prices, ctx.color);
  return 0;
}

// The options, help and action of `report`, on `cmd` (the command itself, or jobman-lite's `analytics cost`).
void define_report(CLI::App* cmd, Context& ctx) {
  auto options = std::make_shared<ReportOptions>();
  cmd->add_option("IDS", options->ids, "Only these jobs (000042 or 42); default: those active within --since");
  cmd->add_option("--since", options->since, "Jobs unfinished or finished within this long (default 7d)");
  cmd->add_option("-u,--user", options->user, kUserOptionHelp)->type_name("USER|all");
  cmd->add_option("-n,--name", options->name_glob, "Only jobs whose name matches this shell glob")->type_name("GLOB");
  cmd->add_option("-k,--kind", options->kind, "Which records: job, worker, task or all (default)")
      ->check(CLI::IsMember({"job", "worker", "task", "all"}));
  auto* json = add_json_flag(*cmd, options->json);
  auto* csv = cmd->add_flag("--csv", options->csv, "One CSV line per job, seconds by bucket");
  auto* html = cmd->add_option("--html", options->html,
                               "Write one self-contained HTML file: a timeline per job, goodput and cost tables")
                   ->type_name("FILE");
  json->excludes(csv, html);
  csv->excludes(html);
  cmd->add_flag("--compare", options->compare,
                "Finished runs by experiment, accelerator, zone and tier: steps per hour, per chip-hour and per "
                "dollar, goodput, preemptions per day");
  cmd->add_option("--prices", options->prices,
                  "A price table over the built-in one (default: ~/.config/jobman/prices.yaml when present)")
      ->type_name("FILE");
  cmd->footer("Examples:\n"
              "  jobman report\n"
              "  jobman report 42 --html report.html\n"
              "  jobman report --since 30d --name 'sweep-*' --csv > sweep.csv\n"
              "  jobman report --compare --since 30d\n"
              "Each job's wall time splits into queued, provisioning, setup, productive, lost (work done again after\n"
              "a resume), recovering, bad hardware and idle; goodput is productive over the whole. Chip-hours are\n"
              "counted while slices are up; costs use list prices (configs/prices.yaml) and are estimates.\n"
              "--compare groups the finished runs (SUCCEEDED, and FAILED or CANCELLED ones that printed a step) by\n"
              "experiment (job.experiment, else the name without its sweep suffix) and by the accelerator, zone and\n"
              "tier of their slices: the highest step each run reached (each step once) per hour its slices were\n"
              "held, per chip-hour and per dollar; with --html, as a table at the top of the file.\n"
              "Reads the local store only.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_report(ctx, *options); }; });
}

} // namespace

void add_report_command(CLI::App& app, Context& ctx) {
  define_report(app.add_subcommand("report", "Where the time and money of jobs went: goodput, chip-hours, cost"), ctx);
  // `analytics` is made by add_availability_command, which runs first.
  define_report(app.get_subcommand("analytics")->add_subcommand("cost", "The same as `jobman report`"), ctx);
}

} // namespace jobman::cli
