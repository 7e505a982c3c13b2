#include "jobman/core/data_locality.hpp"

#include "jobman/cloud/tpu_client.hpp"
#include "jobman/util/strings.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace jobman::core {

namespace {

// The continent of each region prefix, as Google names regions ("us-central1", "northamerica-northeast1").
constexpr std::pair<std::string_view, std::string_view> kContinents[] = {
    {"us", "north-america"},
    {"northamerica", "north-america"},
    {"southamerica", "south-america"},
    {"europe", "europe"},
    {"asia", "asia"},
    {"australia", "oceania"},
    {"me", "middle-east"},
    {"africa", "africa"},
};

// The predefined dual-regions and the regions each holds; a configurable dual-region lists its own
// (customPlacementConfig).
const std::map<std::string, std::vector<std::string>>& dual_regions() {
  static const std::map<std::string, std::vector<std::string>> pairs{
      {"asia1", {"asia-northeast1", "asia-northeast2"}}, {"eur4", {"europe-north1", "europe-west4"}},
      {"eur5", {"europe-west1", "europe-west2"}},        {"eur7", {"europe-west3", "europe-west10"}},
      {"eur8", {"europe-west6", "europe-west8"}},        {"nam4", {"us-central1", "us-east1"}},
  };
  return pairs;
}

// The multi-regions and their continents.
std::string multi_region_continent(const std::string& location) {
  if (location == "us") {
    return "north-america";
  }
  if (location == "eu") {
    return "europe";
  }
  if (location == "asia") {
    return "asia";
  }
  return {};
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// The regions a bucket's data is kept in: its region, a dual-region's two; none for a multi-region.
std::vector<std::string> regions_holding(const store::BucketPlace& place) {
  const std::string location = util::to_lower(place.location);
  const std::string type = util::to_lower(place.location_type);
  if (type == "multi-region" || !multi_region_continent(location).empty()) {
    return {};
  }
  if (type == "dual-region") {
    if (const auto it = dual_regions().find(location); it != dual_regions().end()) {
      return it->second;
    }
    // A configurable dual-region is written "EUROPE-WEST1+EUROPE-WEST4" where the API gives its regions.
    return util::split(location, '+');
  }
  if (type == "zone") {
    return {region_of_zone(location)};
  }
  return {location};
}

// The continent a bucket's data is on: a multi-region's, or that of the (first) region holding it; "" when unknown.
std::string continent_of_place(const store::BucketPlace& place) {
  if (auto continent = multi_region_continent(util::to_lower(place.location)); !continent.empty()) {
    return continent;
  }
  const auto regions = regions_holding(place);
  return regions.empty() ? std::string() : continent_of(regions.front());
}

} // namespace

std::string region_of_zone(const std::string& zone) {
  const auto dash = zone.rfind('-');
  // A zone ends in a dash and one letter ("-b"); anything else is taken for a region already.
  if (dash == std::string::npos || dash + 2 != zone.size()) {
    return zone;
  }
  return zone.substr(0, dash);
}

std::string continent_of(const std::string& region) {
  const std::string lower = util::to_lower(region);
  const std::string prefix = lower.substr(0, lower.find('-'));
  for (const auto& [name, continent] : kContinents) {
    if (prefix == name) {
      return std::string(continent);
    }
  }
  return {};
}

std::string_view to_string(Nearness nearness) {
  switch (nearness) {
  case Nearness::same_region: return "in the same region";
  case Nearness::same_continent: return "on the same continent";
  case Nearness::other_continent: return "on another continent";
  case Nearness::unknown: break;
  }
  return "where jobman cannot place it";
}

Nearness nearness(const store::BucketPlace& place, const std::string& zone) {
  const std::string region = region_of_zone(zone);
  const std::string continent = continent_of(region);
  const auto regions = regions_holding(place);
  if (std::find(regions.begin(), regions.end(), region) != regions.end()) {
    return Nearness::same_region;
  }
  const std::string bucket_continent = continent_of_place(place);
  if (bucket_continent.empty() || continent.empty()) {
    return Nearness::unknown;
  }
  return bucket_continent == continent ? Nearness::same_continent : Nearness::other_continent;
}

std::string describe_place(const store::BucketPlace& place) {
  std::string location = util::to_lower(place.location);
  const std::string type = util::to_lower(place.location_type);
  if (type == "multi-region" || !multi_region_continent(location).empty()) {
    return "the " + util::to_upper(location) + " multi-region";
  }
  if (type == "dual-region") {
    const auto regions = regions_holding(place);
    return "dual-region " + util::to_upper(location) +
           (regions.size() > 1 && location.find('+') == std::string::npos ? " (" + util::join(regions, " and ") + ")"
                                                                          : "");
  }
  return location;
}

std::optional<double> transfer_per_gib(const config::TransferRates& rates, const store::BucketPlace& place,
                                       const std::string& zone) {
  const auto near = nearness(place, zone);
  if (near == Nearness::same_region) {
    return 0.0;
  }
  if (near == Nearness::unknown) {
    return std::nullopt;
  }
  return rates.per_gib(continent_of_place(place), continent_of(region_of_zone(zone)));
}

std::string bucket_cache_id(const config::Settings& settings) {
  if (settings.cloud == config::CloudKind::google) {
    return cloud::resolve_storage_endpoint(cloud::resolve_tpu_endpoint(settings.api_endpoint));
  }
  return settings.api_endpoint.empty() ? "bundled-mock" : settings.api_endpoint;
}

std::vector<config::Candidate> prefer_near_data(std::vector<config::Candidate> candidates,
                                                const store::BucketPlace& place, std::string* why) {
  const auto rank = [&](const config::Candidate& c) {
    switch (nearness(place, c.zone)) {
    case Nearness::same_region: return 0;
    case Nearness::same_continent:
    case Nearness::unknown: return 1;
    case Nearness::other_continent: break;
    }
    return 2;
  };
  const auto before = candidates;
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](const config::Candidate& a, const config::Candidate& b) { return rank(a) < rank(b); });
  if (why != nullptr) {
    why->clear();
    if (!std::equal(before.begin(), before.end(), candidates.begin(), candidates.end(),
                    [](const auto& a, const auto& b) { return a.label() == b.label(); })) {
      std::vector<std::string> near;
      std::vector<std::string> far;
      for (const auto& c : candidates) {
        auto& group = rank(c) == 0 ? near : far;
        if (std::find(group.begin(), group.end(), c.zone) == group.end()) {
          group.push_back(c.zone);
        }
      }
      *why = "the data is in " + describe_place(place) + ": " +
             (near.empty() ? "" : util::join(near, ", ") + " first (the bucket's region)") +
             (near.empty() || far.empty() ? "" : ", then ") + (far.empty() ? "" : util::join(far, ", "));
      for (const auto& c : candidates) {
        if (rank(c) == 2) {
          *why += "; " + c.zone + " only after the rest: another continent from the data";
          break;
        }
      }
    }
  }
  return candidates;
}

