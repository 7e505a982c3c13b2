// `jobman availability`: what the store learnt of where capacity is, per zone, accelerator and tier (the supervisor
// orders a job's candidates by the same figures). Reads the store alone.
#include "commands.hpp"
#include "jobman/core/availability.hpp"
#include "jobman/reporting/json.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "output.hpp"

#include <cmath>
#include <cstdio>

namespace jobman::cli {

namespace {

struct AvailabilityOptions {
  std::string accelerator;
  std::string zone;
  std::string since = "30d";
  bool json = false;
};

std::string seconds_text(const std::optional<double>& seconds) {
  return seconds ? util::format_duration(std::llround(*seconds)) : "-";
}

std::string rate_text(const std::optional<double>& rate) {
  if (!rate) {
    return "-";
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", *rate);
  return text;
}

int run_availability(Context& ctx, const AvailabilityOptions& options) {
  const auto since = util::parse_duration_seconds(options.since);
  if (!since) {
    throw UsageError("--since: '" + options.since + "' is not a duration (90s, 30m, 2h, 1d)");
  }
  const std::int64_t now = util::now_ms();
  const auto stats =
      core::availability(ctx.store().attempts().since(now - *since * 1000, options.zone, options.accelerator), now);
  if (options.json) {
    auto out = nlohmann::ordered_json::array();
    for (const auto& s : stats) {
      out.push_back({{"zone", s.zone},
                     {"accelerator", s.accelerator},
                     {"pricing", domain::to_string(s.pricing)},
                     {"requests", s.requests},
                     {"came_up", s.came_up},
                     {"waiting_now", s.waiting_now},
                     {"gave_up", s.gave_up},
                     {"median_wait_seconds", reporting::json_or_null(s.median_wait_seconds)},
                     {"p90_wait_seconds", reporting::json_or_null(s.p90_wait_seconds)},
                     {"running_hours", s.running_hours},
                     {"preemptions", s.preemptions},
                     {"preemptions_per_hour", reporting::json_or_null(s.preemptions_per_hour())},
                     {"failures", s.failures},
                     {"bad_hardware", s.bad_hardware}});
    }
    *ctx.out << out.dump(2) << '\n';
    return 0;
  }
  if (stats.empty()) {
    *ctx.out << "No slice was asked for in the last " << options.since << ".\n";
    return 0;
  }
  Table table({"ZONE", "ACCELERATOR", "TIER", "REQUESTS", "UP", "WAIT P50", "WAIT P90", "WAITING", "PREEMPT/H",
               "FAILED", "BAD HW"});
  for (const auto& s : stats) {
    table.add_row({printable(s.zone), printable(s.accelerator), domain::to_string(s.pricing),
                   std::to_string(s.requests), std::to_string(s.came_up), seconds_text(s.median_wait_seconds),
                   seconds_text(s.p90_wait_seconds), std::to_string(s.waiting_now), rate_text(s.preemptions_per_hour()),
                   std::to_string(s.failures), std::to_string(s.bad_hardware)});
  }
  table.print(*ctx.out, ctx.color);
  return 0;
}

} // namespace

namespace {

// The options, help and action of `availability`, on `cmd` (the command itself, or jobman-lite's `analytics
// availability`).
void define_availability(CLI::App* cmd, Context& ctx) {
  auto options = std::make_shared<AvailabilityOptions>();
  cmd->add_option("-a,--accelerator", options->accelerator, "Only this accelerator (v4-8, v5litepod-16, ...)");
  cmd->add_option("-z,--zone", options->zone, "Only this zone");
  cmd->add_option("--since", options->since, "How far back to look (default 30d; 90s, 30m, 2h, 1d)");
  add_json_flag(*cmd, options->json);
  cmd->footer(
      "Examples:\n"
      "  jobman availability\n"
      "  jobman availability -a v4-32 --since 7d --json\n"
      "From every attempt in the store: REQUESTS slices asked for, UP those that became ACTIVE, WAIT the time\n"
      "from the request to ACTIVE (median, 90th percentile), WAITING those still queued, PREEMPT/H preemptions\n"
      "per hour of running slices, FAILED attempts that failed, BAD HW slices found bad or rejected as known\n"
      "bad. Reads the local store only.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_availability(ctx, *options); }; });
}

} // namespace

void add_availability_command(CLI::App& app, Context& ctx) {
  define_availability(app.add_subcommand("availability", "Show how fast each zone, accelerator and tier gave slices"),
                      ctx);
  auto* analytics = app.add_subcommand("analytics", "jobman-lite's analytics: availability and cost");
  analytics->require_subcommand(1);
  analytics->footer("Examples:\n"
                    "  jobman analytics availability -a v4-32\n"
                    "  jobman analytics cost --since 7d\n"
                    "The same as `jobman availability` and `jobman report`.");
  define_availability(analytics->add_subcommand("availability", "The same as `jobman availability`"), ctx);
}

} // namespace jobman::cli
