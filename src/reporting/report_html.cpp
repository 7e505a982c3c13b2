// The HTML report: one file that opens from disk with no network (inline CSS, inline SVG, no script), a timeline per
// job with its phases in colour and its preemptions and bad hardware marked, the goodput and cost tables, and the
// zones'. Every stored text is escaped, control characters first made visible as the terminal shows them.
#include "jobman/core/bucket_transfers.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/reporting/report.hpp"
#include "jobman/reporting/text.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

namespace jobman::reporting {

namespace {

// The tables list every job up to kMaxRows; timelines are drawn for the newest kHtmlTimelines.
constexpr std::size_t kMaxRows = 5000;
constexpr double kTimelineWidth = 900;
constexpr double kBarTop = 6;
constexpr double kBarHeight = 22;

} // namespace

std::string html_escape(std::string_view raw) {
  const std::string text = printable(raw);
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\'': out += "&#39;"; break;
    default: out += c;
    }
  }
  return out;
}

const char* bucket_colour(core::Bucket bucket) {
  switch (bucket) {
  case core::Bucket::queued: return "#9fb3c8";
  case core::Bucket::provisioning: return "#f0b429";
  case core::Bucket::setup: return "#62b0e8";
  case core::Bucket::productive: return "#27ab83";
  case core::Bucket::lost: return "#e12d39";
  case core::Bucket::recovering: return "#f9703e";
  case core::Bucket::bad_hardware: return "#8719e0";
  case core::Bucket::run_end: return "#3a66db";
  case core::Bucket::idle: return "#d9e2ec";
  }
  return "#d9e2ec";
}

