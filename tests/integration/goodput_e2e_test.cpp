// Progress, goodput and cost end to end on the mock: the steps a job prints reach `list` and `show` while it runs, a
// preemption's redone steps are counted as lost, and `report` accounts the job the same way in text, JSON, CSV and
// one self-contained HTML file.
#include "jobman/domain/job.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/util/strings.hpp"
#include "support/supervisor_home.hpp"

#include <algorithm>
#include <cstdlib>
#include <gtest/gtest.h>

namespace jobman::test {
namespace goodput_e2e_test {

using nlohmann::json;

class GoodputTest : public SupervisorHome {};

TEST_F(GoodputTest, ProgressShowsWhileItRunsAndAPreemptionsRedoneStepsAreLost) {
  start_daemon();
  // A workload that does not save on SIGTERM, as many training scripts do not: a preemption loses the steps since its
  // last checkpoint (every 20 steps).
  const auto id = create(config(training(400, 60) + " --no-save-on-stop"));
  // The store has the job's progress within seconds of the lines reaching home.
  ASSERT_TRUE(eventually(
      [&] {
        const auto j = job(id);
        return j.progress && j.progress->step >= 50;
      },
      kPatience))
      << job(id).phase_reason;
  EXPECT_EQ(job(id).step_total, 400);
  // Preempted a few steps past a checkpoint: the next attempt resumes from it and the steps after it are done twice.
  ASSERT_TRUE(eventually(
      [&] {
        const auto text = file_text(worker_log(id, 1));
        const auto line = text.rfind("\nstep=");
        const auto step = line == std::string::npos ? 0 : std::atoll(text.c_str() + line + 6);
        return step % 20 >= 4 && step % 20 <= 12;
      },
      kPatience));
  ASSERT_TRUE(preempt(node_of(id)));
  ASSERT_TRUE(eventually(
      [&] {
        const auto j = job(id);
        const auto a = db().attempts().of(id);
        return j.attempt == 2 && a.size() == 2 && a[1].progress.first() && j.progress &&
               j.progress->step >= a[1].progress.first()->step + 10;
      },
      kPatience))
      << job(id).phase_reason;
  const auto listed = jm({"list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("PROGRESS"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("/400"), std::string::npos) << listed.out;
  const auto shown = jm({"show", std::to_string(id)});
  EXPECT_NE(shown.out.find("Progress"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("steps/s"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("Where the time went"), std::string::npos) << shown.out;
  wait_for(id, 0, 240);
  // Until its slice is released a finished job's cost still grows with the clock: `show` and `report` below, a moment
  // apart, would price different spans.
  ASSERT_TRUE(eventually(
      [&] {
        const auto all = db().attempts().of(id);
        return std::all_of(all.begin(), all.end(), [](const auto& a) { return a.released_ms.has_value(); });
      },
      kPatience));
  const auto attempts = db().attempts().of(id);
  ASSERT_EQ(attempts.size(), 2U);
  const auto resumed = attempts[1].progress.first();
  const auto reached = attempts[0].progress.latest();
  ASSERT_TRUE(resumed && reached);
  EXPECT_GT(resumed->step, 0) << "it resumed from a checkpoint";
  EXPECT_EQ(resumed->step % 20, 0) << "a periodic one";
  EXPECT_GT(reached->step, resumed->step);
  EXPECT_EQ(job(id).progress->step, 400);

  const auto shown_json = jm({"show", std::to_string(id), "--json"});
  ASSERT_EQ(shown_json.exit_code, 0) << shown_json.err;
  const auto account = json::parse(shown_json.out)["goodput"];
  EXPECT_EQ(account["lost_steps"].get<std::int64_t>(), reached->step - resumed->step);
  EXPECT_GT(account["seconds"]["lost"].get<double>(), 0.0) << account.dump(2);
  double sum = 0;
  for (const auto& [bucket, seconds] : account["seconds"].items()) {
    sum += seconds.get<double>();
  }
  EXPECT_NEAR(sum, account["wall_seconds"].get<double>(), 0.01);
  EXPECT_GT(account["goodput"].get<double>(), 0.0);
  EXPECT_LT(account["goodput"].get<double>(), 1.0);
  ASSERT_EQ(account["marks"].size(), 1U);
  EXPECT_EQ(account["marks"][0]["what"], "preempted");
  ASSERT_FALSE(account["usage"].empty());
  EXPECT_EQ(account["usage"][0]["accelerator"], "v4-8");
  EXPECT_EQ(account["usage"][0]["chips"], 4);
  EXPECT_GT(account["cost"].get<double>(), 0.0);
  const auto& timeline = account["timeline"];
  for (std::size_t i = 1; i < timeline.size(); ++i) {
    EXPECT_EQ(timeline[i]["from"], timeline[i - 1]["to"]);
  }

  // The report accounts it the same way in every form.
  const auto report = jm({"report", std::to_string(id), "--json"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const auto parsed = json::parse(report.out);
  ASSERT_EQ(parsed["jobs"].size(), 1U);
  EXPECT_EQ(parsed["jobs"][0]["account"]["seconds"], account["seconds"]);
  EXPECT_EQ(parsed["totals"]["cost"], account["cost"]);
  ASSERT_EQ(parsed["totals"]["by_zone"].size(), 1U);
  EXPECT_EQ(parsed["totals"]["by_zone"][0]["preemptions"], 1);
  const auto csv = jm({"report", std::to_string(id), "--csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(csv.out.rfind("id,name,user,kind,status,", 0), 0U) << csv.out;
  EXPECT_NE(csv.out.find("\n" + std::to_string(id) + ",e2e,"), std::string::npos) << csv.out;
  const auto text = jm({"report", std::to_string(id)});
  EXPECT_NE(text.out.find("goodput"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(domain::format_job_id(id)), std::string::npos) << text.out;

  const auto html_path = dir / "report.html";
  const auto html = jm({"report", std::to_string(id), "--html", html_path.string()});
  ASSERT_EQ(html.exit_code, 0) << html.err;
  const auto page = file_text(html_path);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0U);
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_NE(page.find("preempted"), std::string::npos);
  // Self-contained: nothing to fetch, no script.
  for (const char* outside : {"src=", "href=", "<script", "@import", "url("}) {
    EXPECT_EQ(page.find(outside), std::string::npos) << outside;
  }
}

TEST_F(GoodputTest, AReportOfNothingAndBadArgumentsSayWhatIsWrong) {
  const auto empty = jm({"report"});
  EXPECT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_NE(empty.out.find("No jobs"), std::string::npos) << empty.out;
  const auto missing = jm({"report", "424242"});
  EXPECT_EQ(missing.exit_code, 3) << missing.err;
  const auto since = jm({"report", "--since", "soon"});
  EXPECT_EQ(since.exit_code, 2);
  EXPECT_NE(since.err.find("--since"), std::string::npos) << since.err;
  const auto both = jm({"report", "--json", "--csv"});
  EXPECT_EQ(both.exit_code, 2) << both.err;
  const auto prices = dir.write("prices.yaml", "generations:\n  v4:\n    spot: free\n");
  const auto bad = jm({"report", "--prices", prices.string()});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("prices.yaml:3"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("generations.v4.spot"), std::string::npos) << bad.err;
  // A report that cannot be written leaves nothing behind.
  const auto unwritable = jm({"report", "--html", (dir / "no-such-dir" / "r.html").string()});
  EXPECT_EQ(unwritable.exit_code, 1) << unwritable.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "no-such-dir"));
}

} // namespace goodput_e2e_test
} // namespace jobman::test