std::string hold_back_far(std::vector<config::Candidate>& candidates, const store::BucketPlace& place) {
  const auto far = [&](const config::Candidate& c) { return nearness(place, c.zone) == Nearness::other_continent; };
  if (std::all_of(candidates.begin(), candidates.end(), far) ||
      std::none_of(candidates.begin(), candidates.end(), far)) {
    return "";
  }
  std::vector<std::string> held;
  for (const auto& c : candidates) {
    if (far(c)) {
      held.push_back(c.label());
    }
  }
  std::erase_if(candidates, far);
  return util::join(held, "; ") + " held back, on another continent from the data: asked only if this race is given up";
}

LocalityCheck check_data_locality(store::JobStore& store, const OfferCloud& cloud, const std::string& storage_id,
                                  const std::vector<config::JobConfig>& configs, const config::PriceTable& prices,
                                  std::int64_t now_ms) {
  LocalityCheck check;
  std::map<std::string, std::optional<store::BucketPlace>> places; // By bucket; nullopt: not known.
  std::set<std::string> noted;
  const auto place_of = [&](const std::string& bucket) -> std::optional<store::BucketPlace> {
    if (const auto known = places.find(bucket); known != places.end()) {
      return known->second;
    }
    auto& answer = places[bucket];
    auto cached = store.zone_catalogs().bucket(storage_id, bucket);
    if (cached && now_ms >= cached->fetched_ms && now_ms - cached->fetched_ms < kBucketPlaceTtlMs) {
      answer = std::move(cached);
      return answer;
    }
    const auto note = [&](const std::string& why) {
      if (noted.insert(bucket).second) {
        check.notes.push_back("cannot tell where bucket '" + bucket + "' is (" + why +
                              "); its region is not compared with the slice's");
      }
    };
    if (!cloud.client) {
      return std::nullopt; // The zone check's note already says why the cloud was not asked.
    }
    try {
      const auto found = cloud.client->get_bucket(bucket);
      if (!found) {
        note("Cloud Storage has no bucket of that name");
        return std::nullopt;
      }
      store::BucketPlace fresh{storage_id, bucket, found->location, found->location_type, found->storage_class, now_ms};
      if (found->location_type == "dual-region" && found->data_locations.size() > 1) {
        fresh.location = util::join(found->data_locations, "+");
      }
      store.zone_catalogs().put_bucket(fresh);
      answer = std::move(fresh);
    } catch (const std::exception& e) {
      // A cached answer, however old, is better than none when the cloud cannot be asked.
      if (cached) {
        answer = std::move(cached);
      } else {
        note(e.what());
      }
    }
    return answer;
  };

  std::set<std::string> reported; // "bucket zone", once each.
  for (const auto& config : configs) {
    if (!config.gcsfuse || config.gcsfuse->bucket_name.empty()) {
      continue;
    }
    const auto& fuse = *config.gcsfuse;
    const auto place = place_of(fuse.bucket_name);
    if (!place) {
      continue;
    }
    std::vector<std::string> far;
    std::optional<double> rate;
    for (const auto& zone : config.tpu.zones.empty() ? std::vector<std::string>{config.tpu.zone} : config.tpu.zones) {
      const auto near = nearness(*place, zone);
      if (near == Nearness::same_region) {
        continue;
      }
      if (!reported.insert(fuse.bucket_name + " " + zone).second) {
        continue;
      }
      far.push_back(zone);
      const auto per_gib = transfer_per_gib(prices.transfer, *place, zone);
      if (per_gib && (!rate || *per_gib > *rate)) {
        rate = per_gib;
      }
    }
    if (far.empty()) {
      continue;
    }
    std::vector<std::string> regions;
    for (const auto& zone : far) {
      const auto region = region_of_zone(zone);
      if (std::find(regions.begin(), regions.end(), region) == regions.end()) {
        regions.push_back(region);
      }
    }
    Diagnostic finding;
    finding.where = fuse.bucket_origin;
    finding.message = "bucket '" + fuse.bucket_name + "' is in " + describe_place(*place) + ", the slice in " +
                      util::join(regions, " or ") + ": every read crosses regions";
    if (rate) {
      finding.message += ", at " + prices.money(*rate, 3) + "/GiB";
      if (fuse.expected_read_gb) {
        finding.message += ", about " + prices.money(*rate * *fuse.expected_read_gb * 1e9 / (1024.0 * 1024 * 1024)) +
                           " an epoch of " + number(*fuse.expected_read_gb) + " GB";
      }
      if (!prices.transfer.source.empty()) {
        finding.message += " (" + prices.transfer.source + ")";
      }
    }
    const auto regions_held = regions_holding(*place);
    finding.hint = regions_held.empty() ? "a bucket in the slice's region keeps reads local"
                                        : "run in " + util::join(regions_held, " or ") +
                                              ", or copy the data to a bucket in " + regions.front();
    check.findings.push_back(std::move(finding));
  }
  return check;
}

} // namespace jobman::core
