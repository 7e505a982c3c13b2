// The mock cloud's state on disk: one SQLite database with a row per resource, written incrementally.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace jobman::store::sqlite {
class Database;
} // namespace jobman::store::sqlite

namespace jobman::mock {

// Keeps the world across restarts. Every change to the world commits only the rows it touched, so a write costs
// the size of the change, not the size of the world (a full snapshot of 1,000 slices is megabytes).
class WorldStore {
public:
  // What one commit writes.
  struct Changes {
    std::string globals;                                          // The world's scalar state as JSON text.
    std::vector<std::pair<std::string, std::string>> upserts;     // Resource name -> record JSON text.
    std::vector<std::string> removed;                             // Resource names no longer in the world.
    std::vector<std::pair<std::string, std::string>> request_ids; // New requestId keys -> operation names.
  };

  // Everything the database holds.
  struct Contents {
    nlohmann::json globals;                         // null for a new database.
    std::vector<nlohmann::json> records;            // Every resource record, in name order.
    std::map<std::string, std::string> request_ids; // requestId key -> operation name.
  };

  // Opens or creates the database at `path` (mode 0600, WAL); throws jobman::Error when it cannot.
  explicit WorldStore(const std::filesystem::path& path);
  ~WorldStore();
  WorldStore(const WorldStore&) = delete;
  WorldStore& operator=(const WorldStore&) = delete;

  // Reads everything.
  [[nodiscard]] Contents load();
  // Writes `changes` in one transaction.
  void save(const Changes& changes);

private:
  std::unique_ptr<store::sqlite::Database> db_; // The connection; used under the world's mutex only.
};

} // namespace jobman::mock
