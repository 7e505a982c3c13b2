// Where the data is: the region of a job's bucket against its slice's zone. validate and create look each mounted
// bucket up (Cloud Storage's buckets.get, answers kept in the store for a day) and warn, at gcsfuse.bucket_name, of a
// bucket outside the slice's region, with the price of reading across; the supervisor ranks the candidate zones of a
// job by nearness to its bucket, from the store alone.
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/config/prices.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/core/zone_offers.hpp"
#include "jobman/store/zone_catalogs.hpp"
#include "jobman/util/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace jobman::core {

// How long an answer of buckets.get is trusted before Cloud Storage is asked again.
inline constexpr std::int64_t kBucketPlaceTtlMs = 24LL * 3600 * 1000;

// The region of a zone: "us-central2-b" -> "us-central2".
std::string region_of_zone(const std::string& zone);

// The continent of a region or zone, as prices.yaml names it ("north-america", "europe", "asia", "oceania",
// "south-america", "middle-east", "africa"); "" for a name it does not know.
std::string continent_of(const std::string& region);

// How near a bucket's data is to a zone.
enum class Nearness {
  same_region,    // The bucket is in the zone's region (or a dual-region holding it): reads stay in the region.
  same_continent, // Another region of the zone's continent, or a multi-region or dual-region of that continent.
  other_continent,
  unknown, // The bucket's location is not one jobman can place.
};

// "in the same region", ...
std::string_view to_string(Nearness nearness);

// How near the data of a bucket at `place` is to `zone`.
Nearness nearness(const store::BucketPlace& place, const std::string& zone);

// The bucket's location as people read it: "europe-west4", "the US multi-region", "dual-region NAM4".
std::string describe_place(const store::BucketPlace& place);

// What reading from a bucket at `place` in `zone` costs per GiB (0 within the region); nullopt when the price table
// has no rate for the crossing or the location cannot be placed.
std::optional<double> transfer_per_gib(const config::TransferRates& rates, const store::BucketPlace& place,
                                       const std::string& zone);

// Which answers of the store's bucket places are this cloud's: "bundled-mock", a mock's address, or Cloud Storage's
// endpoint.
std::string bucket_cache_id(const config::Settings& settings);

// `candidates` with those nearer the bucket's data first (its region, then its continent or an unknown place, then
// other continents), each group in the order given. `why`, when given, says what moved ("" when nothing did).
std::vector<config::Candidate> prefer_near_data(std::vector<config::Candidate> candidates,
                                                const store::BucketPlace& place, std::string* why = nullptr);

// Takes out of `candidates` those on another continent from the bucket's data, unless nothing else is left, and says
// which ("" when none was): a first-ready race asks them only once a race of the rest was given up.
std::string hold_back_far(std::vector<config::Candidate>& candidates, const store::BucketPlace& place);

// The verdict on the configs' buckets.
struct LocalityCheck {
  std::vector<Diagnostic> findings; // A bucket outside its slice's region: one per config and bucket, at
                                    // gcsfuse.bucket_name, naming both places and the price of reading across.
  std::vector<std::string> notes;   // For people: a bucket that could not be looked up, once each.
};

// Looks up every config's bucket (answers of the last day from the store; older or absent ones asked of the cloud
// and stored) and compares it with the config's zone (each zone of a list). Never throws for the cloud's sake: a
// lookup that fails is a note, and the configs are let through.
LocalityCheck check_data_locality(store::JobStore& store, const OfferCloud& cloud, const std::string& storage_id,
                                  const std::vector<config::JobConfig>& configs, const config::PriceTable& prices,
                                  std::int64_t now_ms);

} // namespace jobman::core
