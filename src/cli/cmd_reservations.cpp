// `jobman reservations`: the project's TPU reservations, zone by zone (the TPU API's v2alpha1 reservations.list), with
// their chips and how many are free: where `pricing: reserved` and `tpu.reservation` can draw.
#include "commands.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/util/strings.hpp"
#include "output.hpp"

#include <algorithm>
#include <spdlog/spdlog.h>
#include <tuple>

namespace jobman::cli {

namespace {

struct ReservationsOptions {
  std::vector<std::string> zones;
  bool all_zones = false;
  bool json = false;
};

// One reservation as the command shows it.
struct ReservationRow {
  std::string name; // The id after "/reservations/".
  std::string zone;
  std::string type;
  long long chips = 0;
  long long in_use = 0;
  std::string state;

  [[nodiscard]] long long free() const { return std::max(0LL, chips - in_use); }
};

nlohmann::ordered_json rows_json(const std::vector<ReservationRow>& rows) {
  auto out = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    out.push_back({{"name", r.name},
                   {"zone", r.zone},
                   {"type", text_or_null(r.type)},
                   {"chips", r.chips},
                   {"in_use", r.in_use},
                   {"free", r.free()},
                   {"state", text_or_null(r.state)}});
  }
  return out;
}

void print_table(Context& ctx, const std::vector<ReservationRow>& rows) {
  Table table({"NAME", "ZONE", "TYPE", "CHIPS", "IN USE", "FREE", "STATE"});
  for (const auto& r : rows) {
    table.add_row({printable(r.name), printable(r.zone), r.type.empty() ? "-" : printable(r.type),
                   std::to_string(r.chips), std::to_string(r.in_use), std::to_string(r.free()),
                   r.state.empty() ? "-" : printable(r.state)});
  }
  table.print(*ctx.out, ctx.color);
}

int run_reservations(Context& ctx, const ReservationsOptions& options) {
  if (options.json) {
    silence_logging();
  }
  check_zone_arguments(options.zones, options.all_zones);
  const auto access = core::connect_cloud(config::load_settings(), *ctx.err);
  const auto zones = zones_to_look_in(ctx, access, options.zones, options.all_zones, options.json);
  std::vector<std::vector<cloud::Reservation>> listed(zones.size());
  list_each_zone(zones, [&](std::size_t i) {
    spdlog::debug("listing the reservations in {}", zones[i]);
    listed[i] = access.client->list_reservations(access.location(zones[i]));
  });
  std::vector<ReservationRow> rows;
  for (std::size_t i = 0; i < zones.size(); ++i) {
    for (const auto& r : listed[i]) {
      rows.push_back({core::resource_name_id(r.name), zones[i], r.type, r.chips, r.in_use, r.state});
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ReservationRow& a, const ReservationRow& b) {
    return std::tie(a.zone, a.name) < std::tie(b.zone, b.name);
  });
  if (options.json) {
    *ctx.out << rows_json(rows).dump(2) << '\n';
  } else if (rows.empty()) {
    *ctx.err << "No reservations in " << util::join(zones, ", ") << ".\n";
  } else {
    print_table(ctx, rows);
  }
  return 0;
}

} // namespace

void add_reservations_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<ReservationsOptions>();
  auto* cmd =
      app.add_subcommand("reservations", "List the project's TPU reservations with their chips in use and free");
  cmd->add_option("--zone", options->zones,
                  "Look in this zone (repeatable; default: every zone of a job in the store, and the settings' "
                  "zone; every zone of the project when that is none)")
      ->allow_extra_args(false)
      ->type_name("ZONE");
  cmd->add_flag("--all-zones", options->all_zones, "Look in every zone of the project (the TPU API's locations)");
  add_json_flag(*cmd, options->json);
  cmd->footer("Examples:\n"
              "  jobman reservations\n"
              "  jobman reservations --zone us-central2-b --json\n"
              "One row per reservation: NAME (what tpu.reservation takes), ZONE, TYPE (the TPU generation it holds),\n"
              "CHIPS, IN USE, FREE and STATE. Asks the TPU API's v2alpha1 (reservations.list), a few zones at once.\n"
              "Exit codes: 0 ok (also when there are none), 1 a cloud error (a zone's listing failed, or the\n"
              "endpoint does not serve v2alpha1), 2 usage.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_reservations(ctx, *options); }; });
}

} // namespace jobman::cli
