// The store's rivals: queued resources requested alongside an attempt's own (tpu.strategy: first-ready), the first of
// which to come up becomes the attempt's slice.
#include "jobman/domain/job.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "store_impl.hpp"

#include <nlohmann/json.hpp>

namespace jobman::store {

using detail::throw_no_such_job;
using domain::RivalRecord;
using sql::Transaction;

AttemptRecord Rivals::begin_race(std::int64_t job_id, const Placement& where, const std::vector<Placement>& rivals) {
  const std::int64_t now = impl_->clock_ms();
  Transaction transaction(impl_->db);
  auto attempt = impl_->insert_attempt(job_id, where, true, now);
  impl_->check_driving(job_id);
  std::vector<std::string> names;
  for (const auto& rival : rivals) {
    // A rival that names no pricing asks in the attempt's.
    const std::string stored = domain::to_string(rival.pricing.value_or(attempt.pricing));
    auto insert = impl_->statements.get("INSERT INTO rivals (job_id, attempt, name, zone, accelerator, hosts, pricing, "
                                        "requested_ms) VALUES (?1, ?2, ?3, "
                                        "?4, ?5, ?6, ?7, ?8)");
    insert->bind(1, job_id);
    insert->bind(2, attempt.number);
    insert->bind(3, rival.queued_resource);
    insert->bind(4, rival.zone);
    insert->bind(5, rival.accelerator);
    insert->bind(6, rival.hosts);
    insert->bind(7, stored);
    insert->bind(8, now);
    insert->run();
    names.push_back(rival.accelerator + " " + stored + " in " + rival.zone + " (" + rival.queued_resource + ")");
  }
  if (!rivals.empty()) {
    impl_->insert_event(job_id, now, "action", std::nullopt, std::nullopt,
                        "attempt " + std::to_string(attempt.number) + " races " + std::to_string(rivals.size() + 1) +
                            " requests: also " + util::join(names, ", "),
                        nlohmann::json{{"attempt", attempt.number}, {"rivals", rivals.size()}}.dump());
  }
  transaction.commit();
  return attempt;
}

std::vector<RivalRecord> Rivals::of(std::int64_t job_id, std::optional<int> attempt) const {
  auto query = impl_->statements.get(
      "SELECT job_id, attempt, name, zone, accelerator, hosts, pricing, requested_ms, create_pending, released_ms, "
      "outcome FROM rivals WHERE job_id = ?1 AND (?2 IS NULL OR attempt = ?2) ORDER BY attempt, requested_ms, name");
  query->bind(1, job_id);
  query->bind(2, attempt);
  std::vector<RivalRecord> out;
  while (query->step()) {
    RivalRecord r;
    r.job_id = query->column_int64(0);
    r.attempt = query->column_int(1);
    r.name = query->column_text(2);
    r.zone = query->column_text(3);
    r.accelerator = query->column_text(4);
    r.hosts = query->column_int(5);
    r.pricing = detail::slice_pricing_column(impl_->db, *query, 6);
    r.requested_ms = query->column_int64(7);
    r.create_pending = query->column_int(8) != 0;
    r.released_ms = query->column_optional_int64(9);
    r.outcome = detail::rival_outcome_column(*query, 10);
    out.push_back(std::move(r));
  }
  return out;
}

void Rivals::confirm_created(std::int64_t job_id, const std::string& name) {
  auto update = impl_->statements.get(
      "UPDATE rivals SET create_pending = 0 WHERE job_id = ?1 AND name = ?2 AND create_pending = 1");
  update->bind(1, job_id);
  update->bind(2, name);
  update->run();
  if (impl_->db.changes() == 0 && !impl_->job_exists(job_id)) {
    throw_no_such_job(job_id);
  }
}

void Rivals::end(std::int64_t job_id, const std::string& name, domain::RivalOutcome outcome) {
  auto update =
      impl_->statements.get("UPDATE rivals SET outcome = ?3 WHERE job_id = ?1 AND name = ?2 AND outcome = ''");
  update->bind(1, job_id);
  update->bind(2, name);
  update->bind(3, domain::to_string(outcome));
  update->run();
}

void Rivals::promote(std::int64_t job_id, int number, const std::string& name, domain::RivalOutcome outcome,
                     const std::string& why) {
  const std::int64_t now = impl_->clock_ms();
  Transaction transaction(impl_->db);
  impl_->check_driving(job_id);
  // Where the attempt asked until now, and where the rival did. Their pricings change places as the store spells them.
  Placement old;
  std::string old_pricing;
  bool old_pending = false;
  std::int64_t started = 0;
  {
    auto read =
        impl_->statements.get("SELECT queued_resource, node, zone, accelerator, hosts, pricing, create_pending, "
                              "started_ms FROM attempts WHERE job_id = ?1 AND number = ?2");
    read->bind(1, job_id);
    read->bind(2, number);
    if (!read->step()) {
      if (!impl_->job_exists(job_id)) {
        throw_no_such_job(job_id);
      }
      throw Error("job " + domain::format_job_id(job_id) + " has no attempt " + std::to_string(number));
    }
    old.queued_resource = read->column_text(0).empty() ? read->column_text(1) : read->column_text(0);
    old.zone = read->column_text(2);
    old.accelerator = read->column_text(3);
    old.hosts = read->column_int(4);
    old_pricing = read->column_text(5);
    old_pending = read->column_int(6) != 0;
    started = read->column_int64(7);
  }
  Placement won;
  std::string won_pricing;
  bool pending = false;
  {
    auto rival = impl_->statements.get("SELECT zone, accelerator, hosts, pricing, create_pending FROM rivals WHERE "
                                       "job_id = ?1 AND name = ?2 AND attempt = ?3 AND released_ms IS NULL");
    rival->bind(1, job_id);
    rival->bind(2, name);
    rival->bind(3, number);
    if (!rival->step()) {
      throw Error("job " + domain::format_job_id(job_id) + " has no rival " + name + " racing for attempt " +
                  std::to_string(number));
    }
    won.zone = rival->column_text(0);
    won.accelerator = rival->column_text(1);
    won.hosts = rival->column_int(2);
    won_pricing = rival->column_text(3);
    pending = rival->column_int(4) != 0;
  }
  {
    auto update = impl_->statements.get(
        "UPDATE attempts SET queued_resource = ?3, node = ?3, zone = ?4, accelerator = ?5, hosts = ?6, pricing = ?7, "
        "create_pending = ?8 WHERE job_id = ?1 AND number = ?2");
    update->bind(1, job_id);
    update->bind(2, number);
    update->bind(3, name);
    update->bind(4, won.zone);
    update->bind(5, won.accelerator);
    update->bind(6, won.hosts);
    update->bind(7, won_pricing);
    update->bind(8, pending ? 1 : 0);
    update->run();
  }
  {
    // The row of the rival that came up now holds the attempt's former slice, left to be deleted.
    auto update = impl_->statements.get(
        "UPDATE rivals SET name = ?3, zone = ?4, accelerator = ?5, hosts = ?6, pricing = ?7, create_pending = ?8, "
        "requested_ms = ?9, outcome = ?10 WHERE job_id = ?1 AND name = ?2");
    update->bind(1, job_id);
    update->bind(2, name);
    update->bind(3, old.queued_resource);
    update->bind(4, old.zone);
    update->bind(5, old.accelerator);
    update->bind(6, old.hosts);
    update->bind(7, old_pricing);
    update->bind(8, old_pending ? 1 : 0);
    update->bind(9, started);
    update->bind(10, domain::to_string(outcome));
    update->run();
  }
  impl_->insert_event(job_id, now, "attempt", std::nullopt, std::nullopt, why,
                      nlohmann::json{{"attempt", number},
                                     {"queued_resource", name},
                                     {"zone", won.zone},
                                     {"accelerator", won.accelerator},
                                     {"pricing", won_pricing},
                                     {"replaces", old.queued_resource}}
                          .dump());
  transaction.commit();
}

} // namespace jobman::store
