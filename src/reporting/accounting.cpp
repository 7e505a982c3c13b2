#include "jobman/reporting/accounting.hpp"

#include "jobman/reporting/json.hpp"
#include "jobman/reporting/text.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/util/json_text.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace jobman::reporting {

namespace {

// How far back `show`'s rate looks.
constexpr std::int64_t kRateWindowMs = 10LL * 60 * 1000;

} // namespace

std::string decimal(double value, int decimals) {
  // std::to_chars rounds as printf's %.*f does (exactly, from the double's binary value), at a fraction of its cost:
  // a report formats a dozen numbers for every job.
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed, decimals);
  if (ec != std::errc()) {
    std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
    return buf;
  }
  return {buf, end};
}

std::string percent_text(std::optional<double> share) {
  return share ? decimal(*share * 100.0, 1) + "%" : "-";
}

std::string span_text(std::int64_t ms) {
  if (ms < 9'950) {
    return decimal(static_cast<double>(std::max<std::int64_t>(0, ms)) / 1000.0, 1) + "s";
  }
  const std::int64_t seconds = (ms + 500) / 1000;
  if (seconds >= 60 && seconds < 3600) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(seconds / 60),
                  static_cast<long long>(seconds % 60));
    return buf;
  }
  return util::format_duration(seconds);
}

std::vector<core::TaskSpan> worker_tasks(const store::JobStore& store, std::int64_t worker_id) {
  std::vector<core::TaskSpan> tasks;
  for (const auto& a : store.attempts().on_worker(worker_id)) {
    tasks.push_back({a.started_ms, a.ended_ms});
  }
  return tasks;
}

core::JobAccount account_of(const store::JobStore& store, const domain::JobRecord& job,
                            const std::vector<domain::AttemptRecord>& attempts, std::int64_t now_ms) {
  std::vector<domain::EventRecord> phases;
  store.events().for_each_phase_change(job.id, job.id, [&](const domain::EventRecord& e) { phases.push_back(e); });
  const auto tasks = job.kind == domain::JobKind::worker ? worker_tasks(store, job.id) : std::vector<core::TaskSpan>{};
  core::AccountInput input;
  input.job = &job;
  input.events = phases;
  input.attempts = attempts;
  input.tasks = tasks;
  input.now_ms = now_ms;
  return core::account(input);
}

Cost cost_of(const core::JobAccount& account, const config::PriceTable& prices) {
  Cost cost;
  for (const auto& usage : account.usage) {
    if (usage.borrowed) {
      continue;
    }
    if (const auto amount = cost_of(usage, prices)) {
      cost.amount += *amount;
    } else {
      cost.complete = false;
    }
  }
  return cost;
}

std::optional<double> cost_of(const core::ChipUsage& usage, const config::PriceTable& prices) {
  const auto price = prices.chip_hour(usage.accelerator, usage.tier);
  return price ? std::optional<double>(usage.chip_hours * *price) : std::nullopt;
}

ChipHours chip_hours_of(const core::JobAccount& account) {
  ChipHours hours;
  for (const auto& usage : account.usage) {
    (usage.borrowed ? hours.borrowed : hours.own) += usage.chip_hours;
  }
  return hours;
}

std::string cost_cell(const core::JobAccount& account, const Cost& cost, const config::PriceTable& prices) {
  const auto hours = chip_hours_of(account);
  if (hours.own > 0) {
    return money(cost.amount, prices);
  }
  return hours.borrowed > 0 ? "(its worker's)" : "-";
}

