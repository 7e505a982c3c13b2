// `jobman availability`: what the store learnt of where capacity is, per zone, accelerator and tier (the supervisor
// orders a job's candidates by the same figures). Reads the store alone.
#include "commands.hpp"
#include "jobman/config/prices.hpp"
#include "jobman/core/availability.hpp"
#include "jobman/reporting/json.hpp"
#include "jobman/reporting/report.hpp"
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
  std::string experiment;
  std::string prices;
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
  const auto prices =
      config::load_prices(options.prices.empty() ? std::nullopt : std::optional<std::filesystem::path>(options.prices));
  // The experiment's finished runs in the window, in every place (an estimate for one place reads the others).
  std::vector<reporting::CompareGroup> measured;
  if (!options.experiment.empty()) {
    reporting::ReportSelection selection;
    selection.since_ms = now - *since * 1000;
    selection.experiment = options.experiment;
    measured = reporting::build_comparison(ctx.store(), selection, prices, now).comparison;
  }
  const auto per_dollar = [&](const core::PlaceStats& s) {
    return reporting::steps_per_dollar_at(measured, options.experiment, s.accelerator, s.zone, s.pricing, prices);
  };
  if (options.json) {
    auto out = nlohmann::ordered_json::array();
    for (const auto& s : stats) {
      nlohmann::ordered_json place = {
          {"zone", s.zone},
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
          {"bad_hardware", s.bad_hardware},
          {"price_per_chip_hour", reporting::json_or_null(prices.chip_hour(s.accelerator, s.pricing))}};
      if (!options.experiment.empty()) {
        const auto steps = per_dollar(s);
        place["steps_per_dollar"] = steps ? nlohmann::ordered_json(steps->value) : nlohmann::ordered_json(nullptr);
        place["steps_per_dollar_estimated"] = steps ? nlohmann::ordered_json(steps->estimated) : nullptr;
        place["experiment_runs"] = steps ? steps->runs : 0;
      }
      out.push_back(std::move(place));
    }
    *ctx.out << out.dump(2) << '\n';
    return 0;
  }
  if (stats.empty()) {
    *ctx.out << "No slice was asked for in the last " << options.since << ".\n";
    return 0;
  }
  std::vector<std::string> header{"ZONE",     "ACCELERATOR", "TIER",      "REQUESTS", "UP",     "WAIT P50",
                                  "WAIT P90", "WAITING",     "PREEMPT/H", "FAILED",   "BAD HW", "PRICE/CHIP-H"};
  if (!options.experiment.empty()) {
    header.emplace_back("STEPS/" + (prices.currency == "USD" ? std::string("$") : prices.currency));
  }
  Table table(header);
  bool estimated = false;
  for (const auto& s : stats) {
    const auto price = prices.chip_hour(s.accelerator, s.pricing);
    std::vector<std::string> cells{printable(s.zone),
                                   printable(s.accelerator),
                                   domain::to_string(s.pricing),
                                   std::to_string(s.requests),
                                   std::to_string(s.came_up),
                                   seconds_text(s.median_wait_seconds),
                                   seconds_text(s.p90_wait_seconds),
                                   std::to_string(s.waiting_now),
                                   rate_text(s.preemptions_per_hour()),
                                   std::to_string(s.failures),
                                   std::to_string(s.bad_hardware),
                                   price ? reporting::money(*price, prices) : "-"};
    if (!options.experiment.empty()) {
      const auto steps = per_dollar(s);
      cells.push_back(steps ? (steps->estimated ? "~" : "") + reporting::figure_text(steps->value) : "-");
      estimated = estimated || (steps && steps->estimated);
    }
    table.add_row(std::move(cells));
  }
  table.print(*ctx.out, ctx.color);
  if (!options.experiment.empty()) {
    *ctx.out << "\n"
             << header.back() << ": steps per " << prices.currency << " of " << printable(options.experiment)
             << "'s finished runs in the last " << options.since << " there (jobman report --compare)";
    if (measured.empty()) {
      *ctx.out << "; it has none";
    } else if (estimated) {
      *ctx.out << "; ~: estimated from its steps per chip-hour on the same accelerator elsewhere, at this place's "
                  "price";
    }
    *ctx.out << ".\n";
  }
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
  cmd->add_option("--experiment", options->experiment,
                  "Add this experiment's steps per dollar in each place, measured or estimated (report --compare)")
      ->type_name("NAME");
  cmd->add_option("--prices", options->prices,
                  "A price table over the built-in one (default: ~/.config/jobman/prices.yaml when present)")
      ->type_name("FILE");
  cmd->footer(
      "Examples:\n"
      "  jobman availability\n"
      "  jobman availability -a v4-32 --since 7d --json\n"
      "  jobman availability --experiment llama-8b\n"
      "From every attempt in the store: REQUESTS slices asked for, UP those that became ACTIVE, WAIT the time\n"
      "from the request to ACTIVE (median, 90th percentile), WAITING those still queued, PREEMPT/H preemptions\n"
      "per hour of running slices, FAILED attempts that failed, BAD HW slices found bad or rejected as known\n"
      "bad, PRICE/CHIP-H the list price of a chip-hour there. With --experiment, STEPS/$ is that experiment's\n"
      "steps per dollar there, from its finished runs in the window; ~ marks an estimate from its steps per\n"
      "chip-hour on the same accelerator in another zone or tier, at this place's price. Reads the local store\n"
      "only.");
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
