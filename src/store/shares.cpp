// The store's side of fair share: the slices in flight, the settings that hold the shares, and the policy the store
// applies inside its transactions (see SharePolicy; the arithmetic is core::FairShare's).
#include "jobman/store/shares.hpp"

#include "schema.hpp"
#include "store_impl.hpp"

namespace jobman::store {

std::vector<SliceUse> JobStore::Impl::slices_in_flight() {
  // Slices of their own that jobs and workers hold or asked for: not yet released (an attempt resumed on a kept slice
  // names the slice its predecessor held, counted once), and the rivals of a first-ready race. Tasks hold their
  // worker's slice while they run on it. A record waiting, or whose slice was released, holds nothing.
  static const std::string sql =
      "SELECT user, kind, accelerator, pricing, count(*) FROM ("
      "SELECT DISTINCT jobs.user AS user, jobs.kind AS kind, attempts.job_id AS job_id, attempts.queued_resource AS "
      "slice, attempts.node AS node, attempts.accelerator AS accelerator, attempts.pricing AS pricing FROM attempts "
      "INDEXED BY attempts_unreleased JOIN jobs ON jobs.id = attempts.job_id WHERE attempts.released_ms IS NULL AND "
      "attempts.worker_id IS NULL "
      "UNION ALL SELECT jobs.user, jobs.kind, rivals.job_id, rivals.name, rivals.name, rivals.accelerator, "
      "rivals.pricing FROM rivals INDEXED BY rivals_unreleased JOIN jobs ON jobs.id = rivals.job_id WHERE "
      "rivals.released_ms IS NULL "
      "UNION ALL SELECT jobs.user, jobs.kind, jobs.id, attempts.queued_resource, attempts.node, attempts.accelerator, "
      "attempts.pricing FROM jobs INDEXED BY jobs_unfinished JOIN attempts ON attempts.job_id = jobs.id AND "
      "attempts.number = jobs.attempt WHERE jobs.phase NOT IN " +
      std::string(schema::terminal_phase_list) +
      " AND jobs.kind = 'task' AND jobs.worker_id IS NOT NULL AND attempts.ended_ms IS NULL"
      ") AS held GROUP BY user, kind, accelerator, pricing ORDER BY 1, 2, 3, 4";
  auto query = statements.get(sql);
  std::vector<SliceUse> out;
  while (query->step()) {
    SliceUse use;
    use.user = query->column_text(0);
    use.kind = domain::parse_job_kind(query->column_text_view(1)).value_or(domain::JobKind::job);
    use.accelerator = query->column_text(2);
    use.pricing = detail::slice_pricing_column(db, *query, 3);
    use.count = query->column_int(4);
    out.push_back(std::move(use));
  }
  return out;
}

std::vector<SliceUse> Shares::in_flight() const {
  const sql::ReadTransaction snapshot(impl_->db);
  return impl_->slices_in_flight();
}

void Shares::set_policy(std::shared_ptr<const SharePolicy> policy) {
  impl_->share_policy = std::move(policy);
}

std::map<std::string, std::string> Settings::with_prefix(const std::string& prefix) const {
  auto query = impl_->statements.get("SELECT key, value FROM store_settings WHERE key >= ?1 ORDER BY key");
  query->bind(1, prefix);
  std::map<std::string, std::string> out;
  while (query->step()) {
    auto key = query->column_text(0);
    if (key.compare(0, prefix.size(), prefix) != 0) {
      break;
    }
    if (key != "admins") {
      out.emplace(std::move(key), query->column_text(1));
    }
  }
  return out;
}

bool Settings::put(const std::string& key, const std::optional<std::string>& value) {
  if (key.empty() || key == "admins") {
    throw Error("'" + key + "' is not a setting put_setting changes");
  }
  sql::Transaction transaction(impl_->db);
  if (!impl_->access.may_manage_admins()) {
    throw Error(impl_->identity() + " may not change the settings of " + impl_->db.path() +
                ": the store's owner or an admin may");
  }
  std::optional<std::string> before;
  {
    auto query = impl_->statements.get("SELECT value FROM store_settings WHERE key = ?1");
    query->bind(1, key);
    if (query->step()) {
      before = query->column_text(0);
    }
  }
  if (before == value) {
    transaction.commit();
    return false;
  }
  if (value) {
    auto write = impl_->statements.get("INSERT INTO store_settings (key, value) VALUES (?1, ?2) "
                                       "ON CONFLICT (key) DO UPDATE SET value = excluded.value");
    write->bind(1, key);
    write->bind(2, *value);
    write->run();
  } else {
    auto remove = impl_->statements.get("DELETE FROM store_settings WHERE key = ?1");
    remove->bind(1, key);
    remove->run();
  }
  transaction.commit();
  return true;
}

} // namespace jobman::store
