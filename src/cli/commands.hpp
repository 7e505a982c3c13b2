// Registration of each subcommand on the CLI11 app; one source file per command.
#pragma once

#include "context.hpp"
#include "jobman/config/job_config.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/pool.hpp"
#include "jobman/core/zone_offers.hpp"

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace jobman::cli {

// Builds the whole command-line definition: global flags and every subcommand.
void build_app(CLI::App& app, Context& ctx);

void add_create_command(CLI::App& app, Context& ctx);     // `create CONFIG`
void add_validate_command(CLI::App& app, Context& ctx);   // `validate CONFIG`
void add_list_command(CLI::App& app, Context& ctx);       // `list`
void add_show_command(CLI::App& app, Context& ctx);       // `show ID`
void add_resume_command(CLI::App& app, Context& ctx);     // `resume ID...`
void add_cancel_command(CLI::App& app, Context& ctx);     // `cancel ID...`
void add_delete_command(CLI::App& app, Context& ctx);     // `delete ID...`
void add_clean_command(CLI::App& app, Context& ctx);      // `clean ID...`
void add_logs_command(CLI::App& app, Context& ctx);       // `logs ID`
void add_ssh_command(CLI::App& app, Context& ctx);        // `ssh ID [-- COMMAND...]`
void add_settings_command(CLI::App& app, Context& ctx);   // `settings`
void add_completion_command(CLI::App& app, Context& ctx); // `completion SHELL`
void add_daemon_command(CLI::App& app, Context& ctx);     // `daemon`
void add_wait_command(CLI::App& app, Context& ctx);       // `wait ID...`
void add_sync_command(CLI::App& app, Context& ctx);       // `sync`
void add_worker_command(CLI::App& app, Context& ctx);     // `worker start|stop|resume|reboot|delete|ssh|logs|show|sync`
void add_task_command(CLI::App& app, Context& ctx);       // `task submit|delete|pause|requeue|show`
void add_status_command(CLI::App& app, Context& ctx);     // `status`
void add_buckets_command(CLI::App& app, Context& ctx);    // `buckets`
void add_availability_command(CLI::App& app, Context& ctx); // `availability`, `analytics availability`
void add_report_command(CLI::App& app, Context& ctx);       // `report`, `analytics cost`
void add_ui_command(CLI::App& app, Context& ctx);           // `ui`
void add_store_command(CLI::App& app, Context& ctx);        // `store migrate`
void add_reservations_command(CLI::App& app, Context& ctx); // `reservations`

// `show`: one record in detail.
struct ShowOptions {
  std::string id;
  bool events = false;
  bool config = false;
  bool json = false;
};
int run_show(Context& ctx, const ShowOptions& options);

// `logs`: a record's output (or setup logs).
struct LogsOptions {
  std::string id;
  bool follow = false;
  std::string worker;         // An index, "all", or empty for the default.
  std::optional<int> attempt; // Default: the job's current attempt.
  bool setup = false;
  bool raw = false;    // Control characters pass to a terminal too.
  bool stacks = false; // What the workers' processes were doing when the attempt stalled, instead of the output.
};
int run_logs(Context& ctx, const LogsOptions& options);

// `ssh`: a shell or a command on one host of a record's slice.
struct SshOptions {
  std::string id;
  int worker = 0;                   // The global index (slice 0's hosts first); within the slice with --slice.
  std::optional<int> slice;         // --slice: one slice of a multislice job.
  std::vector<std::string> command; // Empty: an interactive shell.
};
int run_ssh(Context& ctx, const SshOptions& options);

// Adds the `--json` flag every data-printing command has; it also silences logging.
CLI::Option* add_json_flag(CLI::App& command, bool& json);

// Turns logging off for machine-readable output.
void silence_logging();

// The check of a --pricing flag: any spelling domain::parse_pricing accepts; its help and its refusal name the
// spellings jobman-lite's flags take ("{spot,preemptible,standard,ondemand}"), as CLI::IsMember would.
CLI::Validator pricing_check();

// The config arguments create and validate share: the file, --set and --sweep.
struct ConfigArguments {
  std::string path;
  std::vector<std::string> set_overrides;
  std::vector<std::string> sweeps;
  bool strict_locality = false; // --strict-locality (validate, create).
};

// Adds CONFIG, --set and --sweep to `command`.
void add_config_arguments(CLI::App& command, ConfigArguments& arguments);
// Adds --strict-locality to `command`.
void add_locality_flag(CLI::App& command, ConfigArguments& arguments);

// Loads the config as `create` would: overrides, sweeps, the settings' default zone.
std::vector<config::JobConfig> load_configs(const ConfigArguments& arguments);

// Whether checking configs against the cloud may start the bundled mock cloud.
enum class MockStart {
  never,          // validate and --dry-run: a check that starts nothing (a stopped mock counts as unreachable).
  when_autostart, // create: it starts the mock anyway, unless the settings turn autostart off.
};

// Checks the configs' accelerators, runtime versions, tiers and reservations against what their zones offer
// (core::check_zone_offers), asking the configured cloud with little patience. Throws ConfigError (exit 2) naming the
// file, line and key of each problem; otherwise logs a warning for what could not be checked and returns what was
// checked against what. Then compares each config's bucket with its slice's region (core::check_data_locality): a
// warning at gcsfuse.bucket_name for a bucket elsewhere, or, with `strict_locality` (or the strict_locality setting),
// a ConfigError.
core::OfferCheck check_offers(Context& ctx, const std::vector<config::JobConfig>& configs, MockStart start,
                              bool strict_locality = false);

// Checks the --zone values of a command that lists the cloud zone by zone (sync, reservations): each a zone's name,
// and not given with --all-zones. Throws UsageError otherwise.
void check_zone_arguments(const std::vector<std::string>& zones, bool all_zones);

// The zones such a command looks in: `given` (--zone); else, unless `all_zones`, the zones in use (core::zones_in_use:
// every zone of a job or attempt in the store, and the settings' zone); else, or when that is none, every zone where
// the project can have TPUs (locations.list), said on ctx.err unless `quiet` or `all_zones`. Sorted, each once.
// Throws Error when the project has no such zone, and the client's errors.
std::vector<std::string> zones_to_look_in(Context& ctx, const core::CloudAccess& access,
                                          const std::vector<std::string>& given, bool all_zones, bool quiet);

// Calls `list(i)` for each index of `zones`, a few zones at once on threads of their own; once every call has
// returned, throws Error with the message of the first zone's (in `zones`' order) that threw.
void list_each_zone(const std::vector<std::string>& zones, const std::function<void(std::size_t)>& list);

// The arguments resume/cancel/delete/clean share.
struct RequestCommandOptions {
  std::vector<std::string> ids;
  bool all_finished = false;
  bool json = false;
  bool no_wait = false;
};

// Adds the shared arguments of resume/cancel/delete/clean to `command`.
void add_request_arguments(CLI::App& command, RequestCommandOptions& options, bool with_all_finished);

// Runs one of resume/cancel/delete/clean over the requested ids.
int run_request_command(Context& ctx, const RequestCommandOptions& options, core::Request request);

// Carries `request` out for `ids` (already checked), waiting for the supervisor unless `options.no_wait`, and prints
// one outcome per id (or the JSON array). `ids_known`: every id names a record (a selection's), so a missing one was
// removed meanwhile. Returns the exit code.
int run_requests(Context& ctx, const std::vector<std::int64_t>& ids, const RequestCommandOptions& options,
                 core::Request request, bool ids_known);

// The references and filters of the worker and task commands: refs (a name, a `status` index or an id), or --all,
// -a, -z (and, for tasks, -p GLOB).
struct PoolSelectOptions {
  core::Selection selection;
  RequestCommandOptions request;
};

// Adds the references and filters of `kind`'s records (worker or task) to `command`, with --json, and --no-wait when
// `with_wait`.
void add_pool_selection(CLI::App& command, PoolSelectOptions& options, domain::JobKind kind, bool with_wait);

// The ids of the `kind` records `selection` picks; says so on stderr when there are none.
std::vector<std::int64_t> pool_selected_ids(Context& ctx, domain::JobKind kind, const core::Selection& selection);

// Adds `parent`'s subcommand `name`, which carries `request` out for the selected records of `kind`.
void add_pool_request(CLI::App& parent, Context& ctx, domain::JobKind kind, const std::string& name,
                      const std::string& description, core::Request request, const std::string& footer);

} // namespace jobman::cli
