// `jobman report`: the accounts of many jobs read from the store in a few range scans, and their totals by
// accelerator, tier and zone; written as text, CSV, JSON or one self-contained HTML file (report_html.cpp).
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/reporting/accounting.hpp"
#include "jobman/reporting/compare.hpp"
#include "jobman/reporting/transfers.hpp"

#include <functional>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace jobman::reporting {

// Which jobs a report covers: the listed ids, or those unfinished or finished since `since_ms` (of `user`, named
// like `name_glob`, of `kinds`; empty: any).
struct ReportSelection {
  std::vector<std::int64_t> ids;
  std::int64_t since_ms = 0;
  std::string user;
  std::string name_glob;
  std::vector<domain::JobKind> kinds;
  std::vector<domain::Phase> phases; // Only jobs in these phases (empty: any).
  // Also group the finished runs by experiment and place (Report::comparison), reading each job's recorded config for
  // its experiment; only `experiment`'s runs when it is given.
  bool compare = false;
  std::string experiment;
  // How many of the newest rows keep their attempts and their account's timeline (what the HTML draws); the others
  // keep their totals only, so that a report of a year holds little per job.
  std::size_t detailed_rows = 0;
};

// The timelines the HTML report draws at most: the newest jobs'.
constexpr std::size_t kHtmlTimelines = 200;

// One job's line of the report.
struct ReportRow {
  domain::JobRecord job;
  std::vector<domain::AttemptRecord> attempts; // For detailed rows only (ReportSelection::detailed_rows).
  core::JobAccount account;
  Cost cost;
};

// The chip-hours and cost of one group (an accelerator and tier, or a zone).
struct ReportGroup {
  double chip_hours = 0;
  double cost = 0;
  bool priced = true;     // Every slice in it had a price.
  bool estimated = false; // Some time was inferred.
  int attempts = 0;       // Slices asked for (zones only).
  int preemptions = 0;    // (zones only)
  int bad_hardware = 0;   // (zones only)
};

// An accelerator and a tier, as the report groups slices.
using AcceleratorTier = std::pair<std::string, domain::Pricing>;

// Orders groups by accelerator, then by the tier's name ("ondemand", "preemptible", "spot"), as the report lists them.
struct AcceleratorTierOrder {
  bool operator()(const AcceleratorTier& a, const AcceleratorTier& b) const {
    return a.first != b.first ? a.first < b.first : domain::to_string(a.second) < domain::to_string(b.second);
  }
};

struct Report {
  std::int64_t now_ms = 0;
  std::int64_t since_ms = 0;
  std::vector<ReportRow> rows; // By id; empty when build_report passed them to a sink instead.
  std::size_t jobs = 0;        // Accounted.
  std::size_t unfinished = 0;  // Of them, not in a terminal phase.
  // Totals by bucket, of the jobs and workers (a task's time is inside its worker's); of the tasks when the report has
  // nothing else.
  core::BucketTimes ms{};
  double cost = 0;
  bool cost_complete = true;
  // Slices held by jobs and workers (tasks' borrowed time is their workers'), by "accelerator tier" and by zone.
  std::map<AcceleratorTier, ReportGroup, AcceleratorTierOrder> by_kind;
  std::map<std::string, ReportGroup> by_zone;
  // With ReportSelection::compare: the finished runs by experiment, accelerator, zone and tier, how many runs they
  // hold, and how many finished runs were left out for printing no step.
  bool compared = false;
  std::vector<CompareGroup> comparison;
  std::size_t runs_compared = 0;
  std::size_t runs_without_steps = 0;
  // What the jobs read through their gcsfuse mounts, by bucket and reading zone, priced at prices.yaml's data-transfer
  // rates, and its total (not in `cost`, which is the chips').
  std::vector<TransferGroup> transfers;
  TransferTotal transfer_total;
  std::set<std::int64_t> accounted; // The ids of the jobs accounted.

