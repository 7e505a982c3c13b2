#include "jobman/reporting/report.hpp"

#include "jobman/core/bucket_transfers.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/reporting/json.hpp"
#include "jobman/reporting/text.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/json_text.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>

namespace jobman::reporting {

namespace {

std::size_t position(std::span<const domain::JobRecord> jobs, std::int64_t id) {
  const auto it = std::lower_bound(jobs.begin(), jobs.end(), id,
                                   [](const domain::JobRecord& j, std::int64_t v) { return j.id < v; });
  return it != jobs.end() && it->id == id ? static_cast<std::size_t>(it - jobs.begin()) : jobs.size();
}

// Adds a job's account to the report's totals: its time (a task's only to `task_ms`: it is inside its worker's),
// cost, chip-hours by kind and zone, and the slices its attempts held by zone.
void add_to_totals(Report& report, core::BucketTimes& task_ms, const domain::JobRecord& job, const ReportRow& row,
                   std::span<const domain::AttemptRecord> attempts, const config::PriceTable& prices) {
  auto& totals = job.kind == domain::JobKind::task ? task_ms : report.ms;
  for (std::size_t b = 0; b < core::kBucketCount; ++b) {
    totals[b] += row.account.ms[b];
  }
  report.cost += row.cost.amount;
  report.cost_complete = report.cost_complete && row.cost.complete;
  report.accounted.insert(job.id);
  for (const auto& usage : row.account.usage) {
    if (usage.borrowed) {
      continue;
    }
    const auto price = prices.chip_hour(usage.accelerator, usage.tier);
    for (ReportGroup* group : {&report.by_kind[{usage.accelerator, usage.tier}], &report.by_zone[usage.zone]}) {
      group->chip_hours += usage.chip_hours;
      group->cost += price ? usage.chip_hours * *price : 0.0;
      group->priced = group->priced && price.has_value();
      group->estimated = group->estimated || usage.estimated;
    }
  }
  for (const auto& attempt : attempts) {
    if (!attempt.holds_slice()) {
      continue;
    }
    auto& zone = report.by_zone[attempt.zone];
    ++zone.attempts;
    zone.preemptions += attempt.outcome == domain::AttemptOutcome::preempted ? 1 : 0;
    zone.bad_hardware += domain::is_bad_slice(attempt.outcome) ? 1 : 0;
  }
}

// The short headers of the text table, by bucket.
const std::array<std::string, core::kBucketCount>& bucket_headers() {
  static const std::array<std::string, core::kBucketCount> headers{
      "QUEUED", "PROVISION", "SETUP", "PRODUCTIVE", "LOST", "RECOVERING", "BAD HW", "RUN END", "IDLE"};
  return headers;
}

} // namespace

namespace {

// Where one job's records sit in a chunk's flat list of them.
struct Range {
  std::size_t begin = 0;
  std::size_t size = 0;
};

// A chunk of jobs of consecutive ids, with what their accounts need from the store. A job's phase changes and
// attempts arrive together (the scans are in job order) and are kept in one list per chunk: a few allocations per
// chunk rather than a few per job, which the accounting thread would free against the reading thread's.
struct Chunk {
  std::vector<domain::JobRecord> jobs; // Ascending ids.
  std::vector<domain::EventRecord> phases;
  std::vector<Range> phases_of; // By job: its phase changes in `phases`.
  std::vector<domain::AttemptRecord> attempts;
  std::vector<Range> attempts_of;                 // By job: its attempts in `attempts`.
  std::vector<std::vector<core::TaskSpan>> tasks; // By job: for a worker, the task attempts it ran.
  std::size_t detailed_from = 0;                  // Jobs from this index keep their attempts and timeline.

