// Who acts on a store, and who may act on everyone's jobs: the identity and the admins.
#include "jobman/util/system.hpp"
#include "store_impl.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace jobman::store {

namespace {

std::vector<std::string> read_admins(sql::Connection& db, sql::StatementCache& statements) {
  auto query = statements.get("SELECT value FROM store_settings WHERE key = 'admins'");
  if (!query->step()) {
    return {};
  }
  const auto list = nlohmann::json::parse(query->column_text_view(0), nullptr, false);
  if (!list.is_array()) {
    throw Error(db.path() + ": the admins setting is not a list");
  }
  std::vector<std::string> names;
  for (const auto& name : list) {
    if (name.is_string()) {
      names.push_back(name.get<std::string>());
    }
  }
  return names;
}

} // namespace

std::vector<std::string> Jobs::users() const {
  auto query = impl_->statements.get("SELECT DISTINCT user FROM jobs ORDER BY user");
  std::vector<std::string> out;
  while (query->step()) {
    out.push_back(query->column_text(0));
  }
  return out;
}

const std::string& JobStore::Impl::identity() {
  if (identity_name.empty()) {
    identity_name =
        db.dialect() == sql::Dialect::postgresql ? db.query_text("SELECT current_user") : util::current_user();
  }
  return identity_name;
}

const std::string& JobStore::identity() const {
  return impl_->identity();
}

std::vector<std::string> Access::admins() const {
  return read_admins(impl_->db, impl_->statements);
}

bool Access::may_manage_admins() const {
  if (impl_->db.dialect() != sql::Dialect::postgresql) {
    return true;
  }
  const bool owner = impl_->db.query_int("SELECT count(*) FROM pg_namespace WHERE nspname = current_schema() AND "
                                         "pg_has_role(current_user, nspowner, 'USAGE')") > 0;
  if (owner) {
    return true;
  }
  const auto names = admins();
  return std::find(names.begin(), names.end(), impl_->identity()) != names.end();
}

bool Access::may_act_on(const std::string& owner) const {
  if (impl_->db.dialect() != sql::Dialect::postgresql || owner == impl_->identity()) {
    return true;
  }
  const auto names = admins();
  return std::find(names.begin(), names.end(), impl_->identity()) != names.end();
}

bool Access::set_admin(const std::string& name, bool admin) {
  if (name.empty()) {
    throw Error("an admin needs a name");
  }
  sql::Transaction transaction(impl_->db);
  if (!may_manage_admins()) {
    throw Error(impl_->identity() + " may not change the admins of " + impl_->db.path() +
                ": the store's owner or an admin may");
  }
  auto names = read_admins(impl_->db, impl_->statements);
  const auto at = std::find(names.begin(), names.end(), name);
  if ((at != names.end()) == admin) {
    transaction.commit();
    return false;
  }
  if (admin) {
    names.push_back(name);
  } else {
    names.erase(at);
  }
  auto write = impl_->statements.get("INSERT INTO store_settings (key, value) VALUES ('admins', ?1) "
                                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value");
  write->bind(1, nlohmann::json(names).dump());
  write->run();
  transaction.commit();
  return true;
}

} // namespace jobman::store
