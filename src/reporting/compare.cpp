#include "jobman/reporting/compare.hpp"

#include "jobman/core/jobs.hpp"
#include "jobman/reporting/accounting.hpp"
#include "jobman/reporting/json.hpp"
#include "jobman/reporting/report.hpp"
#include "jobman/reporting/text.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string_view>
#include <utility>

namespace jobman::reporting {

namespace {

using domain::AttemptRecord;
using domain::Phase;

// Whether the text at `at` in a sweep label starts a "KEY=" (a key path has no comma, space or bracket, which a
// value's flow text, "[1, 2]", may have after a comma).
bool starts_key(std::string_view label, std::size_t at) {
  const auto eq = label.find('=', at);
  if (eq == std::string_view::npos || eq == at) {
    return false;
  }
  return std::none_of(label.begin() + static_cast<std::ptrdiff_t>(at), label.begin() + static_cast<std::ptrdiff_t>(eq),
                      [](char c) {
                        return c == ',' || c == '[' || c == ']' || c == '{' || c == '}' || c == '"' || c == '\'' ||
                               std::isspace(static_cast<unsigned char>(c)) != 0;
                      });
}

// The key paths and values of a sweep label (core::sweep_label: "vars.bs=32,vars.lr=0.1"); empty when it does not
// read so.
std::vector<std::pair<std::string, std::string>> sweep_point(std::string_view label) {
  std::vector<std::pair<std::string, std::string>> point;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= label.size(); ++i) {
    if (i < label.size() && (label[i] != ',' || !starts_key(label, i + 1))) {
      continue;
    }
    const auto piece = label.substr(start, i - start);
    const auto eq = piece.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return {};
    }
    point.emplace_back(std::string(piece.substr(0, eq)), std::string(piece.substr(eq + 1)));
    start = i + 1;
  }
  return point;
}

// The last part of a key path: "lr" for "vars.lr".
std::string leaf(const std::string& path) {
  return path.substr(path.rfind('.') + 1);
}

// A plain scalar as the snapshot writer leaves a string unquoted (src/config/yaml_tree.cpp): characters that need no
// quotes, and nothing that would read as a number, a boolean or null.
bool plain_string(std::string_view text) {
  static constexpr std::string_view kTyped[] = {"null", "~", "true", "false", "yes", "no", "on", "off", "y", "n"};
  if (text.empty() || text.front() == ' ' || text.back() == ' ' ||
      std::string_view("0123456789+-.").find(text.front()) != std::string_view::npos) {
    return false;
  }
  std::string lower;
  for (const char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("_./-+=@~ ").find(c) == std::string_view::npos) {
      return false;
    }
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return std::find(std::begin(kTyped), std::end(kTyped), lower) == std::end(kTyped);
}

// A one-line double-quoted scalar as the snapshot writer escapes it (\", \\, \n, \t, \r, \xHH); nullopt for any other
// escape, or text that is not one.
std::optional<std::string> double_quoted(std::string_view text) {
  if (text.size() < 2 || text.front() != '"' || text.back() != '"') {
    return std::nullopt;
  }
  std::string out;
  for (std::size_t i = 1; i + 1 < text.size(); ++i) {
    if (text[i] == '"') {
      return std::nullopt;
    }
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    if (++i + 1 >= text.size()) {
      return std::nullopt;
    }
    switch (text[i]) {
    case '"': out += '"'; break;
    case '\\': out += '\\'; break;
    case 'n': out += '\n'; break;
    case 't': out += '\t'; break;
    case 'r': out += '\r'; break;
    case 'x': {
      unsigned value = 0;
      if (i + 3 >= text.size() ||
          std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16).ptr != text.data() + i + 3) {
        return std::nullopt;
      }
      out += static_cast<char>(value);
      i += 2;
      break;
    }
    default: return std::nullopt;
    }
  }
  return out;
}