  template <typename T> static std::span<const T> of(const std::vector<T>& all, const Range& range) {
    return std::span<const T>(all).subspan(range.begin, range.size);
  }
};

// Reads a chunk's phase changes and attempts in two range scans (those of jobs left out are skipped), and its
// workers' tasks.
Chunk read_chunk(const store::JobStore& store, std::vector<domain::JobRecord> jobs, std::size_t detailed_from) {
  Chunk chunk;
  chunk.jobs = std::move(jobs);
  chunk.detailed_from = detailed_from;
  const std::size_t n = chunk.jobs.size();
  chunk.phases_of.resize(n);
  chunk.attempts_of.resize(n);
  chunk.tasks.resize(n);
  if (n == 0) {
    return chunk;
  }
  const std::span<const domain::JobRecord> ids(chunk.jobs);
  // Appends a record of job `id` (they come in job order) and widens that job's range.
  const auto add = [&ids, n](auto& all, std::vector<Range>& ranges, std::int64_t id, const auto& record) {
    if (const auto i = position(ids, id); i < n) {
      if (ranges[i].size == 0) {
        ranges[i].begin = all.size();
      }
      all.push_back(record);
      ++ranges[i].size;
    }
  };
  chunk.phases.reserve(n * 6);
  store.events().for_each_phase_change(ids.front().id, ids.back().id, [&](const domain::EventRecord& event) {
    add(chunk.phases, chunk.phases_of, event.job_id, event);
  });
  chunk.attempts.reserve(n * 2);
  store.attempts().for_each(ids.front().id, ids.back().id, [&](const domain::AttemptRecord& attempt) {
    add(chunk.attempts, chunk.attempts_of, attempt.job_id, attempt);
  });
  for (std::size_t k = 0; k < n; ++k) {
    if (ids[k].kind == domain::JobKind::worker) {
      chunk.tasks[k] = worker_tasks(store, ids[k].id);
    }
  }
  return chunk;
}

// Accounts the chunks in order, adding each job to the report's totals and passing its row on.
class ChunkAccountant {
public:
  ChunkAccountant(const config::PriceTable& prices, const ReportSelection& selection, Report& report,
                  const ReportRowSink& each_row)
      : prices_(prices), report_(report), each_row_(each_row) {
    if (selection.compare) {
      comparison_.emplace(prices, selection.experiment);
    }
  }

  void account(Chunk& chunk) {
    for (std::size_t k = 0; k < chunk.jobs.size(); ++k) {
      auto& job = chunk.jobs[k];
      core::AccountInput input;
      input.job = &job;
      const auto attempts = Chunk::of(chunk.attempts, chunk.attempts_of[k]);
      input.events = Chunk::of(chunk.phases, chunk.phases_of[k]);
      input.attempts = attempts;
      input.tasks = chunk.tasks[k];
      input.now_ms = report_.now_ms;
      ReportRow row;
      row.account = core::account(input);
      row.cost = cost_of(row.account, prices_);
      add_to_totals(report_, task_ms_, job, row, attempts, prices_);
      ++report_.jobs;
      report_.unfinished += domain::is_terminal(job.phase) ? 0 : 1;
      if (comparison_) {
        comparison_->add(job, attempts, row.account);
        job.config_yaml = std::string(); // Read for the experiment only: a report keeps no config.
      }
      if (k >= chunk.detailed_from) {
        row.attempts.assign(attempts.begin(), attempts.end());
      } else {
        row.account.timeline = {};
        row.account.marks = {};
      }
      row.job = std::move(job);
      if (each_row_) {
        each_row_(row);
      } else {
        report_.rows.push_back(std::move(row));
      }
    }
  }

  // The totals are the tasks' when the report has nothing else.
  void finish() {
    if (report_.wall_ms() == 0) {
      report_.ms = task_ms_;
    }
    if (comparison_) {
      report_.compared = true;
      report_.comparison = comparison_->groups();
      report_.runs_compared = comparison_->runs();
      report_.runs_without_steps = comparison_->runs_without_steps();
    }
  }

private:
  const config::PriceTable& prices_;
  Report& report_;
  const ReportRowSink& each_row_;
  core::BucketTimes task_ms_{};
  std::optional<Comparison> comparison_;
};

// Accounts chunks on a thread of its own while the caller reads the next ones from the store: a long report then
// takes about as long as its reading (60% of the work over a year's 100,000 jobs; bench/README.md). A report of one
// chunk, or a machine of one core, accounts in the caller's thread. The store is only ever used by
// the caller's thread.
class ChunkPipeline {
public:
  explicit ChunkPipeline(ChunkAccountant& accountant)
      : accountant_(accountant), threaded_(std::thread::hardware_concurrency() > 1) {}
  ChunkPipeline(const ChunkPipeline&) = delete;
  ChunkPipeline& operator=(const ChunkPipeline&) = delete;

