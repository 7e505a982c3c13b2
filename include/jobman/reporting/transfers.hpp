// What jobs read from their buckets, grouped by bucket and the zone that read it, and what crossing regions cost:
// `jobman buckets` lists it, the report prices it beside the chips, and `show` gives each attempt's figures.
#pragma once

#include "jobman/config/prices.hpp"
#include "jobman/core/data_locality.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/zone_catalogs.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace jobman::reporting {

// What one zone read from one bucket.
struct TransferGroup {
  std::string bucket;
  std::optional<store::BucketPlace> place; // Where the bucket is, as last looked up; nullopt when never.
  std::string zone;
  core::Nearness nearness = core::Nearness::unknown;
  std::int64_t read_bytes = 0;
  std::int64_t write_ops = 0;
  int attempts = 0;
  std::set<std::int64_t> jobs;
  std::optional<double> per_gib; // The rate of the crossing (0 within the region); nullopt when unpriced.
  std::optional<double> cost;    // read_bytes at per_gib.
};

// The newest answer of buckets.get for `bucket` among `places` (any cloud's); nullopt when it was never looked up.
std::optional<store::BucketPlace> place_of(const std::vector<store::BucketPlace>& places, const std::string& bucket);

// `transfers` (those of `jobs` when given) grouped by bucket and zone, in that order, and priced at `rates`.
std::vector<TransferGroup> group_transfers(const std::vector<store::BucketTransfer>& transfers,
                                           const std::vector<store::BucketPlace>& places,
                                           const config::TransferRates& rates,
                                           const std::set<std::int64_t>* jobs = nullptr);

// The cost of the groups that crossed, and whether every group had a price.
struct TransferTotal {
  double cost = 0;
  std::int64_t across_bytes = 0; // Read from outside the reading zone's region.
  bool complete = true;
};
TransferTotal total_of(const std::vector<TransferGroup>& groups);

// The groups as a table: BUCKET, LOCATION, ZONE, NEARNESS, READ, ATTEMPTS, RATE, COST.
void print_transfers(std::ostream& out, const std::vector<TransferGroup>& groups, const config::PriceTable& prices,
                     bool color);
// The groups as JSON (docs/JSON.md): [{bucket, location, location_type, zone, nearness, read_bytes, write_ops,
// attempts, jobs, per_gib, cost}].
nlohmann::ordered_json transfers_json(const std::vector<TransferGroup>& groups);

} // namespace jobman::reporting
