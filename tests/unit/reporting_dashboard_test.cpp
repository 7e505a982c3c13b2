// The dashboard's answers without a socket: the token and the Host it insists on, the read-only refusal, the page
// with the jobs `list` shows, what changed since a cursor (rows, removals), a job's panel with its log's end escaped,
// and the report's totals.
#include "jobman/core/jobs.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/reporting/dashboard.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "support/sample_job.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace jobman::reporting {
namespace reporting_dashboard_test {

using domain::Phase;
using nlohmann::json;

constexpr int kPort = 48123;
constexpr const char* kToken = "0123456789abcdef0123456789abcdef";

class DashboardTest : public ::testing::Test {
protected:
  test::TempDir dir;
  test::ScopedEnv home{"JOBMAN_HOME", (dir / "home").string()};
  store::JobStore db = store::JobStore::open(dir / "home" / "jobman.db");
  Dashboard dashboard{db, config::load_prices(), kToken};

  void SetUp() override { dashboard.set_port(kPort); }

  DashboardAnswer get(const std::string& path, std::map<std::string, std::string> params = {},
                      const std::string& token = kToken) {
    DashboardRequest request;
    request.method = "GET";
    request.path = path;
    request.params = std::move(params);
    request.host = "127.0.0.1:" + std::to_string(kPort);
    request.token = token;
    return dashboard.answer(request);
  }

  json api(const std::string& path, std::map<std::string, std::string> params = {}) {
    const auto a = get(path, std::move(params));
    EXPECT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.content_type, "application/json");
    return json::parse(a.body);
  }

  void move_to(std::int64_t id, Phase from, Phase to) {
    domain::PhaseChange change;
    change.to = to;
    change.reason = "test";
    ASSERT_TRUE(db.jobs().transition(id, from, change));
  }
};

TEST_F(DashboardTest, EveryAnswerWantsTheTokenTheHostAndAGet) {
  EXPECT_EQ(get("/", {}).status, 403) << "the page without its token";
  EXPECT_EQ(get("/", {{"token", std::string(kToken).substr(1) + "0"}}).status, 403);
  EXPECT_EQ(get("/", {{"token", kToken}}).status, 200);
  EXPECT_EQ(get("/api/changes", {{"after", "0"}}, "").status, 403) << "the API without its header";
  EXPECT_EQ(get("/api/changes", {{"after", "0"}}, kToken).status, 200);
  EXPECT_EQ(get("/dashboard.js", {}, "").status, 200) << "the script holds no data";

  DashboardRequest rebound;
  rebound.method = "GET";
  rebound.path = "/api/changes";
  rebound.params = {{"after", "0"}};
  rebound.token = kToken;
  rebound.host = "attacker.example:" + std::to_string(kPort);
  EXPECT_EQ(dashboard.answer(rebound).status, 403) << "a name rebound to 127.0.0.1";
  rebound.host = "localhost:" + std::to_string(kPort);
  EXPECT_EQ(dashboard.answer(rebound).status, 200);
  rebound.method = "POST";
  EXPECT_EQ(dashboard.answer(rebound).status, 405);

  const auto page = get("/", {{"token", kToken}});
  bool has_policy = false;
  for (const auto& [name, value] : page.headers) {
    has_policy =
        has_policy || (name == "Content-Security-Policy" && value.find("script-src 'self'") != std::string::npos);
  }
  EXPECT_TRUE(has_policy);
  EXPECT_EQ(get("/api/nothing").status, 404);
  EXPECT_EQ(get("/api/changes", {{"after", "soon"}}).status, 400);
  EXPECT_EQ(get("/api/job", {{"id", "424242"}}).status, 404);
}

