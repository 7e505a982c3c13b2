// `jobman store`: the store itself. `store migrate` copies a SQLite store into a PostgreSQL one a lab shares.
#include "commands.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "output.hpp"

namespace jobman::cli {

namespace {

struct MigrateOptions {
  std::string from; // A SQLite file; default: the one in jobman's home.
  std::string to;   // A postgresql:// URL; default: the `store` setting.
  bool json = false;
};

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
      options.from.empty() ? (util::jobman_home() / "jobman.db").string() : util::expand_user(options.from).string();
  if (util::is_postgres_url(from)) {
    throw UsageError("--from: a SQLite file is copied, not '" + util::without_password(from) + "'");
  }
  std::error_code ec;
  if (!std::filesystem::exists(from, ec)) {
    throw Error("no store at " + from + " to copy");
  }
  const auto source = store::JobStore::open(from);
  auto target = store::JobStore::open_postgres(to);
  const auto copy = source.copy_into(target);
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
                                       {"removed", copy.removed}}
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
    const bool changed = store.set_admin(name, action == "add");
    if (!json) {
      *ctx.out << name
               << (action == "add" ? (changed ? " is now an admin" : " was an admin already")
                                   : (changed ? " is no longer an admin" : " was not an admin"))
               << '\n';
    }
  } else if (!name.empty()) {
    throw UsageError("store admins: add or remove NAME, or nothing to list them");
  }
  const auto admins = store.admins();
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

} // namespace

void add_store_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("store", "The store itself: its admins, and copying a SQLite store into PostgreSQL");
  cmd->require_subcommand(1);
  auto migrate = std::make_shared<MigrateOptions>();
  auto* sub = cmd->add_subcommand("migrate", "Copy a SQLite store, history included, into a PostgreSQL store");
  sub->add_option("--from", migrate->from, "The SQLite store to copy (default: jobman.db in jobman's home)");
  sub->add_option("--to", migrate->to, "The PostgreSQL store (default: the `store` setting); no password in it");
  add_json_flag(*sub, migrate->json);
  sub->footer("The copy is one transaction: all of it or nothing. Copying again brings what changed since; a\n"
              "store with a history of its own is refused. Stop the supervisor of the SQLite store first.\n"
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
}

} // namespace jobman::cli
