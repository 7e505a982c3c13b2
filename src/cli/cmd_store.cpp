// `jobman store`: the store itself. `store migrate` copies a SQLite store into a PostgreSQL one a lab shares.
#include "commands.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/core/fair_share.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/reporting/json.hpp"
#include "jobman/store/access.hpp"
#include "jobman/store/copy.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/store/shares.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "output.hpp"

#include <chrono>
#include <optional>
#include <set>
#include <thread>

namespace jobman::cli {

namespace {

struct MigrateOptions {
  std::string from;        // A SQLite file; default: the one in jobman's home.
  std::string to;          // A postgresql:// URL; default: the `store` setting.
  std::string as;          // Whose the copied jobs are on the target; default: the target's identity.
  std::string wait = "5m"; // How long to wait for finished jobs' slices to be released.
  bool json = false;
};

// Waits until no supervisor holds a lease on `source`'s records: finished jobs whose slices are still being released
// are waited for, up to `limit`, with a line on stderr every few seconds. Unfinished jobs under a live lease are an
// error that says how to stop their supervisor.
void wait_for_supervisors(Context& ctx, const store::JobStore& source, const std::string& from,
                          std::chrono::milliseconds limit, const std::string& limit_text) {
  const auto start = std::chrono::steady_clock::now();
  auto next_line = start;
  for (;;) {
    const auto leases = source.leases().live(util::now_ms());
    std::set<std::string> owners;
    std::vector<std::string> unfinished;
    for (const auto& lease : leases) {
      owners.insert(lease.owner);
      if (!domain::is_terminal(lease.phase)) {
        unfinished.push_back(domain::format_job_id(lease.job_id));
      }
    }
    const std::string drivers = util::join(std::vector<std::string>(owners.begin(), owners.end()), ", ");
    if (!unfinished.empty()) {
      std::string message = std::to_string(unfinished.size());
      message += " unfinished job(s) of ";
      message += from;
      message += " (";
      message += util::join(unfinished, ", ");
      message += ") are driven by supervisor ";
      message += drivers;
      message += ": nothing may change under the copy. Stop the supervisors with `jobman daemon stop` (run with "
                 "this store, on their machine; the workloads keep running), run `jobman store migrate` again at "
                 "once, then set `store:` to the new store: its supervisor re-attaches to the workloads";
      throw Error(message);
    }
    if (leases.empty()) {
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - start >= limit) {
      std::string message = "supervisor ";
      message += drivers;
      message += " is still releasing the slices of ";
      message += std::to_string(leases.size());
      message += " finished job(s) of ";
      message += from;
      message += " after ";
      message += limit_text;
      message += ": nothing was copied; wait for it (`jobman list` shows them '(releasing slice)') or give --wait";
      throw Error(message);
    }
    if (now >= next_line) {
      *ctx.err << "jobman: waiting for supervisor " << drivers << " to release the slices of " << leases.size()
               << " finished job(s) ("
               << util::format_duration(std::chrono::duration_cast<std::chrono::seconds>(now - start).count())
               << " of at most " << limit_text << ")\n";
      next_line = now + std::chrono::seconds(5);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

const char* describe(store::StoreCopy::Into into) {
  switch (into) {
  case store::StoreCopy::Into::empty: return "empty";
  case store::StoreCopy::Into::behind: return "an earlier copy";
  case store::StoreCopy::Into::ahead: return "a copy in use since";
  }
  return "";
}

int run_migrate(Context& ctx, const MigrateOptions& options) {
  if (options.json) {
    silence_logging();
  }
  const auto settings = config::load_settings();
  std::string to = options.to;
  if (to.empty()) {
    to = settings.store;
    if (!util::is_postgres_url(to)) {
      throw UsageError("--to: name the PostgreSQL store to copy into (postgresql://USER@HOST/DATABASE), or set "
                       "`store:` to it in " +
                       config::settings_path());
    }
  } else if (!util::is_postgres_url(to)) {
    throw UsageError("--to: '" + util::without_password(to) + "' is not a postgresql:// URL");
  } else if (util::without_password(to) != to) {
    // Another user's `ps` shows the command line: a password there is not secret.
    throw UsageError("--to: the URL holds a password, which every process list shows; put it in ~/.pgpass (or the "
                     "file PGPASSFILE names) and leave it out of the URL");
  }
  const std::string from =
      options.from.empty() ? (config::jobman_home() / "jobman.db").string() : util::expand_user(options.from).string();
  if (util::is_postgres_url(from)) {
    throw UsageError("--from: a SQLite file is copied, not '" + util::without_password(from) + "'");
  }
  std::error_code ec;
  if (!std::filesystem::exists(from, ec)) {
    throw Error("no store at " + from + " to copy");
  }
  const auto wait_seconds = util::parse_duration_seconds(options.wait);
  if (!wait_seconds || *wait_seconds < 0) {
    throw UsageError("--wait: '" + options.wait + "' is not a duration (90s, 5m, 0)");
  }
  if (!options.as.empty() && (options.as.find_first_of(" \t\n/:") != std::string::npos)) {
    throw UsageError("--as: '" + options.as + "' is not a user name");
  }
  const auto source = store::JobStore::open(from);
  wait_for_supervisors(ctx, source, from, std::chrono::seconds(*wait_seconds), options.wait);
  auto target = store::JobStore::open_postgres(to);
  const auto copy = store::copy_store(source, target, options.as);
  // The logs and local files of the copied jobs, where this home keeps the new store's.
  const auto linked = core::link_job_directories(core::jobs_root(from), core::jobs_root(to));
  const auto name = util::without_password(to);
  if (options.json) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::object();
    for (const auto& [table, count] : copy.written) {
      rows[table] = count;
    }
    *ctx.out << nlohmann::ordered_json{{"from", from},
                                       {"to", name},
                                       {"into", describe(copy.into)},
                                       {"jobs", copy.jobs},
                                       {"events", copy.events},
                                       {"written", rows},
                                       {"removed", copy.removed},
                                       {"user", copy.user},
                                       {"job_directories", linked}}
                    .dump(2)
             << '\n';
    return 0;
  }
  std::int64_t written = 0;
  for (const auto& [table, count] : copy.written) {
    written += count;
  }
  *ctx.out << "Copied " << from << " (" << copy.jobs << " jobs, " << copy.events << " events) into " << name << ", "
           << describe(copy.into) << ": " << written << " rows written";
  if (copy.removed > 0) {
    *ctx.out << ", " << copy.removed << " jobs removed since the earlier copy removed there too";
  }
  *ctx.out << ".\n";
  if (linked > 0) {
    *ctx.out << "The logs of " << linked << " job(s) are linked into " << core::jobs_root(to).string() << ".\n";
  }
  if (copy.user != source.identity()) {
    *ctx.out << "The jobs of " << source.identity() << " are recorded there as " << copy.user << "'s.\n";
  }
  if (settings.store != to) {
    *ctx.out << "To use it, set `store: " << name << "` in " << config::settings_path()
             << " (the password in ~/.pgpass).\n";
  }
  return 0;
}

// `store admins [add|remove NAME]`: who may act on every user's jobs.
int run_admins(Context& ctx, const std::string& action, const std::string& name, bool json) {
  if (json) {
    silence_logging();
  }
  auto& store = ctx.store();
  if (action == "add" || action == "remove") {
    if (name.empty()) {
      throw UsageError("store admins " + action + ": name the user (a database role on a PostgreSQL store)");
    }
    const bool changed = store.access().set_admin(name, action == "add");
    if (!json) {
      *ctx.out << name
               << (action == "add" ? (changed ? " is now an admin" : " was an admin already")
                                   : (changed ? " is no longer an admin" : " was not an admin"))
               << '\n';
    }
  } else if (!name.empty()) {
    throw UsageError("store admins: add or remove NAME, or nothing to list them");
  }
  const auto admins = store.access().admins();
  if (json) {
    *ctx.out << nlohmann::ordered_json{{"admins", admins}, {"you", store.identity()}}.dump(2) << '\n';
  } else if (action.empty()) {
    for (const auto& admin : admins) {
      *ctx.out << admin << '\n';
    }
    if (admins.empty()) {
      *ctx.err << "No admins: each user acts on their own jobs only"
               << (store.on_postgres() ? "" : " (this SQLite store is yours alone: you act on every job)") << ".\n";
    }
  }
  return 0;
}

// The chips argument of `store share` and `store cap`: a count, or "none" to remove the limit.
std::optional<int> parse_limit(const std::string& text, const std::string& command) {
  if (text == "none") {
    return std::nullopt;
  }
  const auto chips = core::parse_chips(text);
  if (!chips) {
    throw UsageError(command + ": CHIPS: '" + text + "' is not a number of chips (0 or more) or none");
  }
  return chips;
}

core::Tier tier_argument(const std::string& text, const std::string& command) {
  std::string why;
  const auto tier = core::parse_tier(text, &why);
  if (!tier) {
    throw UsageError(command + ": TIER: " + why);
  }
  return *tier;
}

// `store share TIER CHIPS [--user NAME]` and `store cap TIER CHIPS`.
int run_set_limit(Context& ctx, const std::string& command, const std::string& tier_text, const std::string& chips_text,
                  const std::string& user) {
  const auto tier = tier_argument(tier_text, "store " + command);
  const auto chips = parse_limit(chips_text, "store " + command);
  auto& store = ctx.store();
  const std::string who = command == "cap" ? std::string() : (user.empty() ? std::string("*") : user);
  const bool changed = core::set_share_limit(store, who, tier, chips);
  std::string subject;
  if (who.empty()) {
    subject = "The lab's cap on " + tier.label() + " chips";
  } else if (who == "*") {
    subject = "Every user's share of " + tier.label() + " chips";
  } else {
    subject = who + "'s share of " + tier.label() + " chips";
  }
  *ctx.out << subject << (changed ? " is now " : " was already ")
           << (chips ? std::to_string(*chips) : std::string("unlimited")) << '\n';
  return 0;
}

// `store limits`: every share and cap, with the chips held against each.
int run_limits(Context& ctx, bool json) {
  if (json) {
    silence_logging();
  }
  auto& store = ctx.store();
  const auto limits = core::read_share_limits(store);
  const core::ChipsInFlight chips(store.shares().in_flight());
  std::set<core::Tier> tiers;
  for (const auto& [tier, cap] : limits.lab_cap) {
    tiers.insert(tier);
  }
  for (const auto& [tier, share] : limits.every_user) {
    tiers.insert(tier);
  }
  for (const auto& [key, share] : limits.per_user) {
    tiers.insert(key.second);
  }
  for (const auto& [tier, held] : chips.lab) {
    tiers.insert(tier);
  }
  for (const auto& [key, held] : chips.by_user) {
    tiers.insert(key.second);
  }
  const auto limit_text = [](std::optional<int> limit) { return limit ? std::to_string(*limit) : std::string("-"); };
  Table table({"TIER", "WHO", "LIMIT", "HELD"});
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& tier : tiers) {
    std::optional<int> cap;
    if (const auto found = limits.lab_cap.find(tier); found != limits.lab_cap.end()) {
      cap = found->second;
    }
    std::optional<int> every;
    if (const auto found = limits.every_user.find(tier); found != limits.every_user.end()) {
      every = found->second;
    }
    std::set<std::string> users;
    for (const auto& [key, share] : limits.per_user) {
      if (key.second == tier) {
        users.insert(key.first);
      }
    }
    for (const auto& [key, held] : chips.by_user) {
      if (key.second == tier && held > 0) {
        users.insert(key.first);
      }
    }
    if (json) {
      nlohmann::ordered_json per_user = nlohmann::ordered_json::array();
      for (const auto& user : users) {
        per_user.push_back({{"user", user},
                            {"share", reporting::json_or_null(limits.share_of(user, tier))},
                            {"own_share", limits.per_user.contains({user, tier})},
                            {"held", chips.of(user, tier)}});
      }
      rows.push_back({{"tier", tier.key()},
                      {"lab_cap", reporting::json_or_null(cap)},
                      {"lab_held", chips.of_lab(tier)},
                      {"every_user_share", reporting::json_or_null(every)},
                      {"users", std::move(per_user)}});
      continue;
    }
    table.add_row({tier.label(), "the lab", limit_text(cap), std::to_string(chips.of_lab(tier))});
    if (every) {
      table.add_row({tier.label(), "every user", limit_text(every), ""});
    }
    for (const auto& user : users) {
      const bool own = limits.per_user.contains({user, tier});
      table.add_row({tier.label(), printable(user),
                     limit_text(limits.share_of(user, tier)) + (own || !every ? "" : " (every user's)"),
                     std::to_string(chips.of(user, tier))});
    }
  }
  if (json) {
    *ctx.out << nlohmann::ordered_json{{"tiers", std::move(rows)}}.dump(2) << '\n';
    return 0;
  }
  if (table.size() == 0) {
    *ctx.err << "No limits set and no chips held: every user's tasks take workers in turn, fewest chips first.\n";
    return 0;
  }
  table.print(*ctx.out, ctx.color);
  return 0;
}

} // namespace

void add_store_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "store", "The store itself: its admins, the lab's fair share, and copying a SQLite store into PostgreSQL");
  cmd->require_subcommand(1);
  auto migrate = std::make_shared<MigrateOptions>();
  auto* sub = cmd->add_subcommand("migrate", "Copy a SQLite store, history included, into a PostgreSQL store");
  sub->add_option("--from", migrate->from, "The SQLite store to copy (default: jobman.db in jobman's home)");
  sub->add_option("--to", migrate->to, "The PostgreSQL store (default: the `store` setting); no password in it");
  sub->add_option("--as", migrate->as,
                  "Record your jobs there as this user (default: the role you connect as, so they stay yours)");
  sub->add_option("--wait", migrate->wait,
                  "How long to wait for a supervisor to release finished jobs' slices (default 5m)");
  add_json_flag(*sub, migrate->json);
  sub->footer("The copy is one transaction: all of it or nothing. Copying again brings what changed since; a\n"
              "store with a history of its own is refused. It waits (--wait) while a supervisor releases the\n"
              "slices of finished jobs; unfinished jobs under a live supervisor are refused: `jobman daemon stop`\n"
              "stops their supervisors first (the workloads keep running). Your jobs are recorded as the role you\n"
              "connect as (--as to choose), so that they stay yours on the lab's store.\n"
              "Examples:\n"
              "  jobman store migrate --to postgresql://alice@db.lab.org/jobman\n"
              "  JOBMAN_STORE=postgresql://alice@db.lab.org/jobman jobman store migrate --json");
  sub->callback([&ctx, migrate] { ctx.action = [&ctx, migrate] { return run_migrate(ctx, *migrate); }; });

