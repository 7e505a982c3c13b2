// How records read for people: stored text made safe for a terminal, a job's status and progress as `list` shows
// them, the colour of its phase, and tables of aligned columns. The commands and the reports write them alike.
#pragma once

#include "jobman/domain/job.hpp"

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jobman::reporting {

// The ANSI colour for a phase in tables; "" for none.
std::string_view phase_color(domain::Phase phase);

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

// A CSV field: `text` as it is, or in double quotes (its own doubled) when it has a comma, a quote or a line break.
std::string csv_quote(const std::string& text);

// Replaces control characters (ESC, CR, C1, newlines, ...) so that stored text cannot drive the terminal.
std::string printable(std::string_view text);

} // namespace jobman::reporting
