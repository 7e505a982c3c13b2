// The store's cache of what each zone of a cloud offers (see ZoneCatalog).
#include "store_impl.hpp"

#include <nlohmann/json.hpp>

namespace jobman::store {

namespace {

// A JSON array of strings back into names; a damaged value reads as none (the catalog is then fetched again).
std::vector<std::string> names_of(std::string_view text) {
  const auto parsed = nlohmann::json::parse(text, nullptr, false);
  std::vector<std::string> names;
  if (parsed.is_array()) {
    for (const auto& item : parsed) {
      if (item.is_string()) {
        names.push_back(item.get<std::string>());
      }
    }
  }
  return names;
}

} // namespace

std::optional<ZoneCatalog> ZoneCatalogs::get(const std::string& endpoint, const std::string& project,
                                             const std::string& zone) const {
  auto query = impl_->statements.get("SELECT accelerator_types, runtime_versions, fetched_ms FROM zone_catalogs "
                                     "WHERE endpoint = ?1 AND project = ?2 AND zone = ?3");
  query->bind(1, endpoint);
  query->bind(2, project);
  query->bind(3, zone);
  if (!query->step()) {
    return std::nullopt;
  }
  ZoneCatalog catalog{endpoint,
                      project,
                      zone,
                      names_of(query->column_text_view(0)),
                      names_of(query->column_text_view(1)),
                      query->column_int64(2)};
  if (catalog.accelerator_types.empty()) {
    return std::nullopt;
  }
  return catalog;
}

void ZoneCatalogs::put(const ZoneCatalog& catalog) {
  auto upsert = impl_->statements.get(
      "INSERT INTO zone_catalogs (endpoint, project, zone, accelerator_types, runtime_versions, fetched_ms) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (endpoint, project, zone) DO UPDATE SET "
      "accelerator_types = excluded.accelerator_types, runtime_versions = excluded.runtime_versions, "
      "fetched_ms = excluded.fetched_ms");
  upsert->bind(1, catalog.endpoint);
  upsert->bind(2, catalog.project);
  upsert->bind(3, catalog.zone);
  upsert->bind(4, nlohmann::json(catalog.accelerator_types).dump());
  upsert->bind(5, nlohmann::json(catalog.runtime_versions).dump());
  upsert->bind(6, catalog.fetched_ms);
  upsert->run();
}

namespace {

BucketPlace place_of(sql::Statement& row) {
  return BucketPlace{std::string(row.column_text_view(0)), std::string(row.column_text_view(1)),
                     std::string(row.column_text_view(2)), std::string(row.column_text_view(3)),
                     std::string(row.column_text_view(4)), row.column_int64(5)};
}

} // namespace

std::optional<BucketPlace> ZoneCatalogs::bucket(const std::string& endpoint, const std::string& bucket) const {
  auto query = impl_->statements.get("SELECT endpoint, bucket, location, location_type, storage_class, fetched_ms "
                                     "FROM bucket_places WHERE endpoint = ?1 AND bucket = ?2");
  query->bind(1, endpoint);
  query->bind(2, bucket);
  if (!query->step()) {
    return std::nullopt;
  }
  return place_of(*query);
}

std::vector<BucketPlace> ZoneCatalogs::buckets() const {
  auto query = impl_->statements.get("SELECT endpoint, bucket, location, location_type, storage_class, fetched_ms "
                                     "FROM bucket_places ORDER BY endpoint, bucket");
  std::vector<BucketPlace> out;
  while (query->step()) {
    out.push_back(place_of(*query));
  }
  return out;
}

void ZoneCatalogs::put_bucket(const BucketPlace& place) {
  auto upsert = impl_->statements.get(
      "INSERT INTO bucket_places (endpoint, bucket, location, location_type, storage_class, fetched_ms) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (endpoint, bucket) DO UPDATE SET location = excluded.location, "
      "location_type = excluded.location_type, storage_class = excluded.storage_class, "
      "fetched_ms = excluded.fetched_ms");
  upsert->bind(1, place.endpoint);
  upsert->bind(2, place.bucket);
  upsert->bind(3, place.location);
  upsert->bind(4, place.location_type);
  upsert->bind(5, place.storage_class);
  upsert->bind(6, place.fetched_ms);
  upsert->run();
}

} // namespace jobman::store