std::optional<ProgressView> progress_view(const domain::JobRecord& job,
                                          const std::vector<domain::AttemptRecord>& attempts) {
  if (!job.progress) {
    return std::nullopt;
  }
  ProgressView view;
  view.step = job.progress->step;
  view.total = job.step_total;
  view.at_ms = job.progress->at_ms;
  // The rate of the newest attempt that printed steps.
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it) {
    if (!it->progress.empty()) {
      view.steps_per_second = it->progress.rate(kRateWindowMs);
      break;
    }
  }
  if (!domain::is_terminal(job.phase) && view.total && view.steps_per_second && *view.steps_per_second > 0 &&
      *view.total > view.step) {
    view.eta_seconds =
        static_cast<std::int64_t>(std::ceil(static_cast<double>(*view.total - view.step) / *view.steps_per_second));
  }
  return view;
}

std::string progress_line(const ProgressView& view) {
  std::string line;
  if (view.total && *view.total > 0) {
    line = std::to_string(view.step) + "/" + std::to_string(*view.total) + " (" +
           percent_text(static_cast<double>(view.step) / static_cast<double>(*view.total)) + ")";
  } else {
    line = "step " + std::to_string(view.step);
  }
  if (view.steps_per_second) {
    line += ", " + decimal(*view.steps_per_second, *view.steps_per_second < 10 ? 2 : 1) + " steps/s";
  }
  if (view.eta_seconds) {
    line += ", ETA " + util::format_duration(*view.eta_seconds);
  }
  line += "  (last step " + util::format_local(view.at_ms) + ")";
  return line;
}

nlohmann::ordered_json progress_json(const std::optional<ProgressView>& view) {
  if (!view) {
    return nullptr;
  }
  nlohmann::ordered_json j;
  j["step"] = view->step;
  j["total"] = json_or_null(view->total);
  j["at"] = util::format_utc(view->at_ms);
  j["steps_per_second"] = json_or_null(view->steps_per_second);
  j["eta_seconds"] = json_or_null(view->eta_seconds);
  return j;
}

void append_account_json(std::string& out, const core::JobAccount& account, const config::PriceTable& prices) {
  util::JsonObjectWriter j(out);
  j.number("wall_seconds", static_cast<double>(account.wall_ms()) / 1000.0);
  util::JsonObjectWriter by_bucket(j.member("seconds"));
  for (const auto bucket : core::all_buckets()) {
    by_bucket.number(core::to_string(bucket), static_cast<double>(account.of(bucket)) / 1000.0);
  }
  by_bucket.close();
  j.number("goodput", account.goodput());
  j.field("lost_steps", account.lost_steps);
  j.number("excluded_seconds", static_cast<double>(account.excluded_ms) / 1000.0);
  j.member("usage") += '[';
  bool first = true;
  for (const auto& u : account.usage) {
    const auto price = prices.chip_hour(u.accelerator, u.tier);
    if (!first) {
      out += ',';
    }
    first = false;
    util::JsonObjectWriter one(out);
    one.field("zone", u.zone)
        .field("accelerator", u.accelerator)
        .field("tier", domain::to_string(u.tier))
        .field("chips", static_cast<std::int64_t>(u.chips))
        .field("slices", static_cast<std::int64_t>(u.slices))
        .number("chip_hours", u.chip_hours)
        .number("price_per_chip_hour", price)
        .number("cost", price && !u.borrowed ? std::optional<double>(u.chip_hours * *price) : std::nullopt)
        .flag("borrowed", u.borrowed)
        .flag("estimated", u.estimated);
    one.close();
  }
  out += ']';
  const auto cost = cost_of(account, prices);
  j.number("cost", cost.amount);
  j.field("currency", prices.currency);
  j.flag("cost_complete", cost.complete);
  j.member("notes") += '[';
  first = true;
  for (const auto& note : account.notes) {
    if (!first) {
      out += ',';
    }
    first = false;
    util::append_json_string(out, note);
  }
  out += ']';
  j.close();
}

