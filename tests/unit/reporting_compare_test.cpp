// `report --compare`: runs of one experiment on two accelerators recorded through the store as the supervisor records
// them (their slices, step lines, preemptions and a fallback to on-demand), then each group's figures checked against
// what the test computes from the steps it wrote, the slice times the store kept and the prices file; the experiment
// of a job (job.experiment, else its name without the sweep's suffix); the JSON and CSV; and the steps per dollar
// `availability --experiment` shows, measured or estimated.
#include "jobman/config/loader.hpp"
#include "jobman/config/prices.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/reporting/compare.hpp"
#include "jobman/reporting/report.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

namespace jobman::reporting {
namespace reporting_compare_test {

using domain::AttemptOutcome;
using domain::Phase;
using domain::Pricing;

// The prices file the tests price with: v4 and v5e at rates of their own, over the built-in table.
constexpr double kV4Spot = 1.25;
constexpr double kV4OnDemand = 3.5;
constexpr double kV5eSpot = 0.5;
const std::string kPrices = "generations:\n"
                            "  v4: {spot: 1.25, ondemand: 3.5}\n"
                            "  v5litepod: {spot: 0.5}\n";

// The chips of the accelerators the runs use (a v4-8 has 4 chips on one host; a v5litepod-16 16 chips on 4 hosts).
constexpr int kV4Chips = 4;
constexpr int kV5eChips = 16;

// A v4-8 spot job named llama in us-central2-b, with vars lr and bs.
const std::string kTrain = std::string(JOBMAN_TEST_DATA_DIR) + "/cli/llama.yaml";

// Waits until the store's clock has passed `ms`, so that a slice recorded up at `ms` is held for some time.
void await_clock_past(const store::JobStore& db, std::int64_t ms) {
  while (db.clock_ms() <= ms) {
    std::this_thread::yield();
  }
}

// Where an attempt's slice is.
struct Where {
  std::string accelerator;
  std::string zone;
  Pricing tier = Pricing::spot;
  int hosts = 1;
};
const Where kV4Spot8{"v4-8", "us-central2-b", Pricing::spot, 1};
const Where kV4OnDemand8{"v4-8", "us-central2-b", Pricing::ondemand, 1};
const Where kV5eSpot16{"v5litepod-16", "us-west4-a", Pricing::spot, 4};

class ReportCompare : public ::testing::Test {
protected:
  test::TempDir dir;
  store::JobStore db = store::JobStore::open(dir / "jobman.db");
  config::PriceTable prices = config::load_prices(dir.write("prices.yaml", kPrices));

  // The jobs `create` records for the config in `path` (or its text `yaml`, when given) with these --sweep and
  // --set arguments, one per sweep member.
  std::vector<std::int64_t> create(const std::string& path, const std::vector<std::string>& sweep = {},
                                   const std::vector<std::string>& set = {}, const std::string& yaml = {}) {
    config::LoadOptions options;
    options.sweep_args = sweep;
    options.set_overrides = set;
    return core::create_jobs(
        db, yaml.empty() ? config::load_job_configs(path, options) : config::parse_job_configs(yaml, path, options),
        "alice");
  }

  void move(std::int64_t id, Phase to) {
    ASSERT_TRUE(db.jobs().transition(id, std::nullopt, domain::change_to(to, "set by the test")));
  }

