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

nlohmann::ordered_json text_or_null(const std::string& text) {
  if (text.empty()) {
    return nullptr;
  }
  return text;
}

constexpr std::string_view kReset = "\x1b[0m";
constexpr std::string_view kBold = "\x1b[1m";

} // namespace

void append_job_json(std::string& out, const domain::JobRecord& job) {
  util::JsonObjectWriter w(out);
  w.field("id", job.id)
      .field("name", job.name)
      .field("user", job.user)
      .field("accelerator", job.accelerator)
      .field("zone", job.zone)
      .field("pricing", job.pricing)
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

std::string progress_text(const domain::JobRecord& job) {
  if (!job.progress) {
    return "-";
  }
  if (job.step_total && *job.step_total > 0) {
    return std::to_string(job.progress->step) + "/" + std::to_string(*job.step_total);
  }
  return "step " + std::to_string(job.progress->step);
}

nlohmann::ordered_json orphan_json(const core::Orphan& orphan, std::int64_t now_ms) {
  nlohmann::ordered_json out;
  out["kind"] = core::to_string(orphan.kind);
  out["name"] = orphan.name;
  out["zone"] = orphan.zone;
  out["state"] = orphan.state;
  out["created_at"] = time_or_null(orphan.created_ms);
  const auto age = orphan.age_ms(now_ms);
  out["age_seconds"] = age ? nlohmann::ordered_json(*age / 1000) : nlohmann::ordered_json(nullptr);
  out["job_id"] = orphan.job_id ? nlohmann::ordered_json(*orphan.job_id) : nlohmann::ordered_json(nullptr);
  out["owner"] = orphan.owner;
  const auto attempt = util::parse_int(orphan.attempt);
  out["attempt"] = attempt ? nlohmann::ordered_json(*attempt) : nlohmann::ordered_json(nullptr);
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
  return {
      {"number", attempt.number},
      {"queued_resource", text_or_null(attempt.queued_resource)}, // null for a node created directly (tpu-vm)
      {"node", attempt.node},
      {"zone", attempt.zone},
      {"started_at", util::format_utc(attempt.started_ms)},
      {"ended_at", time_or_null(attempt.ended_ms)},
      {"outcome", text_or_null(attempt.outcome)},
      {"exit_code", attempt.exit_code ? nlohmann::ordered_json(*attempt.exit_code) : nlohmann::ordered_json(nullptr)},
      {"worker_id", attempt.worker_id ? nlohmann::ordered_json(*attempt.worker_id) : nlohmann::ordered_json(nullptr)},
      {"active_at", time_or_null(attempt.active_ms)},
      {"accelerator", attempt.accelerator},
      {"pricing", attempt.pricing},
      {"physical_hosts", attempt.physical_hosts},
  };
}

nlohmann::ordered_json rival_json(const domain::RivalRecord& rival) {
  return {
      {"queued_resource", rival.name},
      {"zone", rival.zone},
      {"accelerator", rival.accelerator},
      {"pricing", rival.pricing},
      {"requested_at", util::format_utc(rival.requested_ms)},
      {"released_at", time_or_null(rival.released_ms)},
      {"outcome", text_or_null(rival.outcome)},
  };
}

nlohmann::ordered_json bad_hardware_json(const domain::BadHardwareRecord& finding) {
  return {
      {"time", util::format_utc(finding.ts_ms)},
      {"attempt", finding.attempt},
      {"zone", finding.zone},
      {"accelerator", finding.accelerator},
      {"node", finding.node},
      {"worker", finding.worker},
      {"physical_host", text_or_null(finding.physical_host)},
      {"signal", finding.signal},
      {"detail", finding.detail},
  };
}

nlohmann::ordered_json event_json(const domain::EventRecord& event) {
  nlohmann::ordered_json j = {
      {"id", event.id},           {"time", util::format_utc(event.ts_ms)},
      {"time_ms", event.ts_ms},   {"kind", event.kind},
      {"message", event.message},
  };
  j["from"] = event.from ? nlohmann::ordered_json(std::string(domain::to_string(*event.from)))
                         : nlohmann::ordered_json(nullptr);
  j["to"] =
      event.to ? nlohmann::ordered_json(std::string(domain::to_string(*event.to))) : nlohmann::ordered_json(nullptr);
  if (!event.data_json.empty()) {
    j["data"] = nlohmann::ordered_json::parse(event.data_json, nullptr, false);
  } else {
    j["data"] = nullptr;
  }
  return j;
}

nlohmann::ordered_json warning_json(const config::ConfigWarning& warning) {
  return {
      {"file", warning.where.file},    {"line", warning.where.line}, {"column", warning.where.column},
      {"key", warning.where.key_path}, {"message", warning.message},
  };
}

std::string format_warning(const config::ConfigWarning& warning) {
  Diagnostic d{warning.where, warning.message, {}};
  return d.format();
}

std::string_view phase_color(domain::Phase phase) {
  using domain::Phase;
  switch (phase) {
  case Phase::pending: return "";
  case Phase::queued:
  case Phase::provisioning: return "\x1b[33m"; // yellow
  case Phase::setup: return "\x1b[36m";        // cyan
  case Phase::running: return "\x1b[36;1m";    // bright cyan
  case Phase::recovering: return "\x1b[35m";   // magenta
  case Phase::succeeded: return "\x1b[32m";    // green
  case Phase::failed: return "\x1b[31;1m";     // bright red
  case Phase::cancelled:
  case Phase::deleted: return "\x1b[2m"; // dim
  }
  return "";
}

std::string status_text(const domain::JobRecord& job) {
  std::string text(domain::to_string(job.phase));
  if (job.cleanup_pending && job.desired != domain::DesiredState::remove &&
      job.desired != domain::DesiredState::clean) {
    text += " (releasing slice)";
  }
  if (domain::is_terminal(job.phase) && job.desired == domain::DesiredState::stop) {
    return text;
  }
  if (job.desired != domain::DesiredState::run &&
      !(job.phase == domain::Phase::deleted && job.desired == domain::DesiredState::remove)) {
    text += " (" + std::string(domain::to_string(job.desired)) + " requested)";
  }
  return text;
}

std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (const char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0U) != 0x80U) {
      ++width;
    }
  }
  return width;
}

std::string printable(std::string_view text) {
  return util::escape_controls(text, util::LineBreaks::escape);
}

void Table::add_row(std::vector<std::string> cells, std::string_view color, int color_column) {
  rows_.push_back(Row{std::move(cells), std::string(color), color_column});
}

void Table::print(std::ostream& out, bool use_color) const {
  std::vector<std::size_t> widths(header_.size(), 0);
  for (std::size_t c = 0; c < header_.size(); ++c) {
    widths[c] = display_width(header_[c]);
  }
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.cells.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], display_width(row.cells[c]));
    }
  }
  std::string line;
  const auto emit = [&](const std::vector<std::string>& cells, std::string_view color, int color_column) {
    line.clear();
    for (std::size_t c = 0; c < cells.size() && c < widths.size(); ++c) {
      const bool last = c + 1 == cells.size();
      const bool colored = use_color && !color.empty() && static_cast<int>(c) == color_column;
      if (colored) {
        line += color;
      }
      line += cells[c];
      if (colored) {
        line += kReset;
      }
      if (!last) {
        line.append(widths[c] - display_width(cells[c]) + 2, ' ');
      }
    }
    line += '\n';
    out << line;
  };
  if (use_color) {
    out << kBold;
  }
  emit(header_, {}, -1);
  if (use_color) {
    out << kReset;
  }
  for (const auto& row : rows_) {
    emit(row.cells, row.color, row.color_column);
  }
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
