// The store's zone catalogs: what each zone of a cloud offers, as its catalog methods last answered, and where the
// buckets jobs mount are, as Cloud Storage last answered.
#pragma once

#include "jobman/store/job_store.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace jobman::store {

// What one zone of a cloud offers, as its catalog methods last answered.
struct ZoneCatalog {
  std::string endpoint;                       // The API's base URL: the mock's and Google's answers are kept apart.
  std::string project;                        // The project asked.
  std::string zone;                           // "us-central2-b".
  std::vector<std::string> accelerator_types; // acceleratorTypes.list: "v4-8", ...
  std::vector<std::string> runtime_versions;  // runtimeVersions.list: "tpu-ubuntu2204-base", ...
  std::int64_t fetched_ms = 0;                // When the cloud answered.
};

// Where a bucket is, as Cloud Storage's buckets.get last answered.
struct BucketPlace {
  std::string endpoint;      // The storage API's base URL: the mock's and Google's answers are kept apart.
  std::string bucket;        // Its name.
  std::string location;      // As the API gives it: "EUROPE-WEST4", "US", "NAM4".
  std::string location_type; // "region", "dual-region", "multi-region" (or "zone").
  std::string storage_class; // "STANDARD", ...
  std::int64_t fetched_ms = 0;
};

class ZoneCatalogs : public StoreView {
public:
  using StoreView::StoreView;

  // The zone's catalog as last stored, however old; nullopt when none was.
  [[nodiscard]] std::optional<ZoneCatalog> get(const std::string& endpoint, const std::string& project,
                                               const std::string& zone) const;
  // Stores (or replaces) a zone's catalog.
  void put(const ZoneCatalog& catalog);

  // Where `bucket` was last found to be, however long ago; nullopt when it never was.
  [[nodiscard]] std::optional<BucketPlace> bucket(const std::string& endpoint, const std::string& bucket) const;
  // Every bucket place stored, by endpoint and name.
  [[nodiscard]] std::vector<BucketPlace> buckets() const;
  // Stores (or replaces) where a bucket is.
  void put_bucket(const BucketPlace& place);
};

} // namespace jobman::store