  // An attempt as the supervisor records one: its slice asked for and up, the steps its workers printed, its end
  // with `outcome`, and its slice's deletion confirmed.
  void attempt(std::int64_t id, const Where& where, const std::vector<std::int64_t>& steps, AttemptOutcome outcome) {
    const int number = static_cast<int>(db.attempts().of(id).size()) + 1;
    const std::string name = "qr-" + std::to_string(id) + "-" + std::to_string(number);
    move(id, Phase::provisioning);
    db.attempts().begin(
        id, domain::Placement{name, name, where.zone, where.accelerator, where.hosts, std::nullopt, where.tier});
    db.attempts().record_slice_active(id, number, {});
    const auto up = db.attempts().of(id).back().active_ms.value();
    move(id, Phase::running);
    // Each reading later than the one before, the attempt's end later than its last.
    domain::ProgressSeries series;
    std::int64_t last = up;
    for (const auto step : steps) {
      await_clock_past(db, last);
      last = db.clock_ms();
      series.add(step, last);
    }
    if (!steps.empty()) {
      db.attempts().record_progress({{id, number, series, std::nullopt}});
    }
    await_clock_past(db, last);
    db.attempts().end(id, number, outcome, outcome == AttemptOutcome::succeeded ? std::optional<int>(0) : std::nullopt);
    if (outcome == AttemptOutcome::preempted) {
      move(id, Phase::recovering);
    }
    db.attempts().mark_released(id, name, "deleted by the test");
  }

  // The hours each attempt of `id` held its slice, as the store recorded it.
  std::vector<double> held_hours(std::int64_t id) const {
    std::vector<double> hours;
    for (const auto& a : db.attempts().of(id)) {
      hours.push_back(static_cast<double>(a.released_ms.value() - a.active_ms.value()) / 3.6e6);
    }
    return hours;
  }

