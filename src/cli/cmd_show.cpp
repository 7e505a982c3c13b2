// `jobman show ID`: one job in detail, its attempts and events, or its config snapshot.
#include "commands.hpp"
#include "jobman/config/accelerator.hpp"
#include "jobman/core/bucket_transfers.hpp"
#include "jobman/core/daemon.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/reporting/accounting.hpp"
#include "jobman/reporting/transfers.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/bad_hardware.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/store/queue.hpp"
#include "jobman/store/rivals.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "output.hpp"
#include "waiting.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

namespace jobman::cli {

namespace {

constexpr std::size_t kRecentEvents = 8;

// "v4-16 (8 chips, 2 hosts, ...)"; for a job on several slices (its record counts every slice's hosts), "v4-16x2
// (16 chips, 4 hosts, ... in all)".
std::string accelerator_detail(const std::string& name, int job_hosts) {
  const auto acc = config::find_accelerator(name);
  if (!acc) {
    return name;
  }
  const int slices = acc->slices_in(job_hosts);
  const std::string label = acc->label(slices);
  const int chips = acc->chips * slices;
  const int hosts = acc->hosts * slices;
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s (%d %s, %d %s, %.0f TFLOP/s bf16 peak, %.0f GiB HBM%s)", label.c_str(), chips,
                chips == 1 ? "chip" : "chips", hosts, hosts == 1 ? "host" : "hosts", acc->peak_bf16_tflops() * slices,
                acc->hbm_gib() * slices, slices > 1 ? " in all" : "");
  return buf;
}

std::string when(std::int64_t ms, std::int64_t now) {
  return util::format_local(ms) + " (" + util::format_duration((now - ms) / 1000) + " ago)";
}

std::string event_line(const domain::EventRecord& e) {
  std::string line = util::format_local(e.ts_ms) + "  " + e.kind;
  if (e.from || e.to) {
    line += "  " + (e.from ? std::string(domain::to_string(*e.from)) : std::string("-")) + " -> " +
            (e.to ? std::string(domain::to_string(*e.to)) : std::string("-"));
  }
  if (!e.message.empty()) {
    line += "  " + printable(e.message);
  }
  return line;
}

// The timeline with the time spent in each phase: each phase lasts until the next phase change.
void print_timeline(std::ostream& out, const domain::JobRecord& job, const std::vector<domain::EventRecord>& events,
                    std::int64_t now) {
  std::optional<std::int64_t> phase_start;
  std::optional<domain::Phase> phase;
  for (const auto& e : events) {
    if (e.to && phase && phase_start) {
      out << "    (" << domain::to_string(*phase) << " for " << util::format_duration((e.ts_ms - *phase_start) / 1000)
          << ")\n";
    }
    out << "  " << event_line(e) << '\n';
    if (e.to) {
      phase = e.to;
      phase_start = e.ts_ms;
    } else if (e.kind == "created" && !phase) {
      phase = domain::Phase::pending;
      phase_start = e.ts_ms;
    }
  }
  if (phase && phase_start) {
    out << "    (" << domain::to_string(*phase) << (domain::is_terminal(job.phase) ? " since " : " for ")
        << util::format_duration((now - *phase_start) / 1000) << (domain::is_terminal(job.phase) ? " ago" : " so far")
        << ")\n";
  }
}

// The price table for costs; a user's table that cannot be read is reported, and the built-in one used.
config::PriceTable show_prices(Context& ctx) {
  try {
    return config::load_prices();
  } catch (const Error& e) {
    *ctx.err << "warning: " << e.what() << "; costs use the built-in prices\n";
    return config::builtin_prices();
  }
}

// Who a view is for: people read the names of the records it refers to, programs their ids.
enum class Audience { people, programs };

// Everything `show` prints of one record, read before anything is printed.
struct ShowView {
  domain::JobRecord job;
  std::vector<domain::AttemptRecord> attempts;
  std::vector<domain::EventRecord> events;
  std::optional<domain::Lease> lease;
  std::vector<domain::BadHardwareRecord> findings;
  std::vector<domain::RivalRecord> rivals;
  // What each attempt read from its bucket (by attempt), and what crossing regions cost.
  std::vector<std::pair<int, reporting::TransferGroup>> transfers;
  std::int64_t now_ms = 0;
  std::int64_t lease_now_ms = 0; // The store's clock: leases are in its time (a lab server's clock).
  bool driver_dead = false;      // The lease's supervisor was a process of this machine, and it is gone.
  std::optional<reporting::ProgressView> progress;
  core::JobAccount account;
  config::PriceTable prices;
  // For people only: the worker holding a task (when it is still in the store), the task a worker holds.
  std::optional<domain::JobRecord> worker;
  std::optional<domain::JobRecord> held_task;
};

// Reads record `id` and all `show` prints of it, with the price table (a warning on stderr when the user's cannot be
// read).
ShowView gather_show(Context& ctx, std::int64_t id, Audience audience) {
  const auto& store = ctx.store();
  ShowView view;
  view.job = store.jobs().get(id);
  view.attempts = store.attempts().of(id);
  view.events = store.events().of(id);
  view.lease = store.leases().of(id);
  view.findings = store.bad_hardware().of(id);
  view.rivals = store.rivals().of(id);
  view.now_ms = util::now_ms();
  view.lease_now_ms = store.clock_ms();
  // A supervisor of this machine whose process is gone is dead now, whatever its lease says.
  view.driver_dead = view.lease && core::lease_owner_dead_here(view.lease->owner);
  view.progress = reporting::progress_view(view.job, view.attempts);
  view.account = reporting::account_of(store, view.job, view.attempts, view.now_ms);
  view.prices = show_prices(ctx);
  const auto places = store.zone_catalogs().buckets();
  for (const auto& t : store.attempts().transfers(id)) {
    auto groups = reporting::group_transfers({t}, places, view.prices.transfer);
    view.transfers.emplace_back(t.attempt, std::move(groups.front()));
  }
  if (audience == Audience::people) {
    if (view.job.kind == domain::JobKind::task && view.job.worker_id) {
      view.worker = store.jobs().find(*view.job.worker_id);
    }
    if (view.job.kind == domain::JobKind::worker) {
      if (const auto held = store.queue().task_of_worker(id)) {
        view.held_task = store.jobs().get(*held);
      }
    }
  }
  return view;
}

// The record's fields, one a line, from its status to its config.
void print_fields(std::ostream& out, const ShowView& view, bool color) {
  const auto& job = view.job;
  const auto status = status_text(job);
  const auto color_code = phase_color(job.phase);
  const bool task = job.kind == domain::JobKind::task;
  out << (task                                  ? "Task "
          : job.kind == domain::JobKind::worker ? "Worker "
                                                : "Job ")
      << domain::format_job_id(job.id) << "  " << printable(job.name) << '\n';
  const auto field = [&](std::string_view label, const std::string& value) {
    std::string padded(label);
    padded.resize(14, ' ');
    out << "  " << padded << value << '\n';
  };
  field("Status", (color && !color_code.empty() ? std::string(color_code) + status + "\x1b[0m" : status) + " since " +
                      when(job.phase_since_ms, view.now_ms));
  if (!job.phase_reason.empty()) {
    field("Reason", printable(job.phase_reason));
  }
  field("Desired", std::string(domain::to_string(job.desired)));
  // Who drives it, from the lease: a live one is renewed every few seconds by its supervisor.
  const auto& lease = view.lease;
  const bool queued = job.kind == domain::JobKind::task && job.phase == domain::Phase::pending;
  if (queued) {
    field("Driven by", "nobody until a matching worker takes it from the queue");
  } else if (lease && view.driver_dead && (!domain::is_terminal(job.phase) || job.cleanup_pending)) {
    field("Driven by", "nobody: supervisor " + printable(lease->owner) +
                           " is dead (its process is gone; last renewed " +
                           when(lease->heartbeat_ms, view.lease_now_ms) +
                           "); list, show, logs or wait start another, or run 'jobman daemon'");
  } else if (lease && lease->expires_ms > view.lease_now_ms) {
    field("Driven by",
          "supervisor " + printable(lease->owner) + " (renewed " + when(lease->heartbeat_ms, view.lease_now_ms) + ")");
  } else if (!domain::is_terminal(job.phase) || job.cleanup_pending) {
    field("Driven by", "no supervisor yet (one starts with create, resume or wait, or run 'jobman daemon')");
  }
  field("User", printable(job.user));
  field("Accelerator", accelerator_detail(job.accelerator, job.hosts));
  if (task) {
    // What it asks of a worker, and the worker holding it now.
    field("Zone", (job.zone.empty() ? std::string("any") : job.zone) + " (" +
                      (job.pricing ? domain::to_string(*job.pricing) : std::string("any pricing")) + ")");
    field("Priority", std::to_string(job.priority));
    field("Retries", std::to_string(job.failures) + "/" + std::to_string(job.max_failures));
    if (job.worker_id) {
      field("Worker", domain::format_job_id(*job.worker_id) + (view.worker ? "  " + printable(view.worker->name) : ""));
    }
  } else {
    field("Zone", job.zone + " (" + (job.pricing ? domain::to_string(*job.pricing) : std::string()) + ")");
    field("TPU name", printable(job.tpu_name));
  }
  if (job.kind == domain::JobKind::worker) {
    field("Task",
          view.held_task ? domain::format_job_id(view.held_task->id) + "  " + printable(view.held_task->name) : "-");
    field("Slice", job.slice_state.empty() ? "-" : printable(job.slice_state) + "  (the last listing)");
  }
  field("Attempt", std::to_string(job.attempt) + "  (preemptions " + std::to_string(job.preemptions) + ", failures " +
                       std::to_string(job.failures) + ", bad hardware " + std::to_string(job.bad_hardware) + ")");
  if (view.progress) {
    field("Progress", reporting::progress_line(*view.progress));
  }
  field("Host0 IP", job.host0_ip.empty() ? "-" : printable(job.host0_ip)); // The API's answer.
  field("Exit code", job.exit_code ? std::to_string(*job.exit_code) : "-");
  field("Created", when(job.created_ms, view.now_ms));
  if (job.finished_ms) {
    field("Finished", when(*job.finished_ms, view.now_ms));
  }
  if (!job.sweep_label.empty()) {
    field("Sweep", printable(job.sweep_label));
  }
  field("Config", (job.config_path.empty() ? std::string("-") : printable(job.config_path)) +
                      "  (snapshot: jobman show " + domain::format_job_id(job.id) + " --config)");
}

void print_attempts(std::ostream& out, const ShowView& view, bool color) {
  const auto& attempts = view.attempts;
  if (attempts.empty()) {
    return;
  }
  const bool task = view.job.kind == domain::JobKind::task;
  out << "\nAttempts\n";
  // A job in tpu-vm mode holds nodes without queued resources: the column names what its attempts hold.
  const bool nodes = std::any_of(attempts.begin(), attempts.end(), [](const auto& a) { return a.node_only(); });
  std::vector<std::string> header = {"  #", nodes ? "NODE" : "QUEUED RESOURCE", "ZONE", "STARTED", "ENDED", "OUTCOME",
                                     "EXIT"};
  if (task) {
    header.emplace_back("WORKER");
  }
  Table table(header);
  for (const auto& a : attempts) {
    std::vector<std::string> row = {
        "  " + std::to_string(a.number), printable(a.slice_name()), printable(a.zone), util::format_local(a.started_ms),
        a.ended_ms ? util::format_local(*a.ended_ms) : "-",
        // "requesting": the name is recorded, the API has not accepted the request yet.
        a.outcome != domain::AttemptOutcome::none ? std::string(domain::to_string(a.outcome))
        : a.create_pending && !a.ended_ms         ? std::string("requesting")
                                                  : std::string("-"),
        a.exit_code ? std::to_string(*a.exit_code) : "-"};
    if (task) {
      row.push_back(a.worker_id ? domain::format_job_id(*a.worker_id) : "-");
    }
    table.add_row(std::move(row));
  }
  table.print(out, color);
}

// What each attempt read through its gcsfuse mount, as the workers' gcsfuse counted it when the attempt ended.
void print_transfers(std::ostream& out, const ShowView& view) {
  if (view.transfers.empty()) {
    return;
  }
  out << "\nData read (gcsfuse)\n";
  for (const auto& [attempt, g] : view.transfers) {
    out << "  attempt " << attempt << ": " << core::describe_bytes(g.read_bytes) << " from gs://" << printable(g.bucket)
        << (g.place ? " (" + printable(core::describe_place(*g.place)) + ", " +
                          std::string(core::to_string(g.nearness)) + ")"
                    : std::string())
        << " in " << printable(g.zone);
    if (g.cost && *g.cost > 0) {
      out << ", ~" << reporting::money(*g.cost, view.prices) << " at " << reporting::money(*g.per_gib, view.prices)
          << "/GiB";
    } else if (g.place && !g.cost) {
      out << ", no price for the crossing";
    }
    out << '\n';
  }
}

// How a rival stands in the race, for `show`.
std::string_view rival_state(domain::RivalOutcome outcome) {
  switch (outcome) {
  case domain::RivalOutcome::racing: return "racing";
  case domain::RivalOutcome::outrun: return "outrun by the attempt's slice";
  case domain::RivalOutcome::lost: return "failed before it came up";
  case domain::RivalOutcome::abandoned: return "abandoned when the attempt ended";
  case domain::RivalOutcome::unknown: break;
  }
  return "out of the race";
}

// tpu.strategy first-ready: the requests each attempt raced alongside the one it kept.
void print_rivals(std::ostream& out, const std::vector<domain::RivalRecord>& rivals) {
  if (rivals.empty()) {
    return;
  }
  out << "\nAlso requested (first-ready)\n";
  for (const auto& r : rivals) {
    out << "  attempt " << r.attempt << ": " << printable(r.name) << " in " << printable(r.zone) << " ("
        << printable(r.accelerator) << " " << domain::to_string(r.pricing) << "), " << rival_state(r.outcome)
        << (r.released_ms ? ", deleted " + util::format_local(*r.released_ms) : std::string()) << '\n';
  }
}

// What was seen, where: the machine is remembered, and a new slice on it is rejected before setup.
void print_findings(std::ostream& out, const std::vector<domain::BadHardwareRecord>& findings) {
  if (findings.empty()) {
    return;
  }
  out << "\nBad hardware\n";
  for (const auto& f : findings) {
    out << "  " << util::format_local(f.ts_ms) << "  attempt " << f.attempt << ", "
        << (f.worker >= 0 ? "worker " + std::to_string(f.worker) + " of " : std::string()) << printable(f.node)
        << " in " << printable(f.zone)
        << (f.physical_host.empty() ? std::string() : " (machine " + printable(f.physical_host) + ")") << ", from its "
        << printable(f.signal) << ": " << printable(f.detail) << '\n';
  }
}

// The whole timeline with `all_events`, the most recent events otherwise.
void print_events(std::ostream& out, const ShowView& view, bool all_events) {
  const auto& events = view.events;
  if (all_events) {
    out << "\nEvents\n";
    print_timeline(out, view.job, events, view.now_ms);
  } else if (!events.empty()) {
    const std::size_t skip = events.size() > kRecentEvents ? events.size() - kRecentEvents : 0;
    out << "\nRecent events" << (skip > 0 ? " (" + std::to_string(skip) + " earlier; --events shows all)" : "") << '\n';
    for (std::size_t i = skip; i < events.size(); ++i) {
      out << "  " << event_line(events[i]) << '\n';
    }
  }
}

// `show` for people.
void print_show(std::ostream& out, const ShowView& view, bool color, bool all_events) {
  print_fields(out, view, color);
  print_attempts(out, view, color);
  print_rivals(out, view.rivals);
  print_findings(out, view.findings);
  print_transfers(out, view);
  reporting::print_account(out, view.account, view.prices);
  print_events(out, view, all_events);
}

// Who drives the record, from its lease; null without one.
nlohmann::ordered_json driver_json(const ShowView& view) {
  if (!view.lease) {
    return nullptr;
  }
  nlohmann::ordered_json driver;
  driver["owner"] = view.lease->owner;
  driver["heartbeat_at"] = util::format_utc(view.lease->heartbeat_ms);
  driver["expires_at"] = util::format_utc(view.lease->expires_ms);
  driver["live"] = view.lease->expires_ms > view.lease_now_ms && !view.driver_dead;
  driver["dead"] = view.driver_dead;
  return driver;
}

// `show --json` (docs/JSON.md): the job object, then what `show` adds to it.
nlohmann::ordered_json show_json(const ShowView& view) {
  nlohmann::ordered_json j = job_json(view.job);
  j["progress"] = reporting::progress_json(view.progress);
  j["goodput"] = reporting::account_json(view.account, view.prices, true);
  j["cleanup_pending"] = view.job.cleanup_pending;
  j["driver"] = driver_json(view);
  j["attempts"] = nlohmann::ordered_json::array();
  for (const auto& a : view.attempts) {
    auto attempt = attempt_json(a);
    attempt["rivals"] = nlohmann::ordered_json::array();
    for (const auto& r : view.rivals) {
      if (r.attempt == a.number) {
        attempt["rivals"].push_back(rival_json(r));
      }
    }
    std::vector<reporting::TransferGroup> read;
    for (const auto& [number, g] : view.transfers) {
      if (number == a.number) {
        read.push_back(g);
      }
    }
    attempt["transfers"] = reporting::transfers_json(read);
    j["attempts"].push_back(std::move(attempt));
  }
  j["bad_hardware_findings"] = nlohmann::ordered_json::array();
  for (const auto& f : view.findings) {
    j["bad_hardware_findings"].push_back(bad_hardware_json(f));
  }
  j["events"] = nlohmann::ordered_json::array();
  for (const auto& e : view.events) {
    j["events"].push_back(event_json(e));
  }
  return j;
}

// `show --config`: the snapshot as recorded, ending with a newline.
void print_config(std::ostream& out, const domain::JobRecord& job) {
  out << job.config_yaml;
  if (!job.config_yaml.empty() && job.config_yaml.back() != '\n') {
    out << '\n';
  }
}

// `show --config --json`.
nlohmann::ordered_json config_json(const domain::JobRecord& job) {
  nlohmann::ordered_json j;
  j["id"] = job.id;
  j["config_path"] = job.config_path;
  j["config_yaml"] = job.config_yaml;
  return j;
}

} // namespace