// job.experiment as a job's config snapshot wrote it, read off its line in the snapshot's `job:` section, so that a
// report of thousands of runs does not parse thousands of configs: "" when the line says null or the section has none
// (a snapshot from before job.experiment); nullopt when the snapshot or the value is not written the way the writer
// writes a one-line string (the config is then read whole).
std::optional<std::string> snapshot_experiment(std::string_view yaml) {
  std::size_t at = yaml.starts_with("job:\n") ? 0 : yaml.find("\njob:\n");
  if (at == std::string_view::npos) {
    return yaml.find("experiment") == std::string_view::npos ? std::optional<std::string>("") : std::nullopt;
  }
  at = yaml.find('\n', at + (yaml[at] == '\n' ? 1 : 0)) + 1;
  constexpr std::string_view kKey = "  experiment: ";
  while (at < yaml.size() && yaml.substr(at).starts_with("  ")) {
    const auto end = std::min(yaml.find('\n', at), yaml.size());
    const auto line = yaml.substr(at, end - at);
    if (line.starts_with(kKey)) {
      const auto value = line.substr(kKey.size());
      if (value == "null") {
        return std::string();
      }
      return plain_string(value) ? std::optional<std::string>(value) : double_quoted(value);
    }
    at = end + 1;
  }
  return std::string();
}

bool is_finished_run(const domain::JobRecord& job) {
  return job.kind != domain::JobKind::worker &&
         (job.phase == Phase::succeeded || job.phase == Phase::failed || job.phase == Phase::cancelled);
}

// Where an attempt's slice ran, as a group's key names it (the tier by its name, which orders the groups).
struct Place {
  std::string accelerator;
  std::string zone;
  domain::Pricing tier = domain::Pricing::spot;
  bool operator==(const Place&) const = default;
};

// A run's part in one place.
struct RunShare {
  Place place;
  std::int64_t steps = 0;
  core::BucketTimes ms{};
  int preemptions = 0;
  double held_hours = 0;
  double chip_hours = 0;
  double cost = 0;
  bool priced = true;
  bool estimated = false;
};

std::optional<double> ratio(double numerator, double denominator) {
  return denominator > 0 ? std::optional<double>(numerator / denominator) : std::nullopt;
}

} // namespace

std::string name_without_sweep_suffix(const std::string& name, const std::string& sweep_label) {
  const auto point = sweep_point(sweep_label);
  if (point.empty()) {
    return name;
  }
  // The loader appends "-LABEL=VALUE" for each swept key in the order the sweep gives them, LABEL the key's last part
  // unless another swept key has the same one (src/config/loader.cpp); the label lists them by key path. Each is
  // taken off the end, the longest that fits first.
  std::vector<std::string> pieces;
  for (const auto& key_value : point) {
    const std::string& path = key_value.first;
    const bool shared = std::count_if(point.begin(), point.end(),
                                      [&](const auto& other) { return leaf(other.first) == leaf(path); }) > 1;
    pieces.push_back("-" + (shared ? path : leaf(path)) + "=" + key_value.second);
  }
  std::string_view rest = name;
  while (!pieces.empty()) {
    auto fits = pieces.end();
    for (auto it = pieces.begin(); it != pieces.end(); ++it) {
      if (rest.ends_with(*it) && (fits == pieces.end() || it->size() > fits->size())) {
        fits = it;
      }
    }
    if (fits == pieces.end()) {
      return name;
    }
    rest.remove_suffix(fits->size());
    pieces.erase(fits);
  }
  return rest.empty() ? name : std::string(rest);
}

std::string experiment_of(const domain::JobRecord& job) {
  auto experiment = snapshot_experiment(job.config_yaml);
  if (!experiment) {
    try {
      experiment = core::recorded_config(job).job.experiment;
    } catch (const ConfigError&) {
      // Written by an older jobman and no longer valid: its name says which experiment it was.
    }
  }
  return experiment && !experiment->empty() ? *experiment : name_without_sweep_suffix(job.name, job.sweep_label);
}

std::optional<double> CompareGroup::steps_per_hour() const {
  return ratio(static_cast<double>(steps), held_hours);
}

std::optional<double> CompareGroup::steps_per_chip_hour() const {
  return ratio(static_cast<double>(steps), chip_hours);
}

std::optional<double> CompareGroup::steps_per_dollar() const {
  return priced ? ratio(static_cast<double>(steps), cost) : std::nullopt;
}

std::optional<double> CompareGroup::preemptions_per_day() const {
  return ratio(preemptions * 24.0, held_hours);
}

Comparison::Comparison(const config::PriceTable& prices, std::string experiment)
    : prices_(prices), experiment_(std::move(experiment)) {}

