// `jobman ui` in a real browser: headless Chromium loads the dashboard against a store with jobs in several phases,
// the table has them as `list` would, a phase change, a new job and a removal reach the page without a reload, a job's
// panel shows its timeline and the end of its log with control characters escaped, and the report's totals load.
#include "jobman/core/jobs.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "support/browser.hpp"
#include "support/line_process.hpp"
#include "support/run.hpp"
#include "support/sample_job.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <csignal>
#include <cstdlib>
#include <gtest/gtest.h>

namespace jobman::test {
namespace dashboard_e2e_test {

using domain::Phase;
using namespace std::chrono_literals;

// Waits for the page: what it shows follows the store within seconds; this bounds a broken page, not a slow one.
constexpr auto kPatience = 30s;

class DashboardBrowserTest : public ::testing::Test {
protected:
  TempDir dir;
  std::filesystem::path home = dir / "home";
  ScopedEnv home_env{"JOBMAN_HOME", home.string()};
  store::JobStore db = store::JobStore::open(home / "jobman.db");

  void move(std::int64_t id, Phase from, Phase to, const std::string& reason = "") {
    domain::PhaseChange change;
    change.to = to;
    change.reason = reason;
    ASSERT_TRUE(db.jobs().transition(id, from, change));
  }

  // A job that asked for a slice, got it and runs: its attempt, its steps and its worker's log.
  void running(std::int64_t id, const std::string& log) {
    move(id, Phase::pending, Phase::queued);
    db.attempts().begin(id, "qr-" + std::to_string(id), "qr-" + std::to_string(id), "us-central2-b");
    move(id, Phase::queued, Phase::provisioning);
    move(id, Phase::provisioning, Phase::setup);
    move(id, Phase::setup, Phase::running);
    domain::ProgressSeries series;
    const auto now = util::now_ms();
    series.add(0, now - 60'000);
    series.add(611, now);
    db.attempts().record_progress({{id, 1, series, 2000}});
    const auto attempt_dir = core::attempt_directory(id, 1);
    std::filesystem::create_directories(attempt_dir);
    util::write_file_atomic(attempt_dir / "worker-0.log", log, 0600);
  }

  std::string text_of(HeadlessBrowser& browser, const std::string& expression) {
    return browser.evaluate(expression).get<std::string>();
  }
};

TEST_F(DashboardBrowserTest, TheTableFollowsTheStoreWithoutAReloadAndAPanelShowsAJob) {
  ASSERT_TRUE(HeadlessBrowser::available()) << "chromium is missing: scripts/test installs the Debian package";
  auto hostile = make_job("<img src=x onerror=alert(1)>");
  const auto ids = db.jobs().create(
      {make_job("llama-pretrain"), make_job("resnet-sweep"), make_job("t5-eval"), make_job("vit-finetune"), hostile});
  const auto train = ids[0];
  running(train, "starting from step=0 of 2000\nstep=611 loss=1.234\n\x1b]0;retitled\x07\x1b[31mred\x1b[0m done\n");
  move(ids[1], Phase::pending, Phase::queued);
  move(ids[2], Phase::pending, Phase::failed, "exit code 1");
  move(ids[3], Phase::pending, Phase::succeeded);

  LineReadingProcess ui({jobman_binary(), "ui", "--port", "0"}, {{"JOBMAN_HOME", home.string()}}, dir / "ui.err");
  const auto banner = ui.read_until("jobman dashboard: ");
  ASSERT_TRUE(banner) << file_text(dir / "ui.err");
  const std::string url = banner->substr(banner->find("http://"));
  const std::string token = url.substr(url.find("token=") + 6);
  ASSERT_EQ(token.size(), 32U) << url;
  // The token is in no process's command line.
  for (const auto& [pid, command] : processes_of(home)) {
    EXPECT_EQ(command.find(token), std::string::npos) << pid << ": " << command;
  }

  HeadlessBrowser browser(1500, 900);
  browser.open(url);
  EXPECT_EQ(browser.evaluate("document.querySelectorAll('#jobs tbody tr').length").get<int>(), 5);
  const std::string row = "document.querySelector('tr[data-id=\"" + std::to_string(train) + "\"]')";
  EXPECT_EQ(text_of(browser, row + ".dataset.phase"), "RUNNING");
  EXPECT_NE(text_of(browser, row + ".innerText").find("611/2000"), std::string::npos);
  EXPECT_EQ(text_of(browser, "document.querySelector('[data-count=\"failed\"]').textContent"), "1");
  EXPECT_EQ(browser.evaluate("document.querySelectorAll('img').length").get<int>(), 0) << "stored text stays text";
  EXPECT_NE(text_of(browser, "document.body.innerText").find("<img src=x onerror=alert(1)>"), std::string::npos);

  // Changes in the store reach the page while it stays loaded.
  browser.evaluate("window.loadedOnce = true");
  move(train, Phase::running, Phase::recovering, "preempted");
  EXPECT_TRUE(browser.wait_until(row + ".dataset.phase === 'RECOVERING'", kPatience));
  EXPECT_TRUE(
      browser.wait_until("document.querySelector('[data-count=\"recovering\"]').textContent === '1'", kPatience));
  const auto added = db.jobs().create({make_job("gemma-dpo")}).front();
  db.jobs().remove(ids[2]);
  EXPECT_TRUE(
      browser.wait_until("!!document.querySelector('tr[data-id=\"" + std::to_string(added) + "\"]')", kPatience));
  EXPECT_TRUE(
      browser.wait_until("!document.querySelector('tr[data-id=\"" + std::to_string(ids[2]) + "\"]')", kPatience));
  EXPECT_EQ(browser.evaluate("window.loadedOnce === true").get<bool>(), true) << "the page was reloaded";
  EXPECT_NE(text_of(browser, "document.getElementById('live').textContent").find("live"), std::string::npos);

  // A job's panel: its timeline, attempts and the end of its log, escape sequences shown, not obeyed.
  browser.evaluate(row + ".click()");
  ASSERT_TRUE(browser.wait_until("!!document.querySelector('#panel pre.log')", kPatience));
  EXPECT_EQ(browser.evaluate("document.querySelectorAll('#panel svg rect').length > 0").get<bool>(), true);
  const auto log = text_of(browser, "document.querySelector('#panel pre.log').textContent");
  EXPECT_NE(log.find("step=611 loss=1.234"), std::string::npos) << log;
  EXPECT_NE(log.find("\\x1b]0;retitled\\x07\\x1b[31mred\\x1b[0m done"), std::string::npos) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos);
  EXPECT_NE(text_of(browser, "document.getElementById('panel').innerText").find("qr-" + std::to_string(train)),
            std::string::npos);
  // The panel follows the job too.
  move(train, Phase::recovering, Phase::pending);
  EXPECT_TRUE(browser.wait_until("document.querySelector('#panel .badge').textContent === 'PENDING'", kPatience));

  // The report's totals for the last 7 days.
  EXPECT_TRUE(browser.wait_until("!!document.querySelector('#report .card')", kPatience));
  EXPECT_NE(text_of(browser, "document.getElementById('report').textContent").find("goodput"), std::string::npos);
  if (const char* shot = std::getenv("JOBMAN_TEST_SCREENSHOT")) { // To look at what the test saw.
    browser.screenshot(shot, true);
  }

  EXPECT_TRUE(browser.problems().empty()) << util::join(browser.problems(), "\n");
  ui.send(SIGTERM);
  EXPECT_EQ(ui.finish(), 0);
}

} // namespace dashboard_e2e_test
} // namespace jobman::test
