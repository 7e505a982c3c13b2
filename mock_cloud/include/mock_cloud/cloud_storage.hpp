// The mock's Cloud Storage as the JSON API shows it (buckets.get, objects.list, objects.get): each directory under the
// bucket root is a bucket (bucket_root.hpp), each regular file in it an object named by its path there.
#pragma once

#include "mock_cloud/config.hpp"
#include "mock_cloud/world.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace jobman::mock {

// The region of a zone: the zone without its last "-x" ("europe-west4-a" -> "europe-west4").
std::string region_of_zone(std::string_view zone);

// An error as Cloud Storage's JSON API sends it: a google.rpc Status body (error_reply) whose error also lists
// {message, domain "global", reason} in `errors` ("notFound" for 404, "invalid" for 400, "required" for 401).
Reply storage_error(int http_status, const std::string& message);

// What objects.list asks for (its query parameters).
struct ObjectListQuery {
  std::string prefix;                      // Only names that start with it.
  std::string delimiter;                   // Names with it after the prefix collapse into one of `prefixes`.
  std::string page_token;                  // nextPageToken of the page before; empty for the first.
  std::string start_offset;                // Only names from it on (byte order).
  std::string end_offset;                  // Only names before it; empty for no end.
  int max_results = 1000;                  // Items and prefixes on a page together, 1 to 1000.
  bool include_trailing_delimiter = false; // An object whose name ends at the delimiter is listed as well.
};

// The buckets of the mock's Cloud Storage, read from their directories on every call. Thread-safe.
class BucketDirectories {
public:
  // How the buckets are found and placed.
  struct Options {
    std::filesystem::path root;                 // The bucket root, as the worker hosts' gcsfuse mounts from.
    std::map<std::string, BucketConfig> placed; // The buckets the world config places.
    std::string default_zone;                   // The world's first zone: places a bucket nothing else does.
    std::uint64_t project_number = 0;           // The project that owns every bucket.
    std::int64_t started_ms = 0;                // The creation time of a placed bucket that has no directory.
  };

  // Reads nothing yet.
  explicit BucketDirectories(Options options);

  // buckets.get: the bucket resource, or a 404 when there is neither a directory nor a placement. `base_url`
  // ("http://HOST:PORT") starts every selfLink.
  [[nodiscard]] Reply get_bucket(const std::string& bucket, const std::string& base_url) const;
  // objects.list: one page of `bucket`'s objects (and prefixes), names in byte order.
  [[nodiscard]] Reply list_objects(const std::string& bucket, const ObjectListQuery& query,
                                   const std::string& base_url) const;
  // objects.get: one object's metadata, or a 404.
  [[nodiscard]] Reply get_object(const std::string& bucket, const std::string& object,
                                 const std::string& base_url) const;
  // The file that holds object `object` of `bucket`, or nullopt when there is no such object.
  [[nodiscard]] std::optional<std::filesystem::path> object_file(const std::string& bucket,
                                                                 const std::string& object) const;
  // Every bucket (directories and placements) and where it is: {"buckets": [{name, location, locationType,
  // storageClass, placedBy: "config"|"first mount"|"first zone", firstMountZone when a mount recorded one}]}.
  [[nodiscard]] nlohmann::json locations() const;

private:
  // Where a bucket lives and why.
  struct Placement {
    BucketConfig config;    // Location (lower case), type and storage class.
    std::string placed_by;  // "config", "first mount" or "first zone".
    std::string mount_zone; // The zone of the first mount, when one was recorded.
  };

  // The bucket's placement, or nullopt when it does not exist.
  [[nodiscard]] std::optional<Placement> placement(const std::string& bucket) const;

  Options options_; // As constructed.
};

} // namespace jobman::mock