int run_show(Context& ctx, const ShowOptions& options) {
  if (options.json) {
    silence_logging();
  }
  const std::int64_t id = parse_job_id_argument(options.id);
  const auto& store = ctx.store();
  keep_jobs_driven(ctx);
  auto& out = *ctx.out;
  if (options.config) {
    const auto job = store.jobs().get(id, true);
    if (options.json) {
      out << config_json(job).dump(2) << '\n';
    } else {
      print_config(out, job);
    }
    return 0;
  }
  const auto view = gather_show(ctx, id, options.json ? Audience::programs : Audience::people);
  if (options.json) {
    out << show_json(view).dump(2) << '\n';
  } else {
    print_show(out, view, ctx.color, options.events);
  }
  return 0;
}

void add_show_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<ShowOptions>();
  auto* cmd = app.add_subcommand("show", "Show one job: status, attempts, recent events");
  cmd->add_option("ID", options->id, "Job id (000042 or 42)")->required();
  cmd->add_flag("-e,--events", options->events, "Print the whole event timeline with the time spent in each phase");
  cmd->add_flag("-c,--config", options->config, "Print the config snapshot recorded at create time");
  add_json_flag(*cmd, options->json);
  cmd->footer("Examples:\n"
              "  jobman show 42\n"
              "  jobman show 000042 --events\n"
              "  jobman show 42 --config > rerun.yaml\n"
              "  jobman show 42 --json | jq .status\n"
              "Exit code 3 when there is no such job. Reads the local store only.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_show(ctx, *options); }; });
}

} // namespace jobman::cli