namespace {

const char* kStyle = R"css(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #102a43; margin: 24px 32px;
       background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #d9e2ec; padding-bottom: 4px; }
.sub { color: #627d98; margin-bottom: 16px; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; margin: 12px 0 8px; }
.card { border: 1px solid #d9e2ec; border-radius: 6px; padding: 10px 16px; min-width: 140px; }
.card .v { font-size: 24px; font-weight: 600; }
.card .k { color: #627d98; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.legend span { display: inline-block; margin-right: 14px; font-size: 12px; }
.legend i { display: inline-block; width: 12px; height: 12px; border-radius: 2px; vertical-align: -2px;
            margin-right: 4px; }
table { border-collapse: collapse; margin: 6px 0 4px; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 10px; border-bottom: 1px solid #f0f4f8; text-align: right; white-space: nowrap; }
th { background: #f0f4f8; font-weight: 600; font-size: 12px; color: #334e68; }
td.l, th.l { text-align: left; }
.job { margin: 14px 0 18px; }
.job .t { font-weight: 600; }
.job .m { color: #627d98; font-size: 12px; }
.note { color: #627d98; font-size: 12px; }
.st-SUCCEEDED { color: #147d64; } .st-FAILED { color: #ab091e; } .st-RUNNING { color: #0967d2; }
.st-CANCELLED, .st-DELETED { color: #829ab1; }
svg text { font: 11px system-ui, sans-serif; fill: #486581; }
.table-wrap { overflow-x: auto; }
table.per-job { font-size: 13px; }
table.per-job th, table.per-job td { padding: 4px 5px; }
table.per-job th { vertical-align: bottom; }
table.per-job th.wrap { white-space: normal; max-width: 6.5em; }
table.per-job td.job-name { max-width: 14em; overflow: hidden; text-overflow: ellipsis; }
table.per-job .split { border-left: 1px solid #d9e2ec; }
table.compare th { white-space: normal; vertical-align: bottom; max-width: 6.5em; }
table.compare td.name { max-width: 16em; overflow: hidden; text-overflow: ellipsis; }
table.compare td.best { font-weight: 700; color: #147d64; }
table.compare tr.next td { border-top: 1px solid #bcccdc; }
)css";

void cards(std::ostream& out, const Report& report, const config::PriceTable& prices) {
  double chip_hours = 0;
  for (const auto& [key, group] : report.by_kind) {
    chip_hours += group.chip_hours;
  }
  const auto card = [&](const std::string& value, const std::string& key) {
    out << "<div class=\"card\"><div class=\"v\">" << html_escape(value) << "</div><div class=\"k\">"
        << html_escape(key) << "</div></div>";
  };
  out << "<div class=\"cards\">";
  card(percent_text(report.goodput()), "goodput");
  card(span_text(report.ms[static_cast<std::size_t>(core::Bucket::productive)]) + " / " + span_text(report.wall_ms()),
       "productive / wall time");
  card(decimal(chip_hours, chip_hours < 10 ? 2 : 1), "chip-hours");
  card("~" + money(report.cost, prices), "cost (estimate)");
  card(std::to_string(report.jobs), report.jobs == 1 ? "job" : "jobs");
  out << "</div>\n";
}

} // namespace

std::string place_of(const domain::JobRecord& job) {
  std::string place = job.accelerator;
  if (job.pricing) {
    place += " " + domain::to_string(*job.pricing);
  }
  return place + (job.zone.empty() ? std::string(" in any zone") : " in " + job.zone);
}

std::string_view report_style() {
  return kStyle;
}

void write_timeline_legend(std::ostream& out) {
  out << "<div class=\"legend\">";
  for (const auto bucket : core::all_buckets()) {
    out << "<span><i style=\"background:" << bucket_colour(bucket) << "\"></i>" << core::to_string(bucket) << "</span>";
  }
  out << "<span>&#9660; preemption</span><span>&#10006; bad hardware</span><span>&#9679; other ending</span></div>\n";
}

void write_job_timeline(std::ostream& out, const ReportRow& row) {
  const auto& account = row.account;
  if (account.timeline.empty()) {
    out << "<div class=\"note\">no time recorded yet</div>\n";
    return;
  }
  const std::int64_t start = account.timeline.front().from_ms;
  const std::int64_t end = std::max(account.timeline.back().to_ms, start + 1);
  const double scale = kTimelineWidth / static_cast<double>(end - start);
  const auto x = [&](std::int64_t ms) { return decimal(static_cast<double>(ms - start) * scale, 2); };
  out << "<svg width=\"" << kTimelineWidth + 20 << "\" height=\"52\" viewBox=\"-10 0 " << kTimelineWidth + 20
      << " 52\" role=\"img\" aria-label=\"timeline of job " << domain::format_job_id(row.job.id) << "\">";
  for (const auto& s : account.timeline) {
    const double width = std::max(static_cast<double>(s.to_ms - s.from_ms) * scale, 0.5);
    out << "<rect x=\"" << x(s.from_ms) << "\" y=\"" << kBarTop << "\" width=\"" << decimal(width, 2) << "\" height=\""
        << kBarHeight << "\" fill=\"" << bucket_colour(s.bucket) << "\"><title>" << core::to_string(s.bucket) << ": "
        << span_text(s.to_ms - s.from_ms) << " (" << domain::to_string(s.phase) << ", attempt " << s.attempt << ", "
        << html_escape(util::format_local(s.from_ms)) << ")</title></rect>";
  }
  for (const auto& m : account.marks) {
    if (m.at_ms < start || m.at_ms > end) {
      continue;
    }
    const std::string at = x(m.at_ms);
    const std::string title = "<title>attempt " + std::to_string(m.attempt) + " " +
                              html_escape(std::string(domain::to_string(m.what))) + " at " +
                              html_escape(util::format_local(m.at_ms)) + "</title>";
    if (m.what == domain::AttemptOutcome::preempted) {
      out << "<path d=\"M" << at << " " << kBarTop << " l-5 -6 h10 z\" fill=\"#102a43\">" << title << "</path>";
    } else if (domain::is_bad_slice(m.what)) {
      out << "<text x=\"" << at << "\" y=\"" << kBarTop + kBarHeight / 2 + 4
          << "\" text-anchor=\"middle\" style=\"fill:#fff;font-weight:700\">&#10006;" << title << "</text>";
    } else {
      out << "<circle cx=\"" << at << "\" cy=\"" << kBarTop - 2 << "\" r=\"3\" fill=\"#334e68\">" << title
          << "</circle>";
    }
  }
  out << "<text x=\"0\" y=\"46\">" << html_escape(util::format_local(start)) << "</text><text x=\"" << kTimelineWidth
      << "\" y=\"46\" text-anchor=\"end\">" << html_escape(util::format_local(end)) << " (" << span_text(end - start)
      << ")</text></svg>\n";
}

namespace {

// A bucket's name as a column header, with soft hyphens where a long one may break ("provision-" "ing"), so that its
// column is as narrow as its figures.
std::string bucket_header(core::Bucket bucket) {
  switch (bucket) {
  case core::Bucket::provisioning: return "provision&shy;ing";
  case core::Bucket::productive: return "produc&shy;tive";
  case core::Bucket::recovering: return "recover&shy;ing";
  default: return std::string(core::to_string(bucket));
  }
}

// One row per job: what it is and what it cost first, then where its time went, bucket by bucket. It fits a window
// 1400 px wide (a long name is cut short, whole in its tooltip); a narrower one scrolls the table, not the page.
void jobs_table(std::ostream& out, const Report& report, const config::PriceTable& prices) {
  out << "<div class=\"table-wrap\"><table class=\"per-job\"><tr><th class=\"l\">job</th><th class=\"l\">name</th>"
         "<th class=\"l\">status</th><th>wall</th><th>goodput</th><th>chip-hours</th><th>cost</th>";
  bool first = true;
  for (const auto bucket : core::all_buckets()) {
    // The bucket's colour is a bar over its header, which leaves the header's words free to wrap.
    out << "<th class=\"wrap" << (first ? " split" : "") << "\" style=\"border-top:4px solid " << bucket_colour(bucket)
        << "\">" << bucket_header(bucket) << "</th>";
    first = false;
  }
  out << "<th class=\"wrap\">lost steps</th></tr>\n";
  std::size_t shown = 0;
  for (const auto& row : report.rows) {
    if (++shown > kMaxRows) {
      break;
    }
    const auto& a = row.account;
    const double chip_hours = chip_hours_of(a).total();
    const std::string status(domain::to_string(row.job.phase));
    const std::string name = html_escape(row.job.name);
    out << "<tr><td class=\"l\">" << domain::format_job_id(row.job.id) << "</td><td class=\"l job-name\" title=\""
        << name << "\">" << name << "</td><td class=\"l st-" << status << "\">" << status << "</td><td>"
        << span_text(a.wall_ms()) << "</td><td>" << percent_text(a.goodput()) << "</td><td>"
        << (chip_hours > 0 ? decimal(chip_hours, 2) : "-") << "</td><td>" << html_escape(cost_cell(a, row.cost, prices))
        << "</td>";
    bool first_bucket = true;
    for (const auto bucket : core::all_buckets()) {
      out << (first_bucket ? "<td class=\"split\">" : "<td>") << (a.of(bucket) > 0 ? span_text(a.of(bucket)) : "-")
          << "</td>";
      first_bucket = false;
    }
    out << "<td>" << (a.lost_steps > 0 ? std::to_string(a.lost_steps) : "-") << "</td></tr>\n";
  }
  out << "</table></div>\n";
  if (report.rows.size() > kMaxRows) {
    out << "<div class=\"note\">The first " << kMaxRows << " of " << report.rows.size()
        << " jobs; the totals count them all (jobman report --csv lists every one).</div>\n";
  }
}

void groups(std::ostream& out, const Report& report, const config::PriceTable& prices) {
  if (!report.by_kind.empty()) {
    out << "<h2>Chip-hours by accelerator and tier</h2>\n<table><tr><th class=\"l\">accelerator</th>"
           "<th class=\"l\">tier</th><th>chip-hours</th><th>price per chip-hour</th><th>cost</th></tr>\n";
    for (const auto& [key, group] : report.by_kind) {
      const auto price = prices.chip_hour(key.first, key.second);
      out << "<tr><td class=\"l\">" << html_escape(key.first) << "</td><td class=\"l\">"
          << html_escape(domain::to_string(key.second)) << "</td><td>" << decimal(group.chip_hours, 2)
          << (group.estimated ? "*" : "") << "</td><td>"
          << (price ? html_escape(money(*price, prices)) : std::string("-")) << "</td><td>"
          << (price ? html_escape(money(group.cost, prices)) : std::string("no price")) << "</td></tr>\n";
    }
    out << "</table>\n";
  }
  if (!report.by_zone.empty()) {
    out << "<h2>Zones</h2>\n<table><tr><th class=\"l\">zone</th><th>slices</th><th>preempted</th>"
           "<th>bad hardware</th><th>chip-hours</th><th>cost</th></tr>\n";
    for (const auto& [zone, group] : report.by_zone) {
      out << "<tr><td class=\"l\">" << html_escape(zone) << "</td><td>" << group.attempts << "</td><td>"
          << group.preemptions << "</td><td>" << group.bad_hardware << "</td><td>" << decimal(group.chip_hours, 2)
          << (group.estimated ? "*" : "") << "</td><td>" << html_escape(money(group.cost, prices))
          << (group.priced ? "" : " + unpriced") << "</td></tr>\n";
    }
    out << "</table>\n";
  }
  if (!report.transfers.empty()) {
    out << "<h2>Data read through gcsfuse</h2>\n<table><tr><th class=\"l\">bucket</th><th class=\"l\">location</th>"
           "<th class=\"l\">zone</th><th class=\"l\">data</th><th>read</th><th>attempts</th><th>rate per GiB</th>"
           "<th>cost</th></tr>\n";
    for (const auto& g : report.transfers) {
      out << "<tr><td class=\"l\">gs://" << html_escape(g.bucket) << "</td><td class=\"l\">"
          << (g.place ? html_escape(core::describe_place(*g.place)) : std::string("not looked up"))
          << "</td><td class=\"l\">" << html_escape(g.zone) << "</td><td class=\"l\">"
          << (g.place ? html_escape(core::to_string(g.nearness)) : std::string("-")) << "</td><td>"
          << html_escape(core::describe_bytes(g.read_bytes)) << "</td><td>" << g.attempts << "</td><td>"
          << (g.per_gib ? html_escape(money(*g.per_gib, prices)) : std::string("-")) << "</td><td>"
          << (g.cost ? html_escape(money(*g.cost, prices)) : std::string("no price")) << "</td></tr>\n";
    }
    out << "</table>\n<p class=\"note\">" << html_escape(core::describe_bytes(report.transfer_total.across_bytes))
        << " read from outside the reading zone's region, ~" << html_escape(money(report.transfer_total.cost, prices))
        << (report.transfer_total.complete ? "" : " + unpriced")
        << ", counted by the workers' gcsfuse when each attempt ended; rates: " << html_escape(prices.transfer.source)
        << ".</p>\n";
  }
}

// The comparison: a row per experiment and place, the best steps per unit of money of each experiment that ran in
// several places in bold. It fits a window 1400 px wide: a long experiment name is cut short (whole in its tooltip)
// and the headers wrap.
void compare_table(std::ostream& out, const Report& report, const config::PriceTable& prices) {
  out << "<h2>Steps per " << html_escape(prices.currency) << " by experiment, accelerator, zone and tier</h2>\n";
  if (report.comparison.empty()) {
    out << "<p class=\"note\">No finished runs with steps to compare.</p>\n";
    return;
  }
  std::map<std::string, std::pair<double, int>> best; // By experiment: the highest steps per money, and its groups.
  for (const auto& g : report.comparison) {
    auto& [value, groups] = best[g.experiment];
    value = std::max(value, g.steps_per_dollar().value_or(0.0));
    ++groups;
  }
  out << "<div class=\"table-wrap\"><table class=\"compare\"><tr><th class=\"l\">experiment</th>"
         "<th class=\"l\">accelerator</th><th class=\"l\">zone</th><th class=\"l\">tier</th><th>runs</th>"
         "<th>steps</th><th>steps per hour</th><th>steps per chip-hour</th><th>steps per "
      << html_escape(prices.currency) << "</th><th>goodput</th><th>preemptions per day</th></tr>\n";
  const std::string* previous = nullptr;
  for (const auto& g : report.comparison) {
    const auto per_money = g.steps_per_dollar();
    const auto& [top, groups] = best[g.experiment];
    const bool is_best = groups > 1 && per_money && *per_money > 0 && *per_money == top;
    // A line between experiments.
    out << (previous != nullptr && *previous != g.experiment ? "<tr class=\"next\">" : "<tr>");
    previous = &g.experiment;
    const std::string experiment = html_escape(g.experiment);
    out << "<td class=\"l name\" title=\"" << experiment << "\">" << experiment << "</td><td class=\"l\">"
        << html_escape(g.accelerator) << "</td><td class=\"l\">" << html_escape(g.zone) << "</td><td class=\"l\">"
        << html_escape(domain::to_string(g.tier)) << "</td><td>" << g.runs << "</td><td>" << g.steps << "</td><td>"
        << figure_text(g.steps_per_hour()) << "</td><td>" << figure_text(g.steps_per_chip_hour())
        << (g.estimated ? "*" : "") << "</td><td" << (is_best ? " class=\"best\"" : "") << ">"
        << (g.priced ? figure_text(per_money) : std::string("no price")) << "</td><td>" << percent_text(g.goodput())
        << "</td><td>" << figure_text(g.preemptions_per_day()) << "</td></tr>\n";
  }
  out << "</table></div>\n<p class=\"note\">" << html_escape(compare_note(prices));
  if (report.runs_without_steps > 0) {
    out << " " << report.runs_without_steps
        << (report.runs_without_steps == 1 ? " finished run printed no step on a slice and is left out."
                                           : " finished runs printed no step on a slice and are left out.");
  }
  out << "</p>\n";
}

} // namespace

void write_report_summary(std::ostream& out, const Report& report, const config::PriceTable& prices) {
  cards(out, report, prices);
  groups(out, report, prices);
}

void write_report_html(std::ostream& out, const Report& report, const config::PriceTable& prices) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
         "<title>jobman report</title><style>"
      << kStyle << "</style></head><body>\n";
  out << "<h1>Where the time and money went</h1>\n<div class=\"sub\">jobman report, "
      << html_escape(util::format_local(report.now_ms))
      << (report.since_ms > 0 ? ", jobs active since " + html_escape(util::format_local(report.since_ms))
                              : std::string())
      << "</div>\n";
  if (report.rows.empty()) {
    out << "<p>No jobs to report.</p></body></html>\n";
    return;
  }
  cards(out, report, prices);
  if (report.compared) {
    compare_table(out, report, prices);
  }
  write_timeline_legend(out);
  out << "<h2>Timelines</h2>\n";
  const std::size_t first = report.rows.size() > kHtmlTimelines ? report.rows.size() - kHtmlTimelines : 0;
  if (first > 0) {
    out << "<div class=\"note\">The newest " << kHtmlTimelines << " of " << report.rows.size() << " jobs.</div>\n";
  }
  for (std::size_t i = first; i < report.rows.size(); ++i) {
    const auto& row = report.rows[i];
    const std::string status(domain::to_string(row.job.phase));
    out << "<div class=\"job\" id=\"job-" << domain::format_job_id(row.job.id) << "\"><div><span class=\"t\">"
        << domain::format_job_id(row.job.id) << " " << html_escape(row.job.name) << "</span> <span class=\"st-"
        << status << "\">" << status << "</span> <span class=\"m\">" << html_escape(place_of(row.job)) << ", "
        << html_escape(goodput_text(row.account)) << ", " << row.job.preemptions << " preemption"
        << (row.job.preemptions == 1 ? "" : "s") << ", " << row.job.bad_hardware << " bad slice"
        << (row.job.bad_hardware == 1 ? "" : "s") << "</span></div>\n";
    write_job_timeline(out, row);
    for (const auto& note : row.account.notes) {
      out << "<div class=\"note\">note: " << html_escape(note) << "</div>\n";
    }
    out << "</div>\n";
  }
  out << "<h2>Goodput and cost per job</h2>\n";
  jobs_table(out, report, prices);
  groups(out, report, prices);
  bool inferred = false;
  for (const auto& [zone, group] : report.by_zone) {
    inferred = inferred || group.estimated;
  }
  out << "<p class=\"note\">Costs: " << html_escape(prices_note(prices))
      << ". Chip-hours count the time each slice was up (READY), which is what Cloud TPU bills; a task's time on its "
         "worker's slice is the worker's."
      << (inferred ? " *: a slice's deletion was never confirmed; its time is counted to its attempt's end." : "")
      << "</p>\n</body></html>\n";
}

} // namespace jobman::reporting
