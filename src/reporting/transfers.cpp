#include "jobman/reporting/transfers.hpp"

#include "jobman/core/bucket_transfers.hpp"
#include "jobman/reporting/accounting.hpp"
#include "jobman/reporting/text.hpp"

#include <algorithm>
#include <map>

namespace jobman::reporting {

namespace {

// The nearness as JSON names it.
std::string_view nearness_code(core::Nearness nearness) {
  switch (nearness) {
  case core::Nearness::same_region: return "same-region";
  case core::Nearness::same_continent: return "same-continent";
  case core::Nearness::other_continent: return "other-continent";
  case core::Nearness::unknown: break;
  }
  return "unknown";
}

} // namespace

std::optional<store::BucketPlace> place_of(const std::vector<store::BucketPlace>& places, const std::string& bucket) {
  std::optional<store::BucketPlace> newest;
  for (const auto& p : places) {
    if (p.bucket == bucket && (!newest || p.fetched_ms > newest->fetched_ms)) {
      newest = p;
    }
  }
  return newest;
}

std::vector<TransferGroup> group_transfers(const std::vector<store::BucketTransfer>& transfers,
                                           const std::vector<store::BucketPlace>& places,
                                           const config::TransferRates& rates, const std::set<std::int64_t>* jobs) {
  std::map<std::pair<std::string, std::string>, TransferGroup> groups;
  for (const auto& t : transfers) {
    if (jobs != nullptr && jobs->count(t.job_id) == 0) {
      continue;
    }
    auto& g = groups[{t.bucket, t.zone}];
    g.bucket = t.bucket;
    g.zone = t.zone;
    g.read_bytes += t.read_bytes;
    g.write_ops += t.write_ops;
    ++g.attempts;
    g.jobs.insert(t.job_id);
  }
  std::vector<TransferGroup> out;
  out.reserve(groups.size());
  for (auto& [key, g] : groups) {
    g.place = place_of(places, g.bucket);
    if (g.place) {
      g.nearness = core::nearness(*g.place, g.zone);
      g.per_gib = core::transfer_per_gib(rates, *g.place, g.zone);
      g.cost = core::transfer_cost(rates, *g.place, g.zone, g.read_bytes);
    }
    out.push_back(std::move(g));
  }
  return out;
}

TransferTotal total_of(const std::vector<TransferGroup>& groups) {
  TransferTotal total;
  for (const auto& g : groups) {
    if (g.nearness != core::Nearness::same_region) {
      total.across_bytes += g.read_bytes;
    }
    if (g.cost) {
      total.cost += *g.cost;
    } else if (g.read_bytes > 0) {
      total.complete = false;
    }
  }
  return total;
}

void print_transfers(std::ostream& out, const std::vector<TransferGroup>& groups, const config::PriceTable& prices,
                     bool color) {
  Table table({"BUCKET", "LOCATION", "ZONE", "DATA", "READ", "ATTEMPTS", "RATE/GiB", "COST"});
  for (const auto& g : groups) {
    table.add_row({"gs://" + printable(g.bucket), g.place ? printable(core::describe_place(*g.place)) : "not looked up",
                   printable(g.zone), g.place ? std::string(core::to_string(g.nearness)) : "-",
                   core::describe_bytes(g.read_bytes), std::to_string(g.attempts),
                   g.per_gib ? money(*g.per_gib, prices) : "-", g.cost ? money(*g.cost, prices) : "no price"},
                  g.nearness == core::Nearness::other_continent ? "\x1b[33m" : "", 3); // yellow
  }
  table.print(out, color);
}

nlohmann::ordered_json transfers_json(const std::vector<TransferGroup>& groups) {
  auto out = nlohmann::ordered_json::array();
  for (const auto& g : groups) {
    nlohmann::ordered_json one;
    one["bucket"] = g.bucket;
    one["location"] = g.place ? nlohmann::ordered_json(g.place->location) : nlohmann::ordered_json(nullptr);
    one["location_type"] = g.place ? nlohmann::ordered_json(g.place->location_type) : nlohmann::ordered_json(nullptr);
    one["zone"] = g.zone;
    one["nearness"] =
        g.place ? nlohmann::ordered_json(std::string(nearness_code(g.nearness))) : nlohmann::ordered_json(nullptr);
    one["read_bytes"] = g.read_bytes;
    one["write_ops"] = g.write_ops;
    one["attempts"] = g.attempts;
    one["jobs"] = g.jobs.size();
    one["per_gib"] = g.per_gib ? nlohmann::ordered_json(*g.per_gib) : nlohmann::ordered_json(nullptr);
    one["cost"] = g.cost ? nlohmann::ordered_json(*g.cost) : nlohmann::ordered_json(nullptr);
    out.push_back(std::move(one));
  }
  return out;
}

} // namespace jobman::reporting