  struct AdminsOptions {
    std::string action;
    std::string name;
    bool json = false;
  };
  auto admins = std::make_shared<AdminsOptions>();
  auto* adm = cmd->add_subcommand("admins", "List the store's admins, or add or remove one");
  adm->add_option("ACTION", admins->action, "add or remove (nothing: list them)")
      ->check(CLI::IsMember({"add", "remove"}));
  adm->add_option("NAME", admins->name, "The user (on PostgreSQL, the database role they log in as)");
  add_json_flag(*adm, admins->json);
  adm->footer("Admins may cancel, delete, clean and resume every user's jobs and tasks; others only their own.\n"
              "On PostgreSQL the store's owner (the role owning its schema) or an admin changes the list.\n"
              "Examples:\n"
              "  jobman store admins\n"
              "  jobman store admins add alice\n"
              "  jobman store admins remove bob");
  adm->callback([&ctx, admins] {
    ctx.action = [&ctx, admins] { return run_admins(ctx, admins->action, admins->name, admins->json); };
  });

  auto limits_json = std::make_shared<bool>(false);
  auto* lim = cmd->add_subcommand("limits", "Show the fair share: each tier's cap and shares, and the chips held");
  add_json_flag(*lim, *limits_json);
  lim->footer("HELD counts the chips of slices held or asked for now: a user's jobs' own and the workers' their\n"
              "tasks run on; the lab's, every job's and worker's slice.\n"
              "Examples:\n"
              "  jobman store limits\n"
              "  jobman store limits --json");
  lim->callback([&ctx, limits_json] { ctx.action = [&ctx, limits_json] { return run_limits(ctx, *limits_json); }; });

