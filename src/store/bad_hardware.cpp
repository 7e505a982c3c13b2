// The store's memory of bad hardware: when each slice came up and on which machines, and every finding of bad
// hardware, kept beyond its job's life so that a later slice on the same machine is known to be bad; and where slices
// were asked for and how they went (attempts_since), removed jobs' attempts included.
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "store_impl.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace jobman::store {

using domain::BadHardwareRecord;
using sql::Transaction;

namespace {

constexpr std::string_view finding_columns =
    "id, ts_ms, job_id, attempt, zone, accelerator, node, worker, physical_host, signal, detail";

BadHardwareRecord read_finding(const sql::Statement& row) {
  BadHardwareRecord f;
  f.id = row.column_int64(0);
  f.ts_ms = row.column_int64(1);
  f.job_id = row.column_int64(2);
  f.attempt = row.column_int(3);
  f.zone = row.column_text(4);
  f.accelerator = row.column_text(5);
  f.node = row.column_text(6);
  f.worker = row.column_int(7);
  f.physical_host = row.column_text(8);
  f.signal = row.column_text(9);
  f.detail = row.column_text(10);
  return f;
}

} // namespace

void Attempts::record_slice_active(std::int64_t job_id, int number, const std::vector<std::string>& physical_hosts) {
  auto update = impl_->statements.get("UPDATE attempts SET active_ms = COALESCE(active_ms, ?3), physical_hosts = ?4 "
                                      "WHERE job_id = ?1 AND number = ?2");
  update->bind(1, job_id);
  update->bind(2, number);
  update->bind(3, impl_->clock_ms());
  update->bind(4, util::join(physical_hosts, ","));
  update->run();
}

void BadHardware::record(const BadHardwareRecord& finding) {
  const std::int64_t now = impl_->clock_ms();
  Transaction transaction(impl_->db);
  auto insert = impl_->statements.get(
      "INSERT INTO bad_hardware (ts_ms, job_id, attempt, zone, accelerator, node, worker, physical_host, signal, "
      "detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  insert->bind(1, now);
  insert->bind(2, finding.job_id);
  insert->bind(3, finding.attempt);
  insert->bind(4, finding.zone);
  insert->bind(5, finding.accelerator);
  insert->bind(6, finding.node);
  insert->bind(7, finding.worker);
  insert->bind(8, finding.physical_host);
  insert->bind(9, finding.signal);
  insert->bind(10, finding.detail);
  insert->run();
  nlohmann::json data = {{"attempt", finding.attempt},
                         {"zone", finding.zone},
                         {"node", finding.node},
                         {"worker", finding.worker},
                         {"signal", finding.signal}};
  if (!finding.physical_host.empty()) {
    data["physical_host"] = finding.physical_host;
  }
  // Worker -1: the node as a whole (its health said so).
  std::string message = "bad hardware on " +
                        (finding.worker >= 0 ? "worker " + std::to_string(finding.worker) + " of " : std::string()) +
                        finding.node;
  if (!finding.physical_host.empty()) {
    message += " (machine " + finding.physical_host + ")";
  }
  message += ", from its " + finding.signal + ": " + finding.detail;
  impl_->insert_event(finding.job_id, now, "observation", std::nullopt, std::nullopt, message, data.dump());
  transaction.commit();
}

std::vector<BadHardwareRecord> BadHardware::on(const std::vector<std::string>& hosts, std::int64_t since_ms) const {
  std::vector<BadHardwareRecord> found;
  auto query = impl_->statements.get("SELECT " + std::string(finding_columns) +
                                     " FROM bad_hardware WHERE physical_host = ?1 AND ts_ms >= ?2 ORDER BY ts_ms DESC");
  for (const auto& host : hosts) {
    if (host.empty()) {
      continue;
    }
    query->reset();
    query->bind(1, host);
    query->bind(2, since_ms);
    while (query->step()) {
      found.push_back(read_finding(*query));
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.ts_ms > b.ts_ms; });
  return found;
}

std::vector<PlaceRecord> Attempts::since(std::int64_t since_ms, const std::string& zone,
                                         const std::string& accelerator) const {
  // The live attempts, and those of removed jobs (attempt_history keeps only attempts of slices of their own).
  auto query = impl_->statements.get(
      "SELECT zone, accelerator, pricing, outcome, started_ms, active_ms, ended_ms FROM attempts "
      "WHERE started_ms >= ?1 AND worker_id IS NULL AND (?2 = '' OR zone = ?2) AND (?3 = '' OR accelerator = ?3) "
      "UNION ALL "
      "SELECT zone, accelerator, pricing, outcome, started_ms, active_ms, ended_ms FROM attempt_history "
      "WHERE started_ms >= ?1 AND (?2 = '' OR zone = ?2) AND (?3 = '' OR accelerator = ?3) "
      "ORDER BY started_ms");
  query->bind(1, since_ms);
  query->bind(2, zone);
  query->bind(3, accelerator);
  std::vector<PlaceRecord> out;
  while (query->step()) {
    PlaceRecord r;
    r.zone = query->column_text(0);
    r.accelerator = query->column_text(1);
    r.pricing = detail::slice_pricing_column(impl_->db, *query, 2);
    r.outcome = detail::attempt_outcome_column(*query, 3);
    r.started_ms = query->column_int64(4);
    r.active_ms = query->column_optional_int64(5);
    r.ended_ms = query->column_optional_int64(6);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<BadHardwareRecord> BadHardware::of(std::int64_t job_id) const {
  auto query = impl_->statements.get("SELECT " + std::string(finding_columns) +
                                     " FROM bad_hardware WHERE job_id = ?1 ORDER BY id");
  query->bind(1, job_id);
  std::vector<BadHardwareRecord> found;
  while (query->step()) {
    found.push_back(read_finding(*query));
  }
  return found;
}

} // namespace jobman::store
