// `jobman sync`: the queued resources and nodes with jobman's labels that no job in the store holds, listed and, with
// --delete, deleted (core/orphans.hpp).
#include "commands.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/orphans.hpp"
#include "jobman/core/plan.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/reporting/json.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "output.hpp"

#include <algorithm>
#include <chrono>
#include <spdlog/spdlog.h>
#include <thread>

namespace jobman::cli {

namespace {

// How long --delete waits for each deletion's operation.
constexpr std::chrono::minutes kDeleteTimeout{10};

struct SyncOptions {
  std::vector<std::string> zones;
  bool all_zones = false;
  bool all_owners = false;
  std::string older_than;
  bool remove = false;
  bool json = false;
};

// What became of one orphan under --delete.
struct Deletion {
  bool deleted = false;
  std::string error; // Empty unless the delete failed.
};

// Rewrites a progress line on stderr in place.
class ProgressLine {
public:
  explicit ProgressLine(std::ostream& err) : err_(err), shown_(util::is_terminal(2)) {}
  ~ProgressLine() { clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void show(const std::string& line) {
    if (!shown_) {
      return;
    }
    err_ << '\r' << line << std::string(width_ > line.size() ? width_ - line.size() : 0, ' ') << std::flush;
    width_ = line.size();
  }
  void clear() {
    if (shown_ && width_ > 0) {
      err_ << '\r' << std::string(width_, ' ') << '\r' << std::flush;
      width_ = 0;
    }
  }

private:
  std::ostream& err_;
  bool shown_;
  std::size_t width_ = 0;
};

// Deletes every orphan (a queued resource with force), then waits for the operations; a failure is recorded on its
// orphan and the others go on.
std::vector<Deletion> delete_orphans(const core::CloudAccess& access, const std::vector<core::Orphan>& orphans,
                                     std::ostream& err) {
  std::vector<Deletion> results(orphans.size());
  std::vector<std::optional<cloud::Operation>> operations(orphans.size());
  ProgressLine progress(err);
  for (std::size_t i = 0; i < orphans.size(); ++i) {
    progress.show("deleting " + core::describe(orphans[i]));
    try {
      operations[i] = core::delete_orphan(access, orphans[i]);
      results[i].deleted = !operations[i].has_value(); // Already gone.
    } catch (const std::exception& e) {
      results[i].error = e.what();
    }
  }
  std::size_t done = 0;
  for (std::size_t i = 0; i < orphans.size(); ++i) {
    progress.show("waiting for the deletions: " + std::to_string(done) + " of " + std::to_string(orphans.size()) +
                  " done");
    if (operations[i]) {
      try {
        const auto finished = access.client->wait_operation(operations[i]->name, kDeleteTimeout);
        if (finished.error) {
          results[i].error = finished.error->message;
        } else {
          results[i].deleted = true;
        }
      } catch (const std::exception& e) {
        results[i].error = e.what();
      }
    }
    ++done;
  }
  return results;
}

nlohmann::ordered_json sync_json(const std::vector<std::string>& zones, const std::string& owner, bool remove,
                                 const std::vector<core::Orphan>& orphans, const std::vector<Deletion>& deletions,
                                 std::int64_t now) {
  nlohmann::ordered_json resources = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < orphans.size(); ++i) {
    auto object = orphan_json(orphans[i], now);
    object["deleted"] = i < deletions.size() && deletions[i].deleted;
    object["error"] = reporting::text_or_null(i < deletions.size() ? deletions[i].error : std::string());
    resources.push_back(std::move(object));
  }
  nlohmann::ordered_json out;
  out["zones"] = zones;
  out["owner"] = reporting::text_or_null(owner);
  out["delete"] = remove;
  out["resources"] = std::move(resources);
  return out;
}

void print_table(Context& ctx, const std::vector<core::Orphan>& orphans, bool with_owner, std::int64_t now) {
  std::vector<std::string> header{"KIND", "NAME", "ZONE", "STATE", "AGE", "JOB"};
  if (with_owner) {
    header.emplace_back("OWNER");
  }
  Table table(header);
  for (const auto& orphan : orphans) {
    const auto age = orphan.age_ms(now);
    std::vector<std::string> row{std::string(core::to_string(orphan.kind)),
                                 printable(orphan.name),
                                 printable(orphan.zone),
                                 printable(orphan.state),
                                 age ? util::format_duration(*age / 1000) : "-",
                                 orphan.job_id ? domain::format_job_id(*orphan.job_id) : "-"};
    if (with_owner) {
      row.push_back(printable(orphan.owner));
    }
    table.add_row(std::move(row));
  }
  table.print(*ctx.out, ctx.color);
}

int run_sync(Context& ctx, const SyncOptions& options) {
  if (options.json) {
    silence_logging();
  }
  core::OrphanFilter filter;
  if (!options.older_than.empty()) {
    const auto seconds = util::parse_duration_seconds(options.older_than);
    if (!seconds || *seconds < 0) {
      throw UsageError("--older-than: '" + options.older_than + "' is not a duration (90s, 30m, 2h, 1d)");
    }
    filter.older_than_ms = *seconds * 1000;
  }
  check_zone_arguments(options.zones, options.all_zones);
  const auto settings = config::load_settings();
  auto& store = ctx.store();
  const std::string owner = options.all_owners ? "" : core::owner_label_value(store.identity());
  if (!owner.empty()) {
    filter.owners = {owner};
    // Another store's resources (a lab's, or another file's) are that store's to hold: --all-owners shows them too.
    filter.store = core::store_label_value(core::store_location());
  }
  const auto access = core::connect_cloud(settings, *ctx.err);
  const auto zones = zones_to_look_in(ctx, access, options.zones, options.all_zones, options.json);
  // The cloud first, the store after: a resource created meanwhile had its name recorded before its request left.
  // The zones are listed a few at once; the first error ends the command, as a listing that failed one zone would.
  std::vector<core::ZoneListing> listings(zones.size());
  list_each_zone(zones, [&](std::size_t i) {
    spdlog::debug("listing queued resources and nodes in {}", zones[i]);
    listings[i] = core::list_zone(access, zones[i]);
  });
  filter.now_ms = util::now_ms();
  const auto orphans = core::find_orphans(listings, store.attempts().held_slices(), filter);

  std::vector<Deletion> deletions;
  if (options.remove && !orphans.empty()) {
    if (!options.json) {
      print_table(ctx, orphans, options.all_owners, filter.now_ms);
      ctx.out->flush();
    }
    deletions = delete_orphans(access, orphans, *ctx.err);
  }
  int failed = 0;
  for (std::size_t i = 0; i < deletions.size(); ++i) {
    if (!deletions[i].error.empty()) {
      ++failed;
      *ctx.err << "jobman: error: deleting " << printable(core::describe(orphans[i])) << ": "
               << printable(deletions[i].error) << '\n';
    }
  }
  if (options.json) {
    *ctx.out << sync_json(zones, owner, options.remove, orphans, deletions, filter.now_ms).dump(2) << '\n';
  } else if (orphans.empty()) {
    *ctx.err << "No orphaned resources in " << util::join(zones, ", ") << ".\n";
  } else if (!options.remove) {
    print_table(ctx, orphans, options.all_owners, filter.now_ms);
    *ctx.err << orphans.size() << " orphaned resource(s); 'jobman sync --delete' deletes them.\n";
  } else {
    *ctx.err << "Deleted " << orphans.size() - static_cast<std::size_t>(failed) << " of " << orphans.size()
             << " orphaned resource(s).\n";
  }
  return failed > 0 ? static_cast<int>(ExitCode::error) : 0;
}

} // namespace

void add_sync_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<SyncOptions>();
  auto* cmd = app.add_subcommand(
      "sync", "List the queued resources and nodes with jobman's labels that no job holds; --delete removes them");
  cmd->add_option("--zone", options->zones,
                  "Look in this zone (repeatable; default: every zone of a job in the store, and the settings' "
                  "zone; every zone of the project when that is none)")
      ->allow_extra_args(false)
      ->type_name("ZONE");
  cmd->add_flag("--all-zones", options->all_zones,
                "Look in every zone of the project (the TPU API's locations), as it does when the store names none");
  cmd->add_flag("--all-owners", options->all_owners,
                "Include other users' resources (default: only those whose jobman-owner label is yours)");
  cmd->add_option("--older-than", options->older_than, "Only resources created longer ago than this (30m, 2h, 1d)")
      ->type_name("DURATION");
  cmd->add_flag("--delete", options->remove,
                "Delete them (a queued resource with force, which takes its node) and wait until they are gone");
  add_json_flag(*cmd, options->json);
  cmd->footer("Examples:\n"
              "  jobman sync                         # what is left behind, with its age and state\n"
              "  jobman sync --older-than 2h --delete\n"
              "  jobman sync --zone us-central2-b --all-owners --json\n"
              "  jobman sync --all-zones             # the day the store is lost: every zone, listed in parallel\n"
              "Lists the cloud first and reads the store after, so a slice being requested is never taken for one\n"
              "left behind. Without --delete nothing is deleted. Exit codes: 0 ok, 1 a cloud error (listing or a\n"
              "deletion failed), 2 usage.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_sync(ctx, *options); }; });
}

} // namespace jobman::cli