  // Stops the thread when the caller gives up (an error reading the store): what is queued is dropped.
  ~ChunkPipeline() {
    if (thread_.joinable()) {
      {
        const std::lock_guard lock(mutex_);
        stop_ = true;
      }
      ready_.notify_one();
      thread_.join();
    }
  }

  // Queues a chunk, waiting while two are queued; rethrows what the accounting threw.
  void push(Chunk chunk) {
    if (!threaded_) {
      accountant_.account(chunk);
      return;
    }
    if (!thread_.joinable() && queue_.empty()) {
      queue_.push_back(std::move(chunk)); // Perhaps the only one: no thread for it yet.
      return;
    }
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { run(); });
    }
    std::unique_lock lock(mutex_);
    room_.wait(lock, [this] { return queue_.size() < 2 || error_; });
    if (error_) {
      std::rethrow_exception(error_);
    }
    queue_.push_back(std::move(chunk));
    lock.unlock();
    ready_.notify_one();
  }

  // Accounts what is queued and returns when every chunk is; rethrows what the accounting threw.
  void finish() {
    if (!thread_.joinable()) {
      for (auto& chunk : queue_) {
        accountant_.account(chunk);
      }
      queue_.clear();
      return;
    }
    {
      const std::lock_guard lock(mutex_);
      done_ = true;
    }
    ready_.notify_one();
    thread_.join();
    if (error_) {
      std::rethrow_exception(error_);
    }
  }

private:
  void run() {
    for (;;) {
      Chunk chunk;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [this] { return !queue_.empty() || done_ || stop_; });
        if (stop_ || queue_.empty()) {
          return;
        }
        chunk = std::move(queue_.front());
        queue_.pop_front();
      }
      room_.notify_one();
      try {
        accountant_.account(chunk);
      } catch (...) {
        {
          const std::lock_guard lock(mutex_);
          error_ = std::current_exception();
        }
        room_.notify_one();
        return;
      }
    }
  }

  ChunkAccountant& accountant_;
  const bool threaded_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable ready_; // A chunk is queued, or the end.
  std::condition_variable room_;  // A chunk was taken, or the accounting failed.
  std::deque<Chunk> queue_;
  bool done_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
};

constexpr std::size_t kChunk = 2048;

} // namespace

namespace {

// What the accounted jobs read from their buckets, priced.
void add_transfers(const store::JobStore& store, const config::PriceTable& prices, Report& report) {
  report.transfers = group_transfers(store.attempts().all_transfers(), store.zone_catalogs().buckets(), prices.transfer,
                                     &report.accounted);
  report.transfer_total = total_of(report.transfers);
}

} // namespace

