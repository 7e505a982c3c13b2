// `jobman buckets`: the buckets the store's jobs mount (those validate and create looked up, and those attempts read
// from), where each is, which zones read it and how much, and what reading across regions cost. Reads the store alone.
#include "commands.hpp"
#include "jobman/config/prices.hpp"
#include "jobman/core/bucket_transfers.hpp"
#include "jobman/reporting/accounting.hpp"
#include "jobman/reporting/text.hpp"
#include "jobman/reporting/transfers.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/zone_catalogs.hpp"
#include "output.hpp"

#include <map>

namespace jobman::cli {

namespace {

struct BucketsOptions {
  bool json = false;
  std::string prices;
};

int run_buckets(Context& ctx, const BucketsOptions& options) {
  const auto prices =
      config::load_prices(options.prices.empty() ? std::nullopt : std::optional<std::filesystem::path>(options.prices));
  const auto& store = ctx.store();
  const auto places = store.zone_catalogs().buckets();
  const auto groups = reporting::group_transfers(store.attempts().all_transfers(), places, prices.transfer);
  // Every bucket named, read or not, with the zones that read it.
  std::map<std::string, std::vector<const reporting::TransferGroup*>> buckets;
  for (const auto& p : places) {
    buckets[p.bucket];
  }
  for (const auto& g : groups) {
    buckets[g.bucket].push_back(&g);
  }
  const auto total = reporting::total_of(groups);
  if (options.json) {
    auto list = nlohmann::ordered_json::array();
    for (const auto& [name, read] : buckets) {
      const auto place = reporting::place_of(places, name);
      std::vector<reporting::TransferGroup> mine;
      for (const auto* g : read) {
        mine.push_back(*g);
      }
      const auto bucket_total = reporting::total_of(mine);
      std::int64_t bytes = 0;
      for (const auto& g : mine) {
        bytes += g.read_bytes;
      }
      nlohmann::ordered_json one;
      one["bucket"] = name;
      one["location"] = place ? nlohmann::ordered_json(place->location) : nlohmann::ordered_json(nullptr);
      one["location_type"] = place ? nlohmann::ordered_json(place->location_type) : nlohmann::ordered_json(nullptr);
      one["storage_class"] = place ? nlohmann::ordered_json(place->storage_class) : nlohmann::ordered_json(nullptr);
      one["read_bytes"] = bytes;
      one["across_region_bytes"] = bucket_total.across_bytes;
      one["cost"] = bucket_total.cost;
      one["cost_complete"] = bucket_total.complete;
      one["zones"] = reporting::transfers_json(mine);
      list.push_back(std::move(one));
    }
    nlohmann::ordered_json out;
    out["buckets"] = std::move(list);
    out["across_region_bytes"] = total.across_bytes;
    out["cost"] = total.cost;
    out["cost_complete"] = total.complete;
    out["currency"] = prices.currency;
    out["rates_source"] = prices.transfer.source;
    *ctx.out << out.dump(2) << '\n';
    return 0;
  }
  if (buckets.empty()) {
    *ctx.out << "No job in the store mounts a bucket (gcsfuse.bucket_name), or none was looked up yet.\n";
    return 0;
  }
  reporting::Table table({"BUCKET", "LOCATION", "CLASS", "ZONE", "DATA", "READ", "ATTEMPTS", "RATE/GiB", "COST"});
  for (const auto& [name, read] : buckets) {
    const auto place = reporting::place_of(places, name);
    const auto where = place ? reporting::printable(core::describe_place(*place)) : std::string("not looked up");
    const auto storage_class = place ? reporting::printable(place->storage_class) : std::string("-");
    if (read.empty()) {
      table.add_row({"gs://" + reporting::printable(name), where, storage_class, "-", "-", "-", "-", "-", "-"});
      continue;
    }
    for (const auto* g : read) {
      table.add_row({"gs://" + reporting::printable(name), where, storage_class, reporting::printable(g->zone),
                     place ? std::string(core::to_string(g->nearness)) : "-", core::describe_bytes(g->read_bytes),
                     std::to_string(g->attempts), g->per_gib ? reporting::money(*g->per_gib, prices) : "-",
                     g->cost ? reporting::money(*g->cost, prices) : "no price"},
                    g->nearness == core::Nearness::other_continent ? "\x1b[33m" : "", 4); // yellow
    }
  }
  table.print(*ctx.out, ctx.color);
  *ctx.out << "\nRead from outside the reading zone's region: " << core::describe_bytes(total.across_bytes) << ", ~"
           << reporting::money(total.cost, prices) << (total.complete ? "" : " + unpriced") << ". READ is what the "
           << "workers' gcsfuse counted (gcs_read_bytes_count) when each attempt ended; RATE/GiB is "
           << reporting::printable(prices.transfer.source) << ".\n";
  return 0;
}

} // namespace

void add_buckets_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("buckets", "Show the buckets jobs mount, where they are and what reading them cost");
  auto options = std::make_shared<BucketsOptions>();
  add_json_flag(*cmd, options->json);
  cmd->add_option("--prices", options->prices,
                  "A price table over the built-in one (default: ~/.config/jobman/prices.yaml when present)")
      ->type_name("FILE");
  cmd->footer("Examples:\n"
              "  jobman buckets\n"
              "  jobman buckets --json\n"
              "Each bucket a job mounts (gcsfuse.bucket_name), where Cloud Storage says it is (looked up by validate\n"
              "and create), and per zone that read it: how near the data was, what the attempts there read through\n"
              "gcsfuse (counted by the workers' gcsfuse when each attempt ended), and what reading across regions\n"
              "cost at prices.yaml's data-transfer rates. Reads the local store only.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_buckets(ctx, *options); }; });
}

} // namespace jobman::cli
