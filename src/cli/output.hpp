// Rendering for programs (the documented JSON objects) and what several commands share. Text for people (aligned
// tables, colour, a job's status) and the JSON helpers are reporting's, which the reports use too; the commands name
// them unqualified.
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/core/orphans.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/reporting/json.hpp"
#include "jobman/reporting/text.hpp"
#include "jobman/store/job_store.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace jobman::cli {

using reporting::json_or_null;
using reporting::phase_color;
using reporting::printable;
using reporting::progress_text;
using reporting::status_text;
using reporting::Table;
using reporting::text_or_null;

// Appends the documented JSON object for a job (docs/JSON.md) as compact text; `list --json` streams these.
void append_job_json(std::string& out, const domain::JobRecord& job);

// The same object as a document, fields in the documented order.
nlohmann::ordered_json job_json(const domain::JobRecord& job);

// An attempt as JSON.
nlohmann::ordered_json attempt_json(const domain::AttemptRecord& attempt);
// A queued resource raced alongside an attempt's own (tpu.strategy: first-ready), as `show --json` prints it.
nlohmann::ordered_json rival_json(const domain::RivalRecord& rival);
// One finding of bad hardware, as `show --json` prints it.
nlohmann::ordered_json bad_hardware_json(const domain::BadHardwareRecord& finding);

// An event as JSON.
nlohmann::ordered_json event_json(const domain::EventRecord& event);

// An orphaned resource as `sync --json` prints it (docs/JSON.md), its age measured at `now_ms`; `deleted` and `error`
// are added by the command.
nlohmann::ordered_json orphan_json(const core::Orphan& orphan, std::int64_t now_ms);

// A config warning as JSON: {"file", "line", "column", "key", "message"}.
nlohmann::ordered_json warning_json(const config::ConfigWarning& warning);

// "file:line:col: key: message" for a config warning.
std::string format_warning(const config::ConfigWarning& warning);

// The user whose records `--user VALUE` selects, "" meaning everyone's: "all" is everyone's, a name that user's, and
// no value (empty) your own on a store a lab shares (PostgreSQL) or everyone's on your own (SQLite).
std::string user_filter(const store::JobStore& store, const std::string& value);

// The help of --user for list, status and report.
inline constexpr const char* kUserOptionHelp =
    "Whose records: NAME, or 'all' (default: yours on a lab's PostgreSQL store, all on your own SQLite one)";

} // namespace jobman::cli