Report build_report(const store::JobStore& store, const ReportSelection& selection, const config::PriceTable& prices,
                    std::int64_t now_ms, const ReportRowSink& each_row) {
  Report report;
  report.now_ms = now_ms;
  report.since_ms = selection.since_ms;
  ChunkAccountant accountant(prices, selection, report, each_row);
  ChunkPipeline pipeline(accountant);
  std::vector<domain::JobRecord> jobs;
  if (!selection.ids.empty()) {
    for (const auto id : selection.ids) {
      jobs.push_back(store.jobs().get(id, selection.compare));
    }
    if (!selection.phases.empty()) {
      std::erase_if(jobs, [&](const domain::JobRecord& job) {
        return std::find(selection.phases.begin(), selection.phases.end(), job.phase) == selection.phases.end();
      });
    }
    std::sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    jobs.erase(std::unique(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) { return a.id == b.id; }),
               jobs.end());
  } else {
    store::JobFilter filter;
    filter.now_ms = now_ms;
    filter.recent_ms = std::max<std::int64_t>(0, now_ms - selection.since_ms);
    filter.user = selection.user;
    filter.name_glob = selection.name_glob;
    filter.kinds = selection.kinds;
    filter.phases = selection.phases;
    filter.with_config = selection.compare;
    if (selection.detailed_rows == 0) {
      // Nothing needs to know how many there are: read and account them a chunk at a time. The statement listing
      // the jobs stays open while each chunk's events are read.
      jobs.reserve(kChunk);
      store.jobs().for_each(filter, [&](const domain::JobRecord& job) {
        jobs.push_back(job);
        if (jobs.size() == kChunk) {
          pipeline.push(read_chunk(store, std::exchange(jobs, {}), kChunk));
          jobs.reserve(kChunk);
        }
      });
      const std::size_t size = jobs.size();
      pipeline.push(read_chunk(store, std::move(jobs), size));
      pipeline.finish();
      accountant.finish();
      add_transfers(store, prices, report);
      return report;
    }
    jobs = store.jobs().list(filter);
  }
  if (!each_row) {
    report.rows.reserve(jobs.size());
  }
  const std::size_t detailed_from = jobs.size() - std::min(jobs.size(), selection.detailed_rows);
  for (std::size_t first = 0; first < jobs.size(); first += kChunk) {
    const std::size_t size = std::min(kChunk, jobs.size() - first);
    const auto begin = jobs.begin() + static_cast<std::ptrdiff_t>(first);
    pipeline.push(
        read_chunk(store,
                   std::vector<domain::JobRecord>(std::make_move_iterator(begin),
                                                  std::make_move_iterator(begin + static_cast<std::ptrdiff_t>(size))),
                   detailed_from > first ? detailed_from - first : 0));
  }
  pipeline.finish();
  accountant.finish();
  add_transfers(store, prices, report);
  return report;
}

Report build_comparison(const store::JobStore& store, ReportSelection selection, const config::PriceTable& prices,
                        std::int64_t now_ms) {
  selection.phases = {domain::Phase::succeeded, domain::Phase::failed, domain::Phase::cancelled};
  selection.compare = true;
  selection.detailed_rows = 0;
  return build_report(store, selection, prices, now_ms, [](const ReportRow&) {});
}

void write_report_text(std::ostream& out, const Report& report, const config::PriceTable& prices, bool color) {
  if (report.rows.empty()) {
    out << "No jobs to report.\n";
    return;
  }
  out << report.jobs << (report.jobs == 1 ? " job" : " jobs") << " (" << report.unfinished << " unfinished): goodput "
      << percent_text(report.goodput()) << " ("
      << span_text(report.ms[static_cast<std::size_t>(core::Bucket::productive)]) << " productive of "
      << span_text(report.wall_ms()) << "), cost ~" << money(report.cost, prices) << "\n\n";
  std::vector<std::string> header{"JOB ID", "NAME", "KIND", "STATUS", "WALL", "GOODPUT"};
  header.insert(header.end(), bucket_headers().begin(), bucket_headers().end());
  header.insert(header.end(), {"LOST STEPS", "CHIP-HOURS", "COST"});
  Table jobs(header);
  for (const auto& row : report.rows) {
    const auto& a = row.account;
    const double chip_hours = chip_hours_of(a).total();
    std::vector<std::string> cells{domain::format_job_id(row.job.id),
                                   printable(row.job.name),
                                   std::string(domain::to_string(row.job.kind)),
                                   status_text(row.job),
                                   span_text(a.wall_ms()),
                                   percent_text(a.goodput())};
    for (const auto bucket : core::all_buckets()) {
      cells.push_back(a.of(bucket) > 0 ? span_text(a.of(bucket)) : "-");
    }
    cells.push_back(a.lost_steps > 0 ? std::to_string(a.lost_steps) : "-");
    cells.push_back(chip_hours > 0 ? decimal(chip_hours, 2) : "-");
    cells.push_back(cost_cell(a, row.cost, prices));
    jobs.add_row(std::move(cells), phase_color(row.job.phase), 3);
  }
  jobs.print(out, color);
  if (!report.by_kind.empty()) {
    out << "\nChip-hours by accelerator and tier\n";
    Table kinds({"ACCELERATOR", "TIER", "CHIP-HOURS", "PRICE/CHIP-HOUR", "COST"});
    for (const auto& [key, group] : report.by_kind) {
      const auto price = prices.chip_hour(key.first, key.second);
      kinds.add_row({printable(key.first), domain::to_string(key.second),
                     decimal(group.chip_hours, 2) + (group.estimated ? "*" : ""), price ? money(*price, prices) : "-",
                     price ? money(group.cost, prices) : "no price"});
    }
    kinds.print(out, color);
  }
  if (!report.by_zone.empty()) {
    out << "\nBy zone\n";
    Table zones({"ZONE", "SLICES", "PREEMPTED", "BAD HW", "CHIP-HOURS", "COST"});
    for (const auto& [zone, group] : report.by_zone) {
      zones.add_row({printable(zone), std::to_string(group.attempts), std::to_string(group.preemptions),
                     std::to_string(group.bad_hardware), decimal(group.chip_hours, 2) + (group.estimated ? "*" : ""),
                     money(group.cost, prices) + (group.priced ? "" : " + unpriced")});
    }
    zones.print(out, color);
  }
  if (!report.transfers.empty()) {
    out << "\nData read through gcsfuse, by bucket and zone: "
        << core::describe_bytes(report.transfer_total.across_bytes) << " from outside the reading zone's region, ~"
        << money(report.transfer_total.cost, prices) << (report.transfer_total.complete ? "" : " + unpriced") << " ("
        << printable(prices.transfer.source) << ")\n";
    print_transfers(out, report.transfers, prices, color);
  }
  out << "\nCosts: " << prices_note(prices) << ".";
  bool inferred = false;
  for (const auto& [key, group] : report.by_kind) {
    inferred = inferred || group.estimated;
  }
  if (inferred) {
    out << " *: a slice's deletion was never confirmed; its time is counted to its attempt's end.";
  }
  out << '\n';
}

