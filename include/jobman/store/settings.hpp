// The store's settings (its store_settings table): what a lab sets once for everyone, such as fair shares.
#pragma once

#include "jobman/store/job_store.hpp"

#include <map>
#include <optional>
#include <string>

namespace jobman::store {

class Settings : public StoreView {
public:
  using StoreView::StoreView;

  // The settings whose keys begin with `prefix`, by key; "admins" is not one (Access::admins).
  [[nodiscard]] std::map<std::string, std::string> with_prefix(const std::string& prefix) const;
  // Sets `key` to `value`, or removes it (nullopt); returns whether it changed. Throws jobman::Error unless
  // JobStore::identity() may manage the store (Access::may_manage_admins), and for "admins" (Access::set_admin
  // changes that).
  bool put(const std::string& key, const std::optional<std::string>& value);
};

} // namespace jobman::store