void Comparison::add(const domain::JobRecord& job, std::span<const AttemptRecord> attempts,
                     const core::JobAccount& account) {
  if (!is_finished_run(job)) {
    return;
  }
  // A run of the experiment asked for is named after it or names it in its config (as it is, unless the snapshot
  // escapes it): the others are not read further.
  const bool escaped = std::any_of(experiment_.begin(), experiment_.end(), [](char c) {
    return c == '"' || c == '\\' || std::iscntrl(static_cast<unsigned char>(c)) != 0;
  });
  if (!experiment_.empty() && !escaped && !job.name.starts_with(experiment_) &&
      job.config_yaml.find(experiment_) == std::string::npos) {
    return;
  }
  const std::string experiment = experiment_of(job);
  if (!experiment_.empty() && experiment != experiment_) {
    return;
  }
  if (std::all_of(attempts.begin(), attempts.end(), [](const AttemptRecord& a) { return a.progress.empty(); })) {
    ++runs_without_steps_;
    return;
  }

  // The places the run held a slice in, with their slice time and cost (the account's usage).
  std::vector<RunShare> shares;
  const auto share_of = [&shares](const Place& place) -> RunShare* {
    const auto it = std::find_if(shares.begin(), shares.end(), [&](const RunShare& s) { return s.place == place; });
    return it == shares.end() ? nullptr : &*it;
  };
  for (const auto& usage : account.usage) {
    const Place place{usage.accelerator, usage.zone, usage.tier};
    RunShare* share = share_of(place);
    if (share == nullptr) {
      share = &shares.emplace_back();
      share->place = place;
    }
    const int chips = usage.chips * usage.slices;
    share->held_hours += chips > 0 ? usage.chip_hours / chips : 0.0;
    share->chip_hours += usage.chip_hours;
    const auto cost = cost_of(usage, prices_);
    share->cost += cost.value_or(0.0);
    share->priced = share->priced && cost.has_value() && chips > 0;
    share->estimated = share->estimated || usage.estimated;
  }
  if (shares.empty()) {
    ++runs_without_steps_; // No slice came up: whatever it printed was not measured on one.
    return;
  }

  // Each attempt's share: where its slice ran when one came up there; else (a request given up, a slice that never
  // came up) the place of the next attempt that held one, or of the last before it, which its wait was spent getting.
  std::vector<RunShare*> share_by_attempt(attempts.size(), nullptr);
  for (std::size_t k = 0; k < attempts.size(); ++k) {
    const auto& a = attempts[k];
    share_by_attempt[k] = share_of({a.accelerator.empty() ? job.accelerator : a.accelerator, a.zone, a.pricing});
  }
  for (std::size_t k = attempts.size(); k-- > 0;) {
    if (share_by_attempt[k] == nullptr && k + 1 < attempts.size()) {
      share_by_attempt[k] = share_by_attempt[k + 1];
    }
  }
  for (std::size_t k = 1; k < attempts.size(); ++k) {
    if (share_by_attempt[k] == nullptr) {
      share_by_attempt[k] = share_by_attempt[k - 1];
    }
  }
  const auto share_of_attempt = [&](int number) {
    for (std::size_t k = 0; k < attempts.size(); ++k) {
      if (attempts[k].number == number) {
        return share_by_attempt[k];
      }
    }
    return share_by_attempt.empty() ? nullptr : share_by_attempt.front(); // Before the first attempt.
  };

  // Steps: what each attempt reached beyond the highest step of the attempts before it, so that work done again
  // after a resume counts once (the run's steps are the highest step it reached).
  std::int64_t reached = 0;
  for (std::size_t k = 0; k < attempts.size(); ++k) {
    const auto& a = attempts[k];
    if (a.outcome == domain::AttemptOutcome::preempted && a.active_ms && share_by_attempt[k] != nullptr) {
      ++share_by_attempt[k]->preemptions;
    }
    const auto latest = a.progress.latest();
    if (latest && latest->step > reached && share_by_attempt[k] != nullptr) {
      share_by_attempt[k]->steps += latest->step - reached;
      reached = latest->step;
    }
  }
  for (const auto& segment : account.timeline) {
    if (RunShare* share = share_of_attempt(segment.attempt)) {
      share->ms[static_cast<std::size_t>(segment.bucket)] += segment.to_ms - segment.from_ms;
    }
  }

  for (const auto& share : shares) {
    auto& group = groups_[{experiment, share.place.accelerator, share.place.zone, domain::to_string(share.place.tier)}];
    group.experiment = experiment;
    group.accelerator = share.place.accelerator;
    group.zone = share.place.zone;
    group.tier = share.place.tier;
    ++group.runs;
    group.succeeded += job.phase == Phase::succeeded ? 1 : 0;
    group.steps += share.steps;
    group.held_hours += share.held_hours;
    group.chip_hours += share.chip_hours;
    group.cost += share.cost;
    group.priced = group.priced && share.priced;
    group.estimated = group.estimated || share.estimated;
    for (std::size_t b = 0; b < core::kBucketCount; ++b) {
      group.ms[b] += share.ms[b];
    }
    group.preemptions += share.preemptions;
  }
  ++runs_;
}