void write_report_csv_header(std::ostream& out) {
  out << "id,name,user,kind,status,accelerator,zone,pricing,created_at,finished_at,wall_seconds,goodput";
  for (const auto bucket : core::all_buckets()) {
    std::string name(core::to_string(bucket));
    std::replace(name.begin(), name.end(), '-', '_');
    out << ',' << name << "_seconds";
  }
  out << ",lost_steps,chip_hours,borrowed_chip_hours,cost,currency,cost_complete,estimated\n";
}

void append_report_csv_row(std::string& out, const ReportRow& row, const config::PriceTable& prices) {
  const auto& a = row.account;
  const auto hours = chip_hours_of(a);
  bool estimated = !a.notes.empty();
  for (const auto& u : a.usage) {
    estimated = estimated || u.estimated;
  }
  const auto goodput = a.goodput();
  const auto field = [&out](std::string_view text) {
    out += text;
    out += ',';
  };
  field(std::to_string(row.job.id));
  field(csv_quote(row.job.name));
  field(csv_quote(row.job.user));
  field(domain::to_string(row.job.kind));
  field(domain::to_string(row.job.phase));
  field(csv_quote(row.job.accelerator));
  field(csv_quote(row.job.zone));
  field(csv_quote(row.job.pricing ? domain::to_string(*row.job.pricing) : std::string()));
  field(util::format_utc(row.job.created_ms));
  field(row.job.finished_ms ? util::format_utc(*row.job.finished_ms) : std::string());
  field(decimal(static_cast<double>(a.wall_ms()) / 1000.0, 3));
  field(goodput ? decimal(*goodput, 4) : std::string());
  for (const auto bucket : core::all_buckets()) {
    field(decimal(static_cast<double>(a.of(bucket)) / 1000.0, 3));
  }
  field(std::to_string(a.lost_steps));
  field(decimal(hours.own, 4));
  field(decimal(hours.borrowed, 4));
  field(decimal(row.cost.amount, 2));
  field(prices.currency);
  field(row.cost.complete ? "true" : "false");
  out += estimated ? "true\n" : "false\n";
}

nlohmann::ordered_json prices_json(const config::PriceTable& prices) {
  nlohmann::ordered_json table;
  table["currency"] = prices.currency;
  table["source"] = prices.source;
  table["as_of"] = prices.as_of;
  table["region"] = prices.region;
  table["tables"] = prices.files;
  table["note"] = prices_note(prices);
  return table;
}