TEST_F(DashboardTest, ThePageListsTheJobsAndTheChangesFollowFromItsCursor) {
  auto hostile = test::make_job("<img src=x onerror=alert(1)>");
  const auto ids = db.jobs().create({test::make_job("train-a"), test::make_job("train-b"), hostile});
  move_to(ids[0], Phase::pending, Phase::queued);
  const auto page = get("/", {{"token", kToken}});
  ASSERT_EQ(page.status, 200);
  for (const auto id : ids) {
    EXPECT_NE(page.body.find("id=\"job-" + domain::format_job_id(id) + "\""), std::string::npos);
  }
  EXPECT_NE(page.body.find("ph-QUEUED"), std::string::npos);
  EXPECT_EQ(page.body.find("<img src=x"), std::string::npos) << "stored text is escaped";
  EXPECT_NE(page.body.find("&lt;img src=x"), std::string::npos);
  const auto at = page.body.find("data-cursor=\"");
  ASSERT_NE(at, std::string::npos);
  const std::string cursor = std::to_string(std::stoll(page.body.substr(at + 13)));
  EXPECT_EQ(cursor, std::to_string(db.jobs().change_cursor()));

  // Nothing changed: nothing comes back.
  auto changes = api("/api/changes", {{"after", cursor}});
  EXPECT_TRUE(changes["rows"].empty());
  EXPECT_EQ(changes["cursor"].get<std::int64_t>(), std::stoll(cursor));
  // A phase change comes back as the job's row, rendered; a removal as its id.
  move_to(ids[1], Phase::pending, Phase::queued);
  db.jobs().remove(ids[2]);
  changes = api("/api/changes", {{"after", cursor}});
  ASSERT_EQ(changes["rows"].size(), 1U);
  EXPECT_EQ(changes["rows"][0]["id"], ids[1]);
  EXPECT_NE(changes["rows"][0]["html"].get<std::string>().find("data-phase=\"QUEUED\""), std::string::npos);
  EXPECT_EQ(changes["removed"], json::array({ids[2]}));
  EXPECT_FALSE(changes["reload"].get<bool>());
  EXPECT_TRUE(api("/api/changes", {{"after", std::to_string(changes["cursor"].get<std::int64_t>())}})["rows"].empty());
}

TEST_F(DashboardTest, AJobsPanelHasItsTimelineAttemptsAndTheEndOfItsLogEscaped) {
  const auto id = db.jobs().create({test::make_job("train")}).front();
  move_to(id, Phase::pending, Phase::queued);
  db.attempts().begin(id, "qr-1", "qr-1", "us-central2-b");
  move_to(id, Phase::queued, Phase::running);
  const auto dir_of_attempt = core::attempt_directory(id, 1);
  std::filesystem::create_directories(dir_of_attempt);
  std::string log;
  for (int i = 0; i < 5000; ++i) {
    log += "step=" + std::to_string(i) + " loss=0.5\n";
  }
  log += "\x1b[31mred\x1b[0m <b>bold</b>\n";
  util::write_file_atomic(dir_of_attempt / "worker-0.log", log, 0600);

  const auto panel = api("/api/job", {{"id", std::to_string(id)}});
  EXPECT_EQ(panel["phase"], "RUNNING");
  const auto html = panel["html"].get<std::string>();
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("qr-1"), std::string::npos) << "the attempts";
  EXPECT_NE(html.find("goodput"), std::string::npos);
  const auto text = panel["log"]["text"].get<std::string>();
  EXPECT_NE(text.find("\\x1b[31mred\\x1b[0m <b>bold</b>\n"), std::string::npos) << "escaped as on a terminal";
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_LE(text.size(), 64U * 1024);
  EXPECT_EQ(text.rfind("step=", 0), 0U) << "the end's first whole line";
  EXPECT_EQ(panel["log"]["workers"], 1);
  const auto setup = api("/api/job", {{"id", std::to_string(id)}, {"log", "setup"}});
  EXPECT_EQ(setup["log"]["kind"], "setup");
  EXPECT_NE(setup["log"]["note"].get<std::string>().find("no setup-0.log"), std::string::npos);
}

TEST_F(DashboardTest, TheReportHasTheTotalsOfTheJobsInItsTime) {
  EXPECT_NE(api("/api/report")["html"].get<std::string>().find("No jobs"), std::string::npos);
  db.jobs().create({test::make_job("train")});
  const auto report = api("/api/report", {{"since", "24h"}});
  EXPECT_EQ(report["jobs"], 1);
  EXPECT_NE(report["html"].get<std::string>().find("goodput"), std::string::npos);
  EXPECT_EQ(get("/api/report", {{"since", "soon"}}).status, 400);
}

TEST(DashboardToken, IsThirtyTwoHexDigitsAndNewEachTime) {
  const auto a = new_dashboard_token();
  EXPECT_EQ(a.size(), 32U);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, new_dashboard_token());
}

} // namespace reporting_dashboard_test
} // namespace jobman::reporting