std::vector<CompareGroup> Comparison::groups() const {
  std::vector<CompareGroup> out;
  out.reserve(groups_.size());
  for (const auto& [key, group] : groups_) {
    out.push_back(group);
  }
  return out;
}

std::optional<PlaceStepsPerDollar> steps_per_dollar_at(const std::vector<CompareGroup>& groups,
                                                       const std::string& experiment, const std::string& accelerator,
                                                       const std::string& zone, domain::Pricing tier,
                                                       const config::PriceTable& prices) {
  std::int64_t steps = 0;
  double chip_hours = 0;
  int runs = 0;
  for (const auto& g : groups) {
    if (g.experiment != experiment || g.accelerator != accelerator) {
      continue;
    }
    if (g.zone == zone && g.tier == tier) {
      const auto measured = g.steps_per_dollar();
      return measured ? std::optional<PlaceStepsPerDollar>({*measured, false, g.runs}) : std::nullopt;
    }
    steps += g.steps;
    chip_hours += g.chip_hours;
    runs += g.runs;
  }
  const auto price = prices.chip_hour(accelerator, tier);
  if (!price || *price <= 0 || chip_hours <= 0) {
    return std::nullopt;
  }
  return PlaceStepsPerDollar{static_cast<double>(steps) / chip_hours / *price, true, runs};
}

std::string figure_text(std::optional<double> value) {
  if (!value) {
    return "-";
  }
  const double size = std::abs(*value);
  if (size >= 100 || size == 0) {
    return decimal(*value, 0);
  }
  if (size >= 1) {
    return decimal(*value, size >= 10 ? 1 : 2);
  }
  // Three significant digits: 0.0123.
  return decimal(*value, std::min(12, 2 - static_cast<int>(std::floor(std::log10(size)))));
}

std::string compare_note(const config::PriceTable& prices) {
  return "Finished runs (SUCCEEDED, and FAILED or CANCELLED ones that printed a step), by the experiment "
         "(job.experiment, "
         "else the name without its sweep suffix) and the accelerator, zone and tier of their slices. STEPS: the "
         "highest step each run reached, each step counted once, where it was first reached. Per hour: per hour its "
         "slices were held; per chip-hour: per chips x slices x hours held; per " +
         prices.currency +
         ": per cost of those chip-hours at list prices. Goodput: productive over wall time (waits for a slice count "
         "where it came from). Preemptions per day: per 24 hours held.";
}

namespace {

// The header of the steps-per-money column: "STEPS/$" in dollars, "STEPS/EUR" in euros.
std::string per_money_header(const config::PriceTable& prices) {
  return "STEPS/" + (prices.currency == "USD" ? std::string("$") : prices.currency);
}

} // namespace

void write_compare_text(std::ostream& out, const Report& report, const config::PriceTable& prices, bool color) {
  if (report.comparison.empty()) {
    out << "No finished runs with steps to compare.";
  } else {
    out << report.runs_compared << (report.runs_compared == 1 ? " finished run" : " finished runs") << " in "
        << report.comparison.size() << (report.comparison.size() == 1 ? " group" : " groups") << "\n\n";
    Table table({"EXPERIMENT", "ACCELERATOR", "ZONE", "TIER", "RUNS", "STEPS", "STEPS/H", "STEPS/CHIP-H",
                 per_money_header(prices), "GOODPUT", "PREEMPT/DAY"});
    for (const auto& g : report.comparison) {
      table.add_row({printable(g.experiment), printable(g.accelerator), printable(g.zone), domain::to_string(g.tier),
                     std::to_string(g.runs), std::to_string(g.steps), figure_text(g.steps_per_hour()),
                     figure_text(g.steps_per_chip_hour()) + (g.estimated ? "*" : ""),
                     g.priced ? figure_text(g.steps_per_dollar()) : "no price", percent_text(g.goodput()),
                     figure_text(g.preemptions_per_day())});
    }
    table.print(out, color);
    out << "\n" << compare_note(prices) << " Costs: " << prices_note(prices) << ".";
    if (std::any_of(report.comparison.begin(), report.comparison.end(), [](const auto& g) { return g.estimated; })) {
      out << " *: a slice's deletion was never confirmed; its time is counted to its attempt's end.";
    }
  }
  if (report.runs_without_steps > 0) {
    out << (report.comparison.empty() ? " " : "\n") << report.runs_without_steps
        << (report.runs_without_steps == 1 ? " finished run printed" : " finished runs printed")
        << " no step on a slice and " << (report.runs_without_steps == 1 ? "is" : "are") << " left out.";
  }
  out << '\n';
}