nlohmann::ordered_json account_json(const core::JobAccount& account, const config::PriceTable& prices,
                                    bool with_timeline) {
  std::string text;
  append_account_json(text, account, prices);
  auto j = nlohmann::ordered_json::parse(text);
  if (with_timeline) {
    nlohmann::ordered_json timeline = nlohmann::ordered_json::array();
    for (const auto& s : account.timeline) {
      nlohmann::ordered_json span;
      span["from"] = util::format_utc(s.from_ms);
      span["to"] = util::format_utc(s.to_ms);
      span["seconds"] = static_cast<double>(s.to_ms - s.from_ms) / 1000.0;
      span["bucket"] = core::to_string(s.bucket);
      span["phase"] = domain::to_string(s.phase);
      span["attempt"] = s.attempt;
      timeline.push_back(std::move(span));
    }
    j["timeline"] = std::move(timeline);
    nlohmann::ordered_json marks = nlohmann::ordered_json::array();
    for (const auto& m : account.marks) {
      nlohmann::ordered_json mark;
      mark["at"] = util::format_utc(m.at_ms);
      mark["attempt"] = m.attempt;
      mark["what"] = std::string(domain::to_string(m.what));
      marks.push_back(std::move(mark));
    }
    j["marks"] = std::move(marks);
  }
  return j;
}

std::string goodput_text(const core::JobAccount& account) {
  const auto goodput = account.goodput();
  if (!goodput) {
    return "goodput -";
  }
  return "goodput " + percent_text(*goodput) + " (" + span_text(account.of(core::Bucket::productive)) +
         " productive of " + span_text(account.wall_ms()) + ")";
}

std::string prices_note(const config::PriceTable& prices) {
  std::string note = "list prices per chip-hour (" + util::join(prices.files, " + ");
  if (!prices.region.empty()) {
    note += ", " + prices.region;
  }
  if (!prices.as_of.empty()) {
    note += ", as of " + prices.as_of;
  }
  note += "), before discounts: every cost is an estimate";
  return note;
}

std::string money(double amount, const config::PriceTable& prices) {
  return prices.money(amount);
}

void print_account(std::ostream& out, const core::JobAccount& account, const config::PriceTable& prices) {
  out << "\nWhere the time went: " << goodput_text(account) << '\n';
  const auto wall = account.wall_ms();
  for (const auto bucket : core::all_buckets()) {
    const auto ms = account.of(bucket);
    std::string label(core::to_string(bucket));
    label.resize(14, ' ');
    std::string time = span_text(ms);
    time.resize(9, ' ');
    out << "  " << label << time
        << (wall > 0 ? percent_text(static_cast<double>(ms) / static_cast<double>(wall)) : std::string("-"));
    if (bucket == core::Bucket::lost && account.lost_steps > 0) {
      out << "  (" << account.lost_steps << " steps done again)";
    }
    out << '\n';
  }
  if (account.excluded_ms > 0) {
    out << "  (not counted: " << span_text(account.excluded_ms) << " finished before a resume)\n";
  }
  if (!account.usage.empty()) {
    out << "Chip-hours\n";
    for (const auto& u : account.usage) {
      const auto price = prices.chip_hour(u.accelerator, u.tier);
      const int chips = u.chips * u.slices;
      out << "  " << printable(u.accelerator) << (u.slices > 1 ? "x" + std::to_string(u.slices) : std::string()) << " "
          << domain::to_string(u.tier) << " in " << printable(u.zone) << ": " << chips
          << (chips == 1 ? " chip, " : " chips, ") << decimal(u.chip_hours, 2) << " chip-hours";
      if (u.borrowed) {
        out << " on its worker's slice (the worker's cost)";
      } else if (price) {
        out << " x " << money(*price, prices) << " = " << money(u.chip_hours * *price, prices);
      } else {
        out << ", no price in the table";
      }
      out << (u.estimated ? " (time partly inferred)" : "") << '\n';
    }
    const auto cost = cost_of(account, prices);
    out << "  cost ~" << money(cost.amount, prices) << (cost.complete ? "" : " and slices without a price") << ": "
        << prices_note(prices) << '\n';
  }
  for (const auto& note : account.notes) {
    out << "  note: " << printable(note) << '\n';
  }
}

} // namespace jobman::reporting
