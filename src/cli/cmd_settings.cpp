// `jobman settings`: the effective per-user settings and where each value came from.
#include "commands.hpp"
#include "jobman/config/settings.hpp"
#include "output.hpp"

namespace jobman::cli {

namespace {

int run_settings(Context& ctx, bool json) {
  if (json) {
    silence_logging();
  }
  const auto settings = config::load_settings();
  if (json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& s : settings.sources) {
      j[s.key] = {{"value", s.value}, {"origin", s.origin}};
    }
    *ctx.out << nlohmann::ordered_json{{"file", config::settings_path()}, {"settings", j}}.dump(2) << '\n';
    return 0;
  }
  Table table({"KEY", "VALUE", "FROM"});
  for (const auto& s : settings.sources) {
    table.add_row({s.key, s.value.empty() ? "-" : printable(s.value), s.origin});
  }
  table.print(*ctx.out, ctx.color);
  *ctx.err << "Settings file: " << config::settings_path() << '\n';
  return 0;
}

} // namespace

void add_settings_command(CLI::App& app, Context& ctx) {
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("settings", "Show the effective settings and where each value comes from");
  add_json_flag(*cmd, *json);
  cmd->footer("Settings live in ${XDG_CONFIG_HOME:-~/.config}/jobman/settings.yaml; each key can be overridden by\n"
              "a variable: JOBMAN_CLOUD (mock|google), JOBMAN_PROJECT, JOBMAN_ZONE, JOBMAN_GCLOUD,\n"
              "JOBMAN_POLL_INTERVAL, JOBMAN_API_ENDPOINT, JOBMAN_STORE (a SQLite file or postgresql://USER@HOST/DB).\n"
              "Examples:\n"
              "  jobman settings\n"
              "  JOBMAN_CLOUD=mock jobman settings --json");
  cmd->callback([&ctx, json] { ctx.action = [&ctx, json] { return run_settings(ctx, *json); }; });
}

} // namespace jobman::cli
