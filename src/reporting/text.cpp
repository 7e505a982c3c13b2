#include "jobman/reporting/text.hpp"

#include "jobman/util/strings.hpp"

#include <algorithm>

namespace jobman::reporting {

namespace {

constexpr std::string_view kReset = "\x1b[0m";
constexpr std::string_view kBold = "\x1b[1m";

} // namespace

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
  if (job.phase == domain::Phase::recovering && job.phase_reason.starts_with(domain::kRunEndedReason)) {
    text += " (run ended)";
  }
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

std::string progress_text(const domain::JobRecord& job) {
  if (!job.progress) {
    return "-";
  }
  if (job.step_total && *job.step_total > 0) {
    return std::to_string(job.progress->step) + "/" + std::to_string(*job.step_total);
  }
  return "step " + std::to_string(job.progress->step);
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

std::string csv_quote(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) {
    return text;
  }
  std::string quoted = "\"";
  for (const char c : text) {
    quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  }
  return quoted + "\"";
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

} // namespace jobman::reporting