  [[nodiscard]] std::int64_t wall_ms() const { return core::wall_ms(ms); }
  [[nodiscard]] std::optional<double> goodput() const { return core::goodput(ms); }
};

// Where build_report can send each row as it is accounted, instead of keeping it. It is called in order, one row at a
// time, from a thread build_report starts (which never touches the store) while the caller's thread reads on.
using ReportRowSink = std::function<void(const ReportRow&)>;

// Reads the selection's jobs, their phase changes and attempts (and for workers the tasks they ran) and accounts each,
// a chunk of jobs at a time (a thread accounts one chunk while the next is read); each row goes to `each_row` when
// given (the report then keeps the totals only), into Report::rows otherwise. Throws domain::NoSuchJobError for a
// listed id that is not in the store.
Report build_report(const store::JobStore& store, const ReportSelection& selection, const config::PriceTable& prices,
                    std::int64_t now_ms, const ReportRowSink& each_row = {});

// build_report of the selection's finished runs (SUCCEEDED, FAILED, CANCELLED) with their comparison
// (Report::comparison), keeping no row.
Report build_comparison(const store::JobStore& store, ReportSelection selection, const config::PriceTable& prices,
                        std::int64_t now_ms);

void write_report_text(std::ostream& out, const Report& report, const config::PriceTable& prices, bool color);
// CSV and JSON are written as the rows come: the header (or the JSON's opening), each row, then (JSON) the totals.
void write_report_csv_header(std::ostream& out);
void append_report_csv_row(std::string& out, const ReportRow& row, const config::PriceTable& prices);
void write_report_json_head(std::ostream& out, std::int64_t now_ms, std::int64_t since_ms,
                            const config::PriceTable& prices);
void append_report_json_row(std::string& out, const ReportRow& row, const config::PriceTable& prices, bool first);
void write_report_json_tail(std::ostream& out, const Report& report, const config::PriceTable& prices, bool any_rows);
// One self-contained HTML file: an SVG timeline per job, the goodput and cost tables, and the zones'; with a
// comparison (Report::compared), its table first.
void write_report_html(std::ostream& out, const Report& report, const config::PriceTable& prices);

// `report --compare` (compare.cpp): the comparison as a table with the definitions and the price note under it, as
// CSV (a header, then a line per group), and as JSON (docs/JSON.md).
void write_compare_text(std::ostream& out, const Report& report, const config::PriceTable& prices, bool color);
void write_compare_csv(std::ostream& out, const Report& report, const config::PriceTable& prices);
void write_compare_json(std::ostream& out, const Report& report, const config::PriceTable& prices);
// A figure of the comparison, to about three significant digits ("1234", "56.7", "0.0123"); "-" for none.
std::string figure_text(std::optional<double> value);
// What the comparison's figures are, for a note under its table.
std::string compare_note(const config::PriceTable& prices);
// The price table as the JSON documents give it: {currency, source, as_of, region, tables, note}.
nlohmann::ordered_json prices_json(const config::PriceTable& prices);

// The parts of the HTML report the dashboard shows as well (report_html.cpp).
// Stored text made safe in HTML: control characters made visible as on a terminal, then <, >, &, quotes escaped.
std::string html_escape(std::string_view raw);
// The report's style sheet (CSS).
std::string_view report_style();
// A bucket's colour in the timelines ("#27ab83").
const char* bucket_colour(core::Bucket bucket);
// The colour of each bucket and the marks' symbols.
void write_timeline_legend(std::ostream& out);
// A job's timeline as inline SVG: its buckets in colour, preemptions and bad hardware marked, hover titles.
void write_job_timeline(std::ostream& out, const ReportRow& row);
// The totals: goodput, time, chip-hours and cost cards, then chip-hours by accelerator and tier and by zone.
void write_report_summary(std::ostream& out, const Report& report, const config::PriceTable& prices);
// "v4-8 spot in us-central2-b"; a task that names no tier or zone takes any.
std::string place_of(const domain::JobRecord& job);

} // namespace jobman::reporting