  core::JobAccount account(std::int64_t id, std::int64_t now) const {
    return account_of(db, db.jobs().get(id), db.attempts().of(id), now);
  }
};

const CompareGroup* find_group(const std::vector<CompareGroup>& groups, const std::string& experiment,
                               const Where& where) {
  for (const auto& g : groups) {
    if (g.experiment == experiment && g.accelerator == where.accelerator && g.zone == where.zone &&
        g.tier == where.tier) {
      return &g;
    }
  }
  return nullptr;
}

// The figures of a group from what the test knows of it: its steps, its slices' hours held and their chips, and the
// price of a chip-hour there.
void expect_figures(const CompareGroup& g, std::int64_t steps, double hours, int chips, double price, int preemptions) {
  const double chip_hours = chips * hours;
  const double cost = chip_hours * price;
  SCOPED_TRACE(g.experiment + " on " + g.accelerator + " " + domain::to_string(g.tier) + " in " + g.zone);
  EXPECT_EQ(g.steps, steps);
  EXPECT_NEAR(g.held_hours, hours, hours * 1e-9);
  EXPECT_NEAR(g.chip_hours, chip_hours, chip_hours * 1e-9);
  EXPECT_NEAR(g.cost, cost, cost * 1e-9);
  EXPECT_TRUE(g.priced);
  EXPECT_EQ(g.preemptions, preemptions);
  ASSERT_TRUE(g.steps_per_hour() && g.steps_per_chip_hour() && g.steps_per_dollar() && g.preemptions_per_day());
  const double n = static_cast<double>(steps);
  EXPECT_NEAR(*g.steps_per_hour(), n / hours, n / hours * 1e-9);
  EXPECT_NEAR(*g.steps_per_chip_hour(), n / chip_hours, n / chip_hours * 1e-9);
  EXPECT_NEAR(*g.steps_per_dollar(), n / cost, n / cost * 1e-9);
  EXPECT_NEAR(*g.preemptions_per_day(), preemptions * 24 / hours, preemptions * 24 / hours * 1e-9 + 1e-12);
}

double sum(const std::vector<double>& values) {
  double total = 0;
  for (const auto v : values) {
    total += v;
  }
  return total;
}

TEST_F(ReportCompare, FiguresOfOneExperimentOnTwoAcceleratorsFollowFromTheStepLinesSliceTimesAndPrices) {
  // Experiment "llama": a sweep of two on v4-8 (named llama-lr=0.1 and llama-lr=0.3), and a run named otherwise whose
  // config says it is one, on v5litepod-16.
  const auto sweep = create(kTrain, {"vars.lr=0.1,0.3"});
  ASSERT_EQ(sweep.size(), 2u);
  const auto lr1 = sweep[0];
  const auto lr3 = sweep[1];
  EXPECT_EQ(db.jobs().get(lr1).name, "llama-lr=0.1");
  const auto v5e =
      create(kTrain, {},
             {"job.name=v5e-trial", "job.experiment=llama", "tpu.accelerator=v5litepod-16", "tpu.zone=us-west4-a"})
          .front();
  // Another experiment whose name begins the same, a finished run that printed no step, one still running.
  const auto big = create(kTrain, {}, {"job.name=llama-big"}).front();
  const auto silent = create(kTrain, {}, {"job.name=llama"}).front();
  const auto running = create(kTrain, {}, {"job.name=llama"}).front();

  // lr=0.1: preempted at step 1000, resumed from the checkpoint of step 800 and on to 3000.
  attempt(lr1, kV4Spot8, {100, 600, 1000}, AttemptOutcome::preempted);
  attempt(lr1, kV4Spot8, {800, 2000, 3000}, AttemptOutcome::succeeded);
  move(lr1, Phase::succeeded);
  // lr=0.3: preempted at step 500, then on-demand (the fallback) to 2000, where it failed.
  attempt(lr3, kV4Spot8, {50, 500}, AttemptOutcome::preempted);
  attempt(lr3, kV4OnDemand8, {500, 1200, 2000}, AttemptOutcome::failed);
  move(lr3, Phase::failed);
  attempt(v5e, kV5eSpot16, {250, 2500}, AttemptOutcome::succeeded);
  move(v5e, Phase::succeeded);
  attempt(big, kV4Spot8, {10, 40}, AttemptOutcome::succeeded);
  move(big, Phase::succeeded);
  attempt(silent, kV4Spot8, {}, AttemptOutcome::succeeded);
  move(silent, Phase::succeeded);
  attempt(running, kV4Spot8, {5, 9}, AttemptOutcome::preempted);
  move(running, Phase::running);

  const std::int64_t now = db.clock_ms() + 1000;
  ReportSelection selection;
  selection.since_ms = now - 3'600'000;
  const auto report = build_comparison(db, selection, prices, now);
  ASSERT_TRUE(report.compared);
  EXPECT_EQ(report.runs_compared, 4u) << "lr=0.1, lr=0.3, v5e-trial and llama-big";
  EXPECT_EQ(report.runs_without_steps, 1u) << "the run that printed no step";
  ASSERT_EQ(report.comparison.size(), 4u);
  const std::vector<std::pair<std::string, Where>> order = {
      {"llama", kV4OnDemand8}, {"llama", kV4Spot8}, {"llama", kV5eSpot16}, {"llama-big", kV4Spot8}};
  for (std::size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(&report.comparison[i], find_group(report.comparison, order[i].first, order[i].second))
        << "groups by experiment, accelerator, zone and tier; " << i;
  }

  // Steps: each run's highest step, each step once, counted on the slice that first reached it.
  const auto h1 = held_hours(lr1);
  const auto h3 = held_hours(lr3);
  const auto* spot = find_group(report.comparison, "llama", kV4Spot8);
  ASSERT_NE(spot, nullptr);
  EXPECT_EQ(spot->runs, 2);
  EXPECT_EQ(spot->succeeded, 1);
  expect_figures(*spot, 3000 + 500, h1[0] + h1[1] + h3[0], kV4Chips, kV4Spot, 2);
  const auto* ondemand = find_group(report.comparison, "llama", kV4OnDemand8);
  ASSERT_NE(ondemand, nullptr);
  EXPECT_EQ(ondemand->runs, 1);
  EXPECT_EQ(ondemand->succeeded, 0);
  expect_figures(*ondemand, 2000 - 500, h3[1], kV4Chips, kV4OnDemand, 0);
  const auto* v5 = find_group(report.comparison, "llama", kV5eSpot16);
  ASSERT_NE(v5, nullptr);
  expect_figures(*v5, 2500, sum(held_hours(v5e)), kV5eChips, kV5eSpot, 0);
  const auto* other = find_group(report.comparison, "llama-big", kV4Spot8);
  ASSERT_NE(other, nullptr);
  expect_figures(*other, 40, sum(held_hours(big)), kV4Chips, kV4Spot, 0);

  // Goodput is the accounts' (core::account): a run in one place brings its whole account, and a run in two splits
  // its wall time between them without losing any.
  for (const auto& [group, id] : {std::pair{v5, v5e}, std::pair{other, big}}) {
    const auto a = account(id, now);
    EXPECT_EQ(group->ms, a.ms);
    EXPECT_EQ(group->goodput(), a.goodput());
  }
  const auto a1 = account(lr1, now);
  const auto a3 = account(lr3, now);
  EXPECT_EQ(core::wall_ms(spot->ms) + core::wall_ms(ondemand->ms), a1.wall_ms() + a3.wall_ms());
  EXPECT_EQ(spot->ms[static_cast<std::size_t>(core::Bucket::productive)] +
                ondemand->ms[static_cast<std::size_t>(core::Bucket::productive)],
            a1.of(core::Bucket::productive) + a3.of(core::Bucket::productive));
  EXPECT_GT(a1.of(core::Bucket::lost), 0) << "steps 800 to 1000 were done twice";
  EXPECT_GT(core::wall_ms(ondemand->ms), 0);

  // One experiment asked for: its groups only, the same figures.
  selection.experiment = "llama";
  const auto one = build_comparison(db, selection, prices, now);
  ASSERT_EQ(one.comparison.size(), 3u);
  EXPECT_EQ(one.comparison[1].steps, spot->steps);
  EXPECT_DOUBLE_EQ(one.comparison[1].cost, spot->cost);
}

TEST_F(ReportCompare, TheExperimentIsJobExperimentElseTheNameWithoutTheSweepsSuffix) {
  // Two swept keys, in either order, and a value that is a list ("llama-tags=[a, b]-bs=32": the sweep section's keys
  // come before --sweep's); two whose last parts are the same (the name gives their whole paths).
  for (const auto& ids :
       {create(kTrain, {"vars.lr=0.1,0.3", "vars.bs=32,64"}),
        create(kTrain, {"vars.bs=32"}, {}, test::file_text(kTrain) + "sweep:\n  tpu.tags: [[a, b], [c]]\n")}) {
    for (const auto id : ids) {
      const auto job = db.jobs().get(id, true);
      EXPECT_NE(job.name, "llama");
      EXPECT_FALSE(job.sweep_label.empty());
      EXPECT_EQ(experiment_of(job), "llama") << job.name << " (" << job.sweep_label << ")";
    }
  }
  for (const auto id : create(kTrain, {"tpu.labels.team=a,b", "tpu.metadata.team=c"})) {
    const auto job = db.jobs().get(id, true);
    EXPECT_NE(job.name.find("-tpu.labels.team="), std::string::npos) << job.name;
    EXPECT_EQ(experiment_of(job), "llama") << job.name;
  }
  // job.experiment wins over the name, swept or not, whatever it holds: what the config reads back from its snapshot.
  for (const auto id : create(kTrain, {"vars.lr=0.1,0.3"}, {"job.experiment=llama-70b"})) {
    EXPECT_EQ(experiment_of(db.jobs().get(id, true)), "llama-70b");
  }
  for (const auto& [written, name] : std::vector<std::pair<std::string, std::string>>{
           {"llama 7b/v2", "llama 7b/v2"},
           {"'123'", "123"},
           {"'yes'", "yes"},
           {"'null'", "null"},
           {"'a \"quoted\" name, with: colon'", "a \"quoted\" name, with: colon"},
           {"\"tab\\there\\\\ \\x01\"", "tab\there\\ \x01"},
           {"'lama \u00e9t\u00e9'", "lama \u00e9t\u00e9"},
       }) {
    const auto job = db.jobs().get(create(kTrain, {}, {"job.experiment=" + written}).front(), true);
    EXPECT_EQ(core::recorded_config(job).job.experiment, name) << written;
    EXPECT_EQ(experiment_of(job), name) << written << " in\n" << job.config_yaml;
  }
  // The value is read off the snapshot's job section, without reading the rest of the config.
  auto broken = db.jobs().get(create(kTrain, {}, {"job.experiment=llama-70b"}).front(), true);
  broken.config_yaml += "tpu:\n  no_such_key: 1\n";
  EXPECT_THROW(core::recorded_config(broken), ConfigError);
  EXPECT_EQ(experiment_of(broken), "llama-70b");
  // Without its recorded config, or with one that no longer parses, the name says.
  auto job = db.jobs().get(create(kTrain, {"vars.lr=0.1"}).front(), true);
  job.config_yaml = "job:\n  experiment: [not, a, name]\n";
  EXPECT_EQ(experiment_of(job), "llama");

  // A name that does not end as its sweep label says is kept whole; a name of no sweep is its own experiment.
  EXPECT_EQ(name_without_sweep_suffix("renamed", "vars.lr=0.1"), "renamed");
  EXPECT_EQ(name_without_sweep_suffix("llama-lr=0.1", ""), "llama-lr=0.1");
  EXPECT_EQ(name_without_sweep_suffix("llama-lr=0.1-bs=[1, 2]", "vars.bs=[1, 2],vars.lr=0.1"), "llama");
  EXPECT_EQ(name_without_sweep_suffix("-lr=0.1", "vars.lr=0.1"), "-lr=0.1") << "nothing would be left";
}

// A report with two groups of one experiment, as the writers get it.
Report two_groups() {
  Report report;
  report.now_ms = 1'700'000'000'000;
  report.since_ms = report.now_ms - 7 * 86'400'000LL;
  report.compared = true;
  report.runs_compared = 3;
  report.runs_without_steps = 1;
  CompareGroup a;
  a.experiment = "llama, \"big\"";
  a.accelerator = "v4-8";
  a.zone = "us-central2-b";
  a.tier = Pricing::spot;
  a.runs = 2;
  a.succeeded = 1;
  a.steps = 4000;
  a.held_hours = 2.5;
  a.chip_hours = 10;
  a.cost = 12.5;
  a.ms[static_cast<std::size_t>(core::Bucket::productive)] = 8'000'000;
  a.ms[static_cast<std::size_t>(core::Bucket::queued)] = 2'000'000;
  a.preemptions = 1;
  CompareGroup b = a;
  b.accelerator = "v5litepod-16";
  b.zone = "us-west4-a";
  b.runs = 1;
  b.steps = 2500;
  b.priced = false;
  report.comparison = {a, b};
  return report;
}

TEST_F(ReportCompare, JsonAndCsvGiveEveryGroupWithItsFiguresAndWhatTheyAreOf) {
  const auto report = two_groups();
  std::ostringstream json_text;
  write_compare_json(json_text, report, prices);
  const auto j = nlohmann::ordered_json::parse(json_text.str());
  EXPECT_EQ(j["runs"], 3);
  EXPECT_EQ(j["runs_without_steps"], 1);
  EXPECT_EQ(j["prices"]["currency"], "USD");
  EXPECT_FALSE(j["since"].is_null());
  ASSERT_EQ(j["groups"].size(), 2u);
  const std::vector<std::string> keys = {"experiment",
                                         "accelerator",
                                         "zone",
                                         "tier",
                                         "runs",
                                         "succeeded",
                                         "steps",
                                         "held_hours",
                                         "chip_hours",
                                         "price_per_chip_hour",
                                         "cost",
                                         "cost_complete",
                                         "estimated",
                                         "wall_seconds",
                                         "productive_seconds",
                                         "preemptions",
                                         "steps_per_hour",
                                         "steps_per_chip_hour",
                                         "steps_per_dollar",
                                         "goodput",
                                         "preemptions_per_day"};
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& g = j["groups"][i];
    const auto& want = report.comparison[i];
    std::vector<std::string> got;
    for (const auto& [key, value] : g.items()) {
      got.push_back(key);
    }
    EXPECT_EQ(got, keys) << "the members, in docs/JSON.md's order";
    EXPECT_EQ(g["experiment"], want.experiment);
    EXPECT_EQ(g["steps"], want.steps);
    EXPECT_DOUBLE_EQ(g["steps_per_hour"].get<double>(), *want.steps_per_hour());
    EXPECT_DOUBLE_EQ(g["steps_per_chip_hour"].get<double>(), *want.steps_per_chip_hour());
    EXPECT_DOUBLE_EQ(g["goodput"].get<double>(), 0.8);
    EXPECT_DOUBLE_EQ(g["preemptions_per_day"].get<double>(), 24 / 2.5);
    EXPECT_DOUBLE_EQ(g["price_per_chip_hour"].get<double>(),
                     i == 0 ? kV4Spot : kV5eSpot); // The table's, whatever the group's slices were priced at.
  }
  EXPECT_DOUBLE_EQ(j["groups"][0]["steps_per_dollar"].get<double>(), 4000 / 12.5);
  EXPECT_TRUE(j["groups"][1]["steps_per_dollar"].is_null()) << "a slice without a price: no steps per dollar";
  EXPECT_FALSE(j["groups"][1]["cost_complete"].get<bool>());

