// Who may act on whose records in the store: the admins.
#pragma once

#include "jobman/store/job_store.hpp"

#include <string>
#include <vector>

namespace jobman::store {

class Access : public StoreView {
public:
  using StoreView::StoreView;

  // The store's admins (its `admins` setting): they may cancel, delete and clean every user's jobs and tasks.
  [[nodiscard]] std::vector<std::string> admins() const;
  // Adds `name` to the admins (true) or removes it (false); returns whether the list changed. Throws
  // jobman::Error unless JobStore::identity() may manage them (may_manage_admins).
  bool set_admin(const std::string& name, bool admin);
  // On PostgreSQL, the schema's owner or an admin; on SQLite, anyone (the store is one user's).
  [[nodiscard]] bool may_manage_admins() const;
  // Whether JobStore::identity() may cancel, delete or clean a record of `owner`: its own, any as an admin, and any
  // on a SQLite store (one user's).
  [[nodiscard]] bool may_act_on(const std::string& owner) const;
};

} // namespace jobman::store
