// Rendering for people (aligned tables, colour) and for programs (the documented JSON objects).
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/core/orphans.hpp"
#include "jobman/store/job_store.hpp"

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace jobman::cli {

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

// The ANSI colour for a phase in tables; "" for none.
std::string_view phase_color(domain::Phase phase);

// The user whose records `--user VALUE` selects, "" meaning everyone's: "all" is everyone's, a name that user's, and
// no value (empty) your own on a store a lab shares (PostgreSQL) or everyone's on your own (SQLite).
std::string user_filter(const store::JobStore& store, const std::string& value);

// The help of --user for list, status and report.
inline constexpr const char* kUserOptionHelp =
    "Whose records: NAME, or 'all' (default: yours on a lab's PostgreSQL store, all on your own SQLite one)";

// What `list` shows in its STATUS column: the phase, and a pending request when there is one.
std::string status_text(const domain::JobRecord& job);
// The PROGRESS column: "611/2000" when the output gives a total, "step 611" when not, "-" before any step.
std::string progress_text(const domain::JobRecord& job);

// A table with a header row, columns left-aligned and separated by two spaces.
class Table {
public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  // Adds a row; `color` applies to the cell in column `color_column` (-1: none).
  void add_row(std::vector<std::string> cells, std::string_view color = {}, int color_column = -1);
  // Writes the table; colour only when `use_color`.
  void print(std::ostream& out, bool use_color) const;
  // Rows added so far.
  [[nodiscard]] std::size_t size() const { return rows_.size(); }

private:
  struct Row {
    std::vector<std::string> cells;
    std::string color;
    int color_column = -1;
  };
  std::vector<std::string> header_;
  std::vector<Row> rows_;
};

// Display width of UTF-8 text (code points; good enough for names and paths).
std::size_t display_width(std::string_view text);

// Replaces control characters (ESC, CR, C1, newlines, ...) so that stored text cannot drive the terminal.
std::string printable(std::string_view text);

} // namespace jobman::cli
