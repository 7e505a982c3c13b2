// `jobman validate CONFIG`: check a config the way `create` would, record nothing.
#include "commands.hpp"
#include "jobman/config/loader.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/core/data_locality.hpp"
#include "jobman/core/mock_cloud.hpp"
#include "jobman/util/system.hpp"
#include "output.hpp"

#include <spdlog/spdlog.h>

namespace jobman::cli {

namespace {

struct ValidateOptions {
  ConfigArguments config;
  bool json = false;
};

int run_validate(Context& ctx, const ValidateOptions& options) {
  if (options.json) {
    silence_logging();
  }
  const auto configs = load_configs(options.config);
  const auto offers = check_offers(ctx, configs, MockStart::when_autostart, options.config.strict_locality);
  const auto& first = configs.front();
  const auto& acc = first.tpu.accelerator;
  // What the job holds: every slice's chips and hosts.
  const int slices = first.tpu.slices;
  const int chips = acc.chips * slices;
  const int hosts = acc.hosts * slices;
  if (options.json) {
    nlohmann::ordered_json warnings = nlohmann::ordered_json::array();
    for (const auto& w : first.warnings) {
      warnings.push_back(warning_json(w));
    }
    nlohmann::ordered_json locality = nlohmann::ordered_json::array();
    for (const auto& finding : offers.locality) {
      locality.push_back({{"file", finding.where.file},
                          {"line", finding.where.line},
                          {"key", finding.where.key_path},
                          {"message", finding.message},
                          {"hint", finding.hint}});
    }
    nlohmann::ordered_json names = nlohmann::ordered_json::array();
    for (const auto& c : configs) {
      names.push_back(c.job.name);
    }
    *ctx.out << nlohmann::ordered_json{{"file", options.config.path},
                                       {"valid", true},
                                       {"jobs", names},
                                       {"accelerator", acc.name},
                                       {"slices", slices},
                                       {"chips", chips},
                                       {"hosts", hosts},
                                       {"warnings", warnings},
                                       {"offer_check",
                                        {{"source", core::to_string(offers.source)},
                                         {"note", offers.note},
                                         {"warnings", offers.warnings}}},
                                       {"locality", locality}}
                    .dump(2)
             << '\n';
    return 0;
  }
  for (const auto& w : first.warnings) {
    spdlog::warn("{}", format_warning(w));
  }
  if (offers.source == core::OfferSource::built_in) {
    spdlog::warn("{}", offers.note);
  } else {
    spdlog::debug("{}", offers.note);
  }
  *ctx.out << options.config.path << ": ok: " << configs.size() << (configs.size() == 1 ? " job" : " jobs") << ", "
           << acc.label(slices) << " (" << chips << (chips == 1 ? " chip, " : " chips, ") << hosts
           << (hosts == 1 ? " host" : " hosts") << (slices > 1 ? " in all" : "") << ") "
           << domain::to_string(first.tpu.pricing) << " in " << first.tpu.zone << '\n';
  return 0;
}

} // namespace

core::OfferCheck check_offers(Context& ctx, const std::vector<config::JobConfig>& configs, MockStart start,
                              bool strict_locality) {
  const auto settings = config::load_settings();
  core::OfferCloud cloud;
  const bool bundled_mock = settings.cloud == config::CloudKind::mock && settings.api_endpoint.empty();
  if (settings.cloud == config::CloudKind::google && settings.project.empty()) {
    cloud.unreachable = "no project is set";
  } else if (bundled_mock && !core::running_mock_cloud() && (start == MockStart::never || !settings.autostart)) {
    cloud.unreachable = "the bundled mock cloud is not running";
  } else {
    try {
      auto access = core::connect_cloud(settings, *ctx.err, core::CloudPatience::quick);
      cloud.client = access.client;
      cloud.project = access.project;
      cloud.capacity = core::mock_cloud_capacity(settings);
      cloud.tiers = core::tiers_of(cloud.capacity);
    } catch (const std::exception& e) {
      cloud.unreachable = e.what();
    }
  }
  if (cloud.project.empty()) {
    cloud.project = settings.project.empty() ? core::kMockProject : settings.project;
  }
  cloud.id = bundled_mock                                ? "bundled-mock"
             : settings.cloud == config::CloudKind::mock ? settings.api_endpoint
                                                         : cloud::resolve_tpu_endpoint(settings.api_endpoint);
  auto check = core::check_zone_offers(ctx.store(), cloud, configs, util::now_ms());
  if (!check.problems.empty()) {
    throw ConfigError(std::move(check.problems));
  }
  for (const auto& warning : check.warnings) {
    spdlog::warn("{}", warning);
  }
  const std::string storage_id = core::bucket_cache_id(settings);
  auto locality =
      core::check_data_locality(ctx.store(), cloud, storage_id, configs, config::load_prices(), util::now_ms());
  for (const auto& note : locality.notes) {
    spdlog::warn("{}", note);
  }
  if ((strict_locality || settings.strict_locality) && !locality.findings.empty()) {
    for (auto& finding : locality.findings) {
      finding.hint += std::string(finding.hint.empty() ? "" : "; ") + "refused by " +
                      (strict_locality ? "--strict-locality" : "the strict_locality setting");
    }
    throw ConfigError(std::move(locality.findings));
  }
  for (const auto& finding : locality.findings) {
    spdlog::warn("{}", finding.format());
  }
  check.locality = std::move(locality.findings);
  return check;
}

void add_locality_flag(CLI::App& command, ConfigArguments& arguments) {
  command.add_flag("--strict-locality", arguments.strict_locality,
                   "Refuse (exit 2) a config whose bucket is outside its slice's region");
}

void add_config_arguments(CLI::App& command, ConfigArguments& arguments) {
  command.add_option("CONFIG", arguments.path, "Job config (YAML, the Python jobman's layout)")
      ->required()
      ->check(CLI::ExistingFile);
  command.add_option("--set", arguments.set_overrides, "Override a config value before validation: key.path=value")
      ->allow_extra_args(false)
      ->type_name("KEY=VALUE");
  command
      .add_option("--sweep", arguments.sweeps, "One job per value (cartesian product across --sweep): key.path=v1,v2")
      ->allow_extra_args(false)
      ->type_name("KEY=V1,V2");
}

std::vector<config::JobConfig> load_configs(const ConfigArguments& arguments) {
  config::LoadOptions load;
  load.set_overrides = arguments.set_overrides;
  load.sweep_args = arguments.sweeps;
  load.default_zone = config::load_settings().zone;
  return config::load_job_configs(arguments.path, load);
}

void add_validate_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<ValidateOptions>();
  auto* cmd = app.add_subcommand("validate", "Check a config file without recording anything");
  add_config_arguments(*cmd, options->config);
  add_locality_flag(*cmd, options->config);
  add_json_flag(*cmd, options->json);
  cmd->footer("Examples:\n"
              "  jobman validate train.yaml\n"
              "  jobman validate train.yaml --set tpu.accelerator=v4-32 && echo ok\n"
              "Exit code 2 and one line per problem (file:line:column: key: message) when the config is bad.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_validate(ctx, *options); }; });
}

} // namespace jobman::cli
