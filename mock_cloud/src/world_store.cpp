#include "mock_cloud/world_store.hpp"

#include "jobman/store/sqlite.hpp"

namespace jobman::mock {

namespace sqlite = store::sqlite;

WorldStore::WorldStore(const std::filesystem::path& path) {
  sqlite::create_private_file(path);
  db_ = std::make_unique<sqlite::Database>(path.string(), sqlite::OpenMode::read_write_create, 5000);
  db_->enable_wal(5000);
  // A crash of the mock loses nothing committed; a power cut may lose the last commits, like any emulator's disk.
  db_->execute("PRAGMA synchronous = NORMAL");
  db_->execute("CREATE TABLE IF NOT EXISTS globals (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL);"
               "CREATE TABLE IF NOT EXISTS resources (name TEXT PRIMARY KEY, body TEXT NOT NULL) WITHOUT ROWID;"
               "CREATE TABLE IF NOT EXISTS request_ids (key TEXT PRIMARY KEY, operation TEXT NOT NULL) WITHOUT ROWID;");
}

WorldStore::~WorldStore() = default;

WorldStore::Contents WorldStore::load() {
  Contents contents;
  sqlite::Statement globals(*db_, "SELECT body FROM globals WHERE id = 1");
  if (globals.step()) {
    contents.globals = nlohmann::json::parse(globals.column_text_view(0));
  }
  sqlite::Statement resources(*db_, "SELECT body FROM resources ORDER BY name");
  while (resources.step()) {
    contents.records.push_back(nlohmann::json::parse(resources.column_text_view(0)));
  }
  sqlite::Statement ids(*db_, "SELECT key, operation FROM request_ids");
  while (ids.step()) {
    contents.request_ids.emplace(ids.column_text(0), ids.column_text(1));
  }
  return contents;
}

void WorldStore::save(const Changes& changes) {
  sqlite::Transaction transaction(*db_);
  if (!changes.globals.empty()) {
    sqlite::Statement put(*db_, "INSERT OR REPLACE INTO globals (id, body) VALUES (1, ?1)");
    put.bind(1, changes.globals);
    put.run();
  }
  if (!changes.upserts.empty()) {
    sqlite::Statement put(*db_, "INSERT OR REPLACE INTO resources (name, body) VALUES (?1, ?2)", true);
    for (const auto& [name, body] : changes.upserts) {
      put.bind(1, name);
      put.bind(2, body);
      put.run();
      put.reset();
    }
  }
  if (!changes.removed.empty()) {
    sqlite::Statement drop(*db_, "DELETE FROM resources WHERE name = ?1", true);
    for (const auto& name : changes.removed) {
      drop.bind(1, name);
      drop.run();
      drop.reset();
    }
  }
  if (!changes.request_ids.empty()) {
    sqlite::Statement put(*db_, "INSERT OR REPLACE INTO request_ids (key, operation) VALUES (?1, ?2)", true);
    for (const auto& [key, operation] : changes.request_ids) {
      put.bind(1, key);
      put.bind(2, operation);
      put.run();
      put.reset();
    }
  }
  transaction.commit();
}

} // namespace jobman::mock