void write_report_json_head(std::ostream& out, std::int64_t now_ms, std::int64_t since_ms,
                            const config::PriceTable& prices) {
  nlohmann::ordered_json j;
  j["generated_at"] = util::format_utc(now_ms);
  j["since"] = text_or_null(since_ms > 0 ? util::format_utc(since_ms) : std::string());
  j["prices"] = prices_json(prices);
  // The jobs follow, one at a time: a year of history is a hundred thousand of them.
  std::string head = j.dump(2);
  head.pop_back(); // The closing brace.
  while (!head.empty() && (head.back() == '\n' || head.back() == ' ')) {
    head.pop_back();
  }
  out << head << ",\n  \"jobs\": [";
}

void append_report_json_row(std::string& out, const ReportRow& row, const config::PriceTable& prices, bool first) {
  out += first ? "\n    " : ",\n    ";
  util::JsonObjectWriter job(out);
  job.field("id", row.job.id)
      .field("name", row.job.name)
      .field("user", row.job.user)
      .field("kind", domain::to_string(row.job.kind))
      .field("status", domain::to_string(row.job.phase))
      .field("accelerator", row.job.accelerator)
      .field("zone", row.job.zone)
      .field("created_at", util::format_utc(row.job.created_ms))
      .field_or_null("finished_at", row.job.finished_ms ? util::format_utc(*row.job.finished_ms) : std::string())
      .field("attempts", static_cast<std::int64_t>(row.job.attempt))
      .field("preemptions", static_cast<std::int64_t>(row.job.preemptions))
      .field("bad_hardware", static_cast<std::int64_t>(row.job.bad_hardware));
  append_account_json(job.member("account"), row.account, prices);
  job.close();
}

void write_report_json_tail(std::ostream& out, const Report& report, const config::PriceTable& prices, bool any_rows) {
  nlohmann::ordered_json totals;
  nlohmann::ordered_json seconds = nlohmann::ordered_json::object();
  for (const auto bucket : core::all_buckets()) {
    seconds[std::string(core::to_string(bucket))] =
        static_cast<double>(report.ms[static_cast<std::size_t>(bucket)]) / 1000.0;
  }
  totals["jobs"] = report.jobs;
  totals["wall_seconds"] = static_cast<double>(report.wall_ms()) / 1000.0;
  totals["seconds"] = std::move(seconds);
  totals["goodput"] = json_or_null(report.goodput());
  totals["cost"] = report.cost;
  totals["cost_complete"] = report.cost_complete;
  nlohmann::ordered_json kinds = nlohmann::ordered_json::array();
  for (const auto& [key, group] : report.by_kind) {
    const auto price = prices.chip_hour(key.first, key.second);
    nlohmann::ordered_json kind;
    kind["accelerator"] = key.first;
    kind["tier"] = domain::to_string(key.second);
    kind["chip_hours"] = group.chip_hours;
    kind["price_per_chip_hour"] = json_or_null(price);
    kind["cost"] = json_or_null(price ? std::optional<double>(group.cost) : std::nullopt);
    kind["estimated"] = group.estimated;
    kinds.push_back(std::move(kind));
  }
  totals["by_accelerator"] = std::move(kinds);
  nlohmann::ordered_json zones = nlohmann::ordered_json::array();
  for (const auto& [zone, group] : report.by_zone) {
    nlohmann::ordered_json one;
    one["zone"] = zone;
    one["slices"] = group.attempts;
    one["preemptions"] = group.preemptions;
    one["bad_hardware"] = group.bad_hardware;
    one["chip_hours"] = group.chip_hours;
    one["cost"] = group.cost;
    one["cost_complete"] = group.priced;
    one["estimated"] = group.estimated;
    zones.push_back(std::move(one));
  }
  totals["by_zone"] = std::move(zones);
  totals["data_transfer"] = {{"across_region_bytes", report.transfer_total.across_bytes},
                             {"cost", report.transfer_total.cost},
                             {"cost_complete", report.transfer_total.complete},
                             {"by_bucket", transfers_json(report.transfers)}};
  // Indented as the rest of the document, one level in.
  std::string text = totals.dump(2);
  std::string indented;
  for (const char c : text) {
    indented += c;
    if (c == '\n') {
      indented += "  ";
    }
  }
  out << (any_rows ? "\n  ],\n" : "],\n") << "  \"totals\": " << indented << "\n}\n";
}

} // namespace jobman::reporting