void write_compare_csv(std::ostream& out, const Report& report, const config::PriceTable& prices) {
  out << "experiment,accelerator,zone,tier,runs,succeeded,steps,held_hours,chip_hours,cost,currency,cost_complete,"
         "estimated,wall_seconds,productive_seconds,preemptions,steps_per_hour,steps_per_chip_hour,steps_per_dollar,"
         "goodput,preemptions_per_day\n";
  const auto optional_field = [](std::optional<double> value, int decimals) {
    return value ? decimal(*value, decimals) : std::string();
  };
  for (const auto& g : report.comparison) {
    out << csv_quote(g.experiment) << ',' << csv_quote(g.accelerator) << ',' << csv_quote(g.zone) << ','
        << domain::to_string(g.tier) << ',' << g.runs << ',' << g.succeeded << ',' << g.steps << ','
        << decimal(g.held_hours, 6) << ',' << decimal(g.chip_hours, 6) << ',' << decimal(g.cost, 6) << ','
        << csv_quote(prices.currency) << ',' << (g.priced ? "true" : "false") << ',' << (g.estimated ? "true" : "false")
        << ',' << decimal(static_cast<double>(core::wall_ms(g.ms)) / 1000.0, 3) << ','
        << decimal(static_cast<double>(g.ms[static_cast<std::size_t>(core::Bucket::productive)]) / 1000.0, 3) << ','
        << g.preemptions << ',' << optional_field(g.steps_per_hour(), 6) << ','
        << optional_field(g.steps_per_chip_hour(), 6) << ',' << optional_field(g.steps_per_dollar(), 6) << ','
        << optional_field(g.goodput(), 4) << ',' << optional_field(g.preemptions_per_day(), 6) << '\n';
  }
}

void write_compare_json(std::ostream& out, const Report& report, const config::PriceTable& prices) {
  nlohmann::ordered_json j;
  j["generated_at"] = util::format_utc(report.now_ms);
  j["since"] = text_or_null(report.since_ms > 0 ? util::format_utc(report.since_ms) : std::string());
  j["prices"] = prices_json(prices);
  j["runs"] = report.runs_compared;
  j["runs_without_steps"] = report.runs_without_steps;
  auto groups = nlohmann::ordered_json::array();
  for (const auto& g : report.comparison) {
    nlohmann::ordered_json one;
    one["experiment"] = g.experiment;
    one["accelerator"] = g.accelerator;
    one["zone"] = g.zone;
    one["tier"] = domain::to_string(g.tier);
    one["runs"] = g.runs;
    one["succeeded"] = g.succeeded;
    one["steps"] = g.steps;
    one["held_hours"] = g.held_hours;
    one["chip_hours"] = g.chip_hours;
    one["price_per_chip_hour"] = json_or_null(prices.chip_hour(g.accelerator, g.tier));
    one["cost"] = g.cost;
    one["cost_complete"] = g.priced;
    one["estimated"] = g.estimated;
    one["wall_seconds"] = static_cast<double>(core::wall_ms(g.ms)) / 1000.0;
    one["productive_seconds"] = static_cast<double>(g.ms[static_cast<std::size_t>(core::Bucket::productive)]) / 1000.0;
    one["preemptions"] = g.preemptions;
    one["steps_per_hour"] = json_or_null(g.steps_per_hour());
    one["steps_per_chip_hour"] = json_or_null(g.steps_per_chip_hour());
    one["steps_per_dollar"] = json_or_null(g.steps_per_dollar());
    one["goodput"] = json_or_null(g.goodput());
    one["preemptions_per_day"] = json_or_null(g.preemptions_per_day());
    groups.push_back(std::move(one));
  }
  j["groups"] = std::move(groups);
  out << j.dump(2) << '\n';
}

} // namespace jobman::reporting