  std::ostringstream csv;
  write_compare_csv(csv, report, prices);
  const auto lines = util::split(csv.str(), '\n');
  ASSERT_EQ(lines.size(), 4u) << csv.str(); // The header, two groups, and the empty piece after the last newline.
  const auto header = util::split(lines[0], ',');
  EXPECT_EQ(header.front(), "experiment");
  EXPECT_EQ(header.size(), 21u);
  EXPECT_TRUE(lines[1].starts_with("\"llama, \"\"big\"\"\",v4-8,us-central2-b,spot,2,1,4000,")) << lines[1];
  EXPECT_NE(lines[1].find(",320.000000,0.8000,9.600000"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find(",USD,false,"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find(",250.000000,,0.8000,"), std::string::npos) << "no steps per dollar: " << lines[2];

  std::ostringstream text;
  write_compare_text(text, report, prices, false);
  EXPECT_NE(text.str().find("STEPS/$"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("no price"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("1 finished run printed no step"), std::string::npos) << text.str();
}

TEST_F(ReportCompare, AvailabilityShowsTheExperimentsOwnStepsPerDollarOrAnEstimateFromTheSameAccelerator) {
  auto report = two_groups();
  report.comparison[1].priced = true;
  const auto& groups = report.comparison;
  const std::string experiment = groups[0].experiment;
  // Measured where it ran.
  const auto here = steps_per_dollar_at(groups, experiment, "v4-8", "us-central2-b", Pricing::spot, prices);
  ASSERT_TRUE(here);
  EXPECT_FALSE(here->estimated);
  EXPECT_DOUBLE_EQ(here->value, 4000 / 12.5);
  EXPECT_EQ(here->runs, 2);
  // Estimated on the same accelerator elsewhere: its steps per chip-hour at this place's price.
  const auto ondemand = steps_per_dollar_at(groups, experiment, "v4-8", "us-central2-b", Pricing::ondemand, prices);
  ASSERT_TRUE(ondemand);
  EXPECT_TRUE(ondemand->estimated);
  EXPECT_DOUBLE_EQ(ondemand->value, 4000.0 / 10 / kV4OnDemand);
  const auto east = steps_per_dollar_at(groups, experiment, "v4-8", "us-east1-d", Pricing::spot, prices);
  ASSERT_TRUE(east);
  EXPECT_TRUE(east->estimated);
  EXPECT_DOUBLE_EQ(east->value, 4000.0 / 10 / kV4Spot);
  // Nothing on another accelerator, for another experiment, or without a price.
  EXPECT_FALSE(steps_per_dollar_at(groups, experiment, "v6e-8", "us-east5-a", Pricing::spot, prices));
  EXPECT_FALSE(steps_per_dollar_at(groups, "t5", "v4-8", "us-central2-b", Pricing::spot, prices));
  EXPECT_FALSE(
      steps_per_dollar_at(groups, experiment, "v4-8", "us-central2-b", Pricing::flex_start, config::PriceTable{}));
}

} // namespace reporting_compare_test
} // namespace jobman::reporting