  struct LimitOptions {
    std::string tier;
    std::string chips;
    std::string user;
  };
  auto share = std::make_shared<LimitOptions>();
  auto* shr = cmd->add_subcommand("share", "Set a user's share of a tier's chips (every user's without --user)");
  shr->add_option("TIER", share->tier, "GENERATION:PRICING, for example v4:spot or v5e:ondemand")->required();
  shr->add_option("CHIPS", share->chips, "Chips in flight the user may hold, or none to remove the share")->required();
  shr->add_option("--user", share->user, "The user (on PostgreSQL, their database role); default: every user");
  shr->footer("A user's tasks beyond their share wait in the queue and their jobs wait before asking for a slice;\n"
              "`jobman status` and `jobman show` say why. The store's owner or an admin sets shares.\n"
              "Examples:\n"
              "  jobman store share v4:spot 64\n"
              "  jobman store share v4:spot 128 --user alice\n"
              "  jobman store share v4:spot none --user alice");
  shr->callback([&ctx, share] {
    ctx.action = [&ctx, share] { return run_set_limit(ctx, "share", share->tier, share->chips, share->user); };
  });
  auto cap = std::make_shared<LimitOptions>();
  auto* cp = cmd->add_subcommand("cap", "Set the lab's cap on a tier's chips, all users together");
  cp->add_option("TIER", cap->tier, "GENERATION:PRICING, for example v4:spot or v5e:ondemand")->required();
  cp->add_option("CHIPS", cap->chips, "Chips the lab's jobs and workers may hold, or none to remove the cap")
      ->required();
  cp->footer("Jobs and workers beyond the cap wait before asking for a slice. The store's owner or an admin sets it.\n"
             "Examples:\n"
             "  jobman store cap v4:spot 512\n"
             "  jobman store cap v5e:ondemand none");
  cp->callback(
      [&ctx, cap] { ctx.action = [&ctx, cap] { return run_set_limit(ctx, "cap", cap->tier, cap->chips, ""); }; });
}

} // namespace jobman::cli
