// `jobman availability` through the binary: what it learnt of jobs stays when `jobman clean` removes them; and with
// `jobman report --compare`, an experiment's steps per dollar in each place.
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <cctype>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <thread>

namespace jobman::test {
namespace cli_availability_test {

const std::string kTrain = std::string(JOBMAN_TEST_DATA_DIR) + "/cli/train.yaml"; // A spot v4-32 in us-central2-b.

class CliAvailability : public ::testing::Test {
protected:
  TempDir dir;
  RunResult jm(const std::vector<std::string>& args) const {
    RunOptions options;
    options.env = {{"JOBMAN_HOME", (dir / "home").string()},
                   {"XDG_CONFIG_HOME", (dir / "config").string()},
                   {"JOBMAN_PROJECT", ""},
                   {"JOBMAN_CLOUD", ""},
                   {"JOBMAN_ZONE", ""},
                   {"JOBMAN_AUTOSTART", "false"}, // No supervisor: the test records the attempts itself.
                   {"NO_COLOR", ""},
                   {"USER", "alice"}};
    return run_jobman(args, options);
  }
  [[nodiscard]] store::JobStore open_store() const { return store::JobStore::open(dir / "home" / "jobman.db"); }
  // `jobman create`; the job's id.
  std::int64_t create() const {
    const auto r = jm({"create", kTrain});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::stoll(r.out.substr(0, r.out.find('\n')));
  }
  // Records an attempt of job `id` in `zone` as the supervisor would: requested, up (or not), ended with `outcome`
  // (none leaves it waiting) and its slice released.
  void attempt(std::int64_t id, const std::string& zone, bool came_up, domain::AttemptOutcome outcome) const {
    auto store = open_store();
    const auto number = static_cast<int>(store.attempts().of(id).size()) + 1;
    const auto name = "cli-train-" + std::to_string(id) + "-a" + std::to_string(number);
    (void)store.attempts().begin(id, name, name, zone, true);
    store.attempts().confirm_created(id, number);
    if (came_up) {
      store.attempts().record_slice_active(id, number, {});
    }
    if (outcome != domain::AttemptOutcome::none) {
      store.attempts().end(id, number, outcome, std::nullopt);
      store.attempts().mark_released(id, name, "deleted by the test");
    }
  }
  void finish(std::int64_t id, domain::Phase phase) const {
    domain::PhaseChange change;
    change.to = phase;
    change.reason = "set by the test";
    ASSERT_TRUE(open_store().jobs().transition(id, std::nullopt, change));
  }
  nlohmann::json availability() const {
    const auto r = jm({"availability", "-a", "v4-32", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  }
};

TEST_F(CliAvailability, CleanRemovesJobsButNotWhatAvailabilityLearntOfThem) {
  const auto preempted = create();
  attempt(preempted, "us-central2-b", true, domain::AttemptOutcome::preempted);
  attempt(preempted, "us-east1-d", true, domain::AttemptOutcome::succeeded);
  finish(preempted, domain::Phase::succeeded);
  const auto waited_out = create();
  attempt(waited_out, "us-central2-b", false, domain::AttemptOutcome::timed_out);
  attempt(waited_out, "us-east1-d", true, domain::AttemptOutcome::failed);
  finish(waited_out, domain::Phase::failed);
  const auto waiting = create();
  attempt(waiting, "us-central2-b", false, domain::AttemptOutcome::none);

  const auto before = availability();
  ASSERT_EQ(before.size(), 2U) << before.dump(2);
  EXPECT_EQ(before[0]["zone"], "us-central2-b");
  EXPECT_EQ(before[0]["requests"], 3);
  EXPECT_EQ(before[0]["waiting_now"], 1);
  EXPECT_EQ(before[1]["requests"], 2);

  const auto cleaned = jm({"clean", "--all-finished"});
  ASSERT_EQ(cleaned.exit_code, 0) << cleaned.err;
  EXPECT_EQ(cleaned.out, "000001: removed\n000002: removed\n");
  EXPECT_EQ(jm({"show", "1"}).exit_code, 3) << "the job is gone";
  EXPECT_FALSE(std::filesystem::exists(dir / "home" / "jobs" / "000001")) << "and its directory";

  EXPECT_EQ(availability(), before) << "what was learnt of the cleaned jobs stays";
  EXPECT_EQ(create(), 4) << "ids are never reused";
}

using domain::AttemptOutcome;
using domain::Phase;

// The prices `report --compare` and `availability --experiment` are given.
constexpr double kV4Spot = 1.25;
constexpr double kV4OnDemand = 3.5;
const std::string kPrices = "generations:\n  v4: {spot: 1.25, ondemand: 3.5}\n  v5litepod: {spot: 0.5}\n";

// `report --compare` and `availability --experiment` over jobs made by `jobman create` (a sweep, and a run on another
// accelerator whose config names the experiment) whose attempts and step lines the test records as the supervisor
// does.
class CliCompare : public CliAvailability {
protected:
  const std::string config = std::string(JOBMAN_TEST_DATA_DIR) + "/cli/llama.yaml"; // v4-8 spot in us-central2-b.
  std::string prices = dir.write("prices.yaml", kPrices).string();

  // `jobman create` of the config with these arguments after it; the ids it printed.
  std::vector<std::int64_t> create(const std::vector<std::string>& args) const {
    std::vector<std::string> argv{"create", config};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = jm(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::int64_t> ids;
    for (const auto& line : util::split(r.out, '\n')) {
      if (!line.empty() && std::isdigit(static_cast<unsigned char>(line.front())) != 0) {
        ids.push_back(std::stoll(line));
      }
    }
    return ids;
  }

  // An attempt of job `id` as the supervisor records one: asked for, up (unless not `came_up`), its step lines, each
  // later than the one before, ended with `outcome`, its slice released.
  void run(std::int64_t id, const std::string& accelerator, const std::string& zone, domain::Pricing tier, int hosts,
           const std::vector<std::int64_t>& steps, domain::AttemptOutcome outcome, bool came_up = true) const {
    auto db = open_store();
    const int number = static_cast<int>(db.attempts().of(id).size()) + 1;
    const std::string name = "qr-" + std::to_string(id) + "-" + std::to_string(number);
    db.attempts().begin(id, domain::Placement{name, name, zone, accelerator, hosts, std::nullopt, tier});
    if (came_up) {
      db.attempts().record_slice_active(id, number, {});
    }
    std::int64_t last = db.clock_ms();
    domain::ProgressSeries series;
    for (const auto step : steps) {
      while (db.clock_ms() <= last) {
        std::this_thread::yield();
      }
      last = db.clock_ms();
      series.add(step, last);
    }
    if (!steps.empty()) {
      db.attempts().record_progress({{id, number, series, std::nullopt}});
    }
    while (db.clock_ms() <= last) {
      std::this_thread::yield();
    }
    db.attempts().end(id, number, outcome, std::nullopt);
    db.attempts().mark_released(id, name, "deleted by the test");
  }

  nlohmann::json json_of(const std::vector<std::string>& args) const {
    const auto r = jm(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "") << "nothing but JSON";
    return nlohmann::json::parse(r.out);
  }
};

const nlohmann::json* place(const nlohmann::json& places, const std::string& zone, const std::string& accelerator,
                            const std::string& tier) {
  for (const auto& p : places) {
    if (p["zone"] == zone && p["accelerator"] == accelerator && p["pricing"] == tier) {
      return &p;
    }
  }
  return nullptr;
}

TEST_F(CliCompare, ReportCompareGroupsAnExperimentsRunsAndAvailabilityShowsItsStepsPerDollarInEachPlace) {
  // Experiment "llama": a sweep of two on v4-8 spot (llama-lr=0.1, llama-lr=0.3), a run named otherwise whose config
  // says it is one, on v5litepod-16; and a run of another experiment whose request for v4-8 on demand was given up.
  const auto sweep = create({"--sweep", "vars.lr=0.1,0.3"});
  ASSERT_EQ(sweep.size(), 2u);
  const auto v5e = create({"--set", "job.name=v5e-trial", "--set", "job.experiment=llama", "--set",
                           "tpu.accelerator=v5litepod-16", "--set", "tpu.zone=us-west4-a"});
  ASSERT_EQ(v5e.size(), 1u);
  const auto other = create({"--set", "job.name=gpt", "--set", "tpu.pricing=ondemand"});
  ASSERT_EQ(other.size(), 1u);
  run(sweep[0], "v4-8", "us-central2-b", domain::Pricing::spot, 1, {100, 900}, AttemptOutcome::preempted);
  run(sweep[0], "v4-8", "us-central2-b", domain::Pricing::spot, 1, {900, 1500}, AttemptOutcome::succeeded);
  finish(sweep[0], Phase::succeeded);
  run(sweep[1], "v4-8", "us-central2-b", domain::Pricing::spot, 1, {100, 1100}, AttemptOutcome::succeeded);
  finish(sweep[1], Phase::succeeded);
  run(v5e[0], "v5litepod-16", "us-west4-a", domain::Pricing::spot, 4, {2400}, AttemptOutcome::succeeded);
  finish(v5e[0], Phase::succeeded);
  run(other[0], "v4-8", "us-central2-b", domain::Pricing::ondemand, 1, {}, AttemptOutcome::timed_out, false);
  finish(other[0], Phase::cancelled);

  const auto j = json_of({"report", "--compare", "--json", "--prices", prices});
  EXPECT_EQ(j["runs"], 3);
  EXPECT_EQ(j["runs_without_steps"], 1) << "gpt's slice never came up";
  ASSERT_EQ(j["groups"].size(), 2u) << j.dump(2);
  const auto& v4 = j["groups"][0];
  const auto& v5 = j["groups"][1];
  EXPECT_EQ(v4["experiment"], "llama");
  EXPECT_EQ(v4["accelerator"], "v4-8");
  EXPECT_EQ(v4["runs"], 2);
  EXPECT_EQ(v4["steps"], 1500 + 1100) << "each run's highest step";
  EXPECT_EQ(v4["preemptions"], 1);
  EXPECT_NEAR(v4["chip_hours"].get<double>(), 4 * v4["held_hours"].get<double>(), 1e-12);
  EXPECT_NEAR(v4["cost"].get<double>(), v4["chip_hours"].get<double>() * kV4Spot, 1e-12);
  EXPECT_NEAR(v4["steps_per_dollar"].get<double>(), 2600 / v4["cost"].get<double>(),
              v4["steps_per_dollar"].get<double>() * 1e-9);
  EXPECT_EQ(v5["experiment"], "llama") << "job.experiment over the name";
  EXPECT_EQ(v5["accelerator"], "v5litepod-16");
  EXPECT_EQ(v5["steps"], 2400);
  EXPECT_NEAR(v5["chip_hours"].get<double>(), 16 * v5["held_hours"].get<double>(), 1e-12);

  // The report's filters: one name.
  const auto named = json_of({"report", "--compare", "--json", "--name", "v5e-*", "--prices", prices});
  ASSERT_EQ(named["groups"].size(), 1u);
  EXPECT_EQ(named["groups"][0]["accelerator"], "v5litepod-16");

  const auto csv = jm({"report", "--compare", "--csv", "--prices", prices});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const auto lines = util::split(csv.out, '\n');
  ASSERT_EQ(lines.size(), 4u) << csv.out;
  EXPECT_TRUE(lines[0].starts_with("experiment,accelerator,zone,tier,runs,")) << lines[0];
  EXPECT_TRUE(lines[1].starts_with("llama,v4-8,us-central2-b,spot,2,2,2600,")) << lines[1];
  EXPECT_TRUE(lines[2].starts_with("llama,v5litepod-16,us-west4-a,spot,1,1,2400,")) << lines[2];

  const auto text = jm({"report", "--compare", "--prices", prices});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("STEPS/CHIP-H"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("v5litepod-16"), std::string::npos) << text.out;

  const auto html = jm({"report", "--compare", "--html", (dir / "report.html").string(), "--prices", prices});
  ASSERT_EQ(html.exit_code, 0) << html.err;
  const auto page = file_text(dir / "report.html");
  EXPECT_NE(page.find("<table class=\"compare\">"), std::string::npos);
  EXPECT_NE(page.find("<td class=\"l\">v5litepod-16</td>"), std::string::npos);

  // Availability: the price of a chip-hour in every place; llama's own steps per dollar where it ran, and on v4-8 on
  // demand, where only gpt asked, an estimate from its steps per chip-hour on v4-8 spot.
  const auto places = json_of({"availability", "--experiment", "llama", "--json", "--prices", prices});
  const auto* spot = place(places, "us-central2-b", "v4-8", "spot");
  const auto* ondemand = place(places, "us-central2-b", "v4-8", "ondemand");
  const auto* west = place(places, "us-west4-a", "v5litepod-16", "spot");
  ASSERT_TRUE(spot && ondemand && west) << places.dump(2);
  EXPECT_EQ((*spot)["price_per_chip_hour"], kV4Spot);
  EXPECT_EQ((*ondemand)["price_per_chip_hour"], kV4OnDemand);
  EXPECT_EQ((*spot)["steps_per_dollar_estimated"], false);
  EXPECT_DOUBLE_EQ((*spot)["steps_per_dollar"].get<double>(), v4["steps_per_dollar"].get<double>());
  EXPECT_EQ((*spot)["experiment_runs"], 2);
  EXPECT_DOUBLE_EQ((*west)["steps_per_dollar"].get<double>(), v5["steps_per_dollar"].get<double>());
  EXPECT_EQ((*ondemand)["steps_per_dollar_estimated"], true);
  EXPECT_NEAR((*ondemand)["steps_per_dollar"].get<double>(), v4["steps_per_chip_hour"].get<double>() / kV4OnDemand,
              (*ondemand)["steps_per_dollar"].get<double>() * 1e-9);
  const auto plain = json_of({"availability", "--json"});
  EXPECT_FALSE(plain[0].contains("steps_per_dollar")) << "only with --experiment";
  EXPECT_TRUE(plain[0].contains("price_per_chip_hour"));

  const auto table = jm({"availability", "--experiment", "llama", "--prices", prices});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("PRICE/CHIP-H"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("STEPS/$"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("~"), std::string::npos) << "the estimate is marked: " << table.out;
}

} // namespace cli_availability_test
} // namespace jobman::test
