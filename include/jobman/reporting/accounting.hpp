// Where a job's time and money went, as `show`, `report` and the dashboard present it: the account read from the
// store (core::account), its cost at list prices, and its training progress with a rate and an ETA.
#pragma once

#include "jobman/config/prices.hpp"
#include "jobman/core/goodput.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace jobman::reporting {

// `value` with `decimals` digits after the point.
std::string decimal(double value, int decimals);
// "81.2%"; "-" for none.
std::string percent_text(std::optional<double> share);

// A bucket's time: to a tenth of a second below ten seconds ("0.4s"), to the second below an hour ("45s",
// "4m12s"), then "2h05m", "3d04h".
std::string span_text(std::int64_t ms);

// The spans of the task attempts a worker lent its slice to.
std::vector<core::TaskSpan> worker_tasks(const store::JobStore& store, std::int64_t worker_id);

// The job's account from the store: its phase changes and attempts, and for a worker the task attempts it lent its
// slice to.
core::JobAccount account_of(const store::JobStore& store, const domain::JobRecord& job,
                            const std::vector<domain::AttemptRecord>& attempts, std::int64_t now_ms);

// The cost of the slices an account holds at list prices (a task's time on its worker's slice is the worker's to pay).
struct Cost {
  double amount = 0;
  bool complete = true; // Every slice had a price in the table.
};
Cost cost_of(const core::JobAccount& account, const config::PriceTable& prices);
// The cost of one slice kind's chip-hours at list prices (borrowed ones too: what the worker pays for that time);
// nullopt when the table has no price for its accelerator and tier.
std::optional<double> cost_of(const core::ChipUsage& usage, const config::PriceTable& prices);

// An account's chip-hours: on slices it holds, and borrowed (a task's, on its worker's slice).
struct ChipHours {
  double own = 0;
  double borrowed = 0;
  [[nodiscard]] double total() const { return own + borrowed; }
};
ChipHours chip_hours_of(const core::JobAccount& account);

// A job's cost as a report's cell shows it: "$1.23", "(its worker's)" for a task, "-" with no slice up.
std::string cost_cell(const core::JobAccount& account, const Cost& cost, const config::PriceTable& prices);

// A job's training progress, with the rate over the last minutes and what it leaves to go.
struct ProgressView {
  std::int64_t step = 0;
  std::optional<std::int64_t> total;
  std::int64_t at_ms = 0;
  std::optional<double> steps_per_second;
  std::optional<std::int64_t> eta_seconds; // Unfinished jobs with a total and a rate only.
};
std::optional<ProgressView> progress_view(const domain::JobRecord& job,
                                          const std::vector<domain::AttemptRecord>& attempts);

// "611/2000 (30.6%), 2.31 steps/s, ETA 1h02m".
std::string progress_line(const ProgressView& view);
nlohmann::ordered_json progress_json(const std::optional<ProgressView>& view);

// Appends the account as JSON text, written directly (a report writes a hundred thousand): seconds by bucket,
// goodput, lost steps, chip-hours and cost by slice kind, notes.
void append_account_json(std::string& out, const core::JobAccount& account, const config::PriceTable& prices);
// The same as a document, with the timeline and its marks when asked.
nlohmann::ordered_json account_json(const core::JobAccount& account, const config::PriceTable& prices,
                                    bool with_timeline);

// "goodput 81.2% (4h05m productive of 5h02m)".
std::string goodput_text(const core::JobAccount& account);

// What the prices are and why every cost is an estimate, for a footnote.
std::string prices_note(const config::PriceTable& prices);

// "$58.97", in the table's currency.
std::string money(double amount, const config::PriceTable& prices);

// The lines `show` prints under "Where the time went".
void print_account(std::ostream& out, const core::JobAccount& account, const config::PriceTable& prices);

} // namespace jobman::reporting
