#include "output.hpp"

#include "jobman/util/json_text.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <cstdio>

namespace jobman::cli {

namespace {

nlohmann::ordered_json time_or_null(std::optional<std::int64_t> ms) {
  if (!ms) {
    return nullptr;
  }
  return util::format_utc(*ms);
}

} // namespace

void append_job_json(std::string& out, const domain::JobRecord& job) {
  util::JsonObjectWriter w(out);
  w.field("id", job.id)
      .field("name", job.name)
      .field("user", job.user)
      .field("accelerator", job.accelerator)
      .field("zone", job.zone)
      .field("pricing", job.pricing ? domain::to_string(*job.pricing) : std::string())
      .field("hosts", std::int64_t{job.hosts})
      .field("tpu_name", job.tpu_name)
      .field("status", domain::to_string(job.phase))
      .field("desired", domain::to_string(job.desired))
      .field("reason", job.phase_reason)
      .field("attempt", std::int64_t{job.attempt})
      .field("preemptions", std::int64_t{job.preemptions})
      .field("failures", std::int64_t{job.failures})
      .field("bad_hardware", std::int64_t{job.bad_hardware})
      .field_or_null("host0_ip", job.host0_ip)
      .field("exit_code", job.exit_code ? std::optional<std::int64_t>(*job.exit_code) : std::nullopt)
      .field("created_at", util::format_utc(job.created_ms))
      .field("updated_at", util::format_utc(job.updated_ms))
      .field("status_since", util::format_utc(job.phase_since_ms))
      .field_or_null("finished_at", job.finished_ms ? util::format_utc(*job.finished_ms) : std::string())
      .field_or_null("config_path", job.config_path)
      .field_or_null("sweep", job.sweep_label)
      .field("kind", domain::to_string(job.kind))
      .field("step", job.progress ? std::optional<std::int64_t>(job.progress->step) : std::nullopt)
      .field("step_total", job.step_total)
      .field_or_null("step_at", job.progress ? util::format_utc(job.progress->at_ms) : std::string());
  w.close();
}

nlohmann::ordered_json orphan_json(const core::Orphan& orphan, std::int64_t now_ms) {
  nlohmann::ordered_json out;
  out["kind"] = core::to_string(orphan.kind);
  out["name"] = orphan.name;
  out["zone"] = orphan.zone;
  out["state"] = orphan.state;
  out["created_at"] = time_or_null(orphan.created_ms);
  const auto age = orphan.age_ms(now_ms);
  out["age_seconds"] = json_or_null(age ? std::optional<std::int64_t>(*age / 1000) : std::nullopt);
  out["job_id"] = json_or_null(orphan.job_id);
  out["owner"] = orphan.owner;
  out["attempt"] = json_or_null(util::parse_int(orphan.attempt));
  out["nodes"] = orphan.nodes;
  return out;
}

nlohmann::ordered_json job_json(const domain::JobRecord& job) {
  // One writer for the documented object, so `list --json` and `show --json` cannot disagree.
  std::string text;
  append_job_json(text, job);
  return nlohmann::ordered_json::parse(text);
}

nlohmann::ordered_json attempt_json(const domain::AttemptRecord& attempt) {
  nlohmann::ordered_json j;
  j["number"] = attempt.number;
  j["queued_resource"] = text_or_null(attempt.queued_resource); // null for a node created directly (tpu-vm)
  j["node"] = attempt.node;
  j["zone"] = attempt.zone;
  j["started_at"] = util::format_utc(attempt.started_ms);
  j["ended_at"] = time_or_null(attempt.ended_ms);
  j["outcome"] = text_or_null(std::string(domain::to_string(attempt.outcome)));
  j["exit_code"] = json_or_null(attempt.exit_code);
  j["worker_id"] = json_or_null(attempt.worker_id);
  j["active_at"] = time_or_null(attempt.active_ms);
  j["accelerator"] = attempt.accelerator;
  j["pricing"] = domain::to_string(attempt.pricing);
  j["physical_hosts"] = attempt.physical_hosts;
  return j;
}

nlohmann::ordered_json rival_json(const domain::RivalRecord& rival) {
  nlohmann::ordered_json j;
  j["queued_resource"] = rival.name;
  j["zone"] = rival.zone;
  j["accelerator"] = rival.accelerator;
  j["pricing"] = domain::to_string(rival.pricing);
  j["requested_at"] = util::format_utc(rival.requested_ms);
  j["released_at"] = time_or_null(rival.released_ms);
  j["outcome"] = text_or_null(std::string(domain::to_string(rival.outcome)));
  return j;
}

nlohmann::ordered_json bad_hardware_json(const domain::BadHardwareRecord& finding) {
  nlohmann::ordered_json j;
  j["time"] = util::format_utc(finding.ts_ms);
  j["attempt"] = finding.attempt;
  j["zone"] = finding.zone;
  j["accelerator"] = finding.accelerator;
  j["node"] = finding.node;
  j["worker"] = finding.worker;
  j["physical_host"] = text_or_null(finding.physical_host);
  j["signal"] = finding.signal;
  j["detail"] = finding.detail;
  return j;
}

nlohmann::ordered_json event_json(const domain::EventRecord& event) {
  nlohmann::ordered_json j;
  j["id"] = event.id;
  j["time"] = util::format_utc(event.ts_ms);
  j["time_ms"] = event.ts_ms;
  j["kind"] = event.kind;
  j["message"] = event.message;
  j["from"] = text_or_null(event.from ? std::string(domain::to_string(*event.from)) : std::string());
  j["to"] = text_or_null(event.to ? std::string(domain::to_string(*event.to)) : std::string());
  if (!event.data_json.empty()) {
    j["data"] = nlohmann::ordered_json::parse(event.data_json, nullptr, false);
  } else {
    j["data"] = nullptr;
  }
  return j;
}

nlohmann::ordered_json warning_json(const config::ConfigWarning& warning) {
  nlohmann::ordered_json j;
  j["file"] = warning.where.file;
  j["line"] = warning.where.line;
  j["column"] = warning.where.column;
  j["key"] = warning.where.key_path;
  j["message"] = warning.message;
  return j;
}

std::string format_warning(const config::ConfigWarning& warning) {
  Diagnostic d{warning.where, warning.message, {}};
  return d.format();
}

std::string user_filter(const store::JobStore& store, const std::string& value) {
  if (value == "all") {
    return "";
  }
  if (value.empty()) {
    return store.on_postgres() ? store.identity() : "";
  }
  return value;
}

} // namespace jobman::cli
