// `jobman sync` and the supervisor's orphan sweep against a real jobman-mock-cloud: resources made directly through
// the API with jobman's labels, some held by attempts in the store and some not (a job id the store does not have, an
// attempt already released, another owner's), and the checks that exactly the orphans are listed and deleted.
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/system.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace jobman::test {
namespace cli_sync_test {

namespace fs = std::filesystem;
using domain::Phase;
using nlohmann::json;

constexpr const char* kZone = "us-central2-b";
constexpr const char* kFarZone = "europe-west4-a";
constexpr const char* kUser = "tester";
// Waits for things a daemon does: generous, since sanitizer builds on two cores are slow.
constexpr std::chrono::seconds kPatience{60};

// jobman's labels on a resource made for job `job_id`'s attempt 1 by `owner`.
json labels(const std::string& job_id, const std::string& owner = kUser) {
  return {{"jobman-job-id", job_id}, {"jobman-owner", owner}, {"jobman-attempt", "1"}, {"team", "ml"}};
}

// The names in a `sync --json` document's resources, as "kind name".
std::set<std::string> listed(const json& document) {
  std::set<std::string> names;
  for (const auto& resource : document["resources"]) {
    names.insert(resource["kind"].get<std::string>() + " " + resource["name"].get<std::string>());
  }
  return names;
}

// A jobman home on its own mock cloud (two zones), with a store to fill and resources to make through the API.
class SyncTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_GT(mock->port(), 0) << mock->first_line();
    client = std::make_unique<httplib::Client>("127.0.0.1", mock->port());
    env = mock_home_environment(*mock, home, dir / "config");
    env["JOBMAN_ZONE"] = kZone;
    env["NO_COLOR"] = "1";
    env["USER"] = kUser;
  }

  void TearDown() override {
    daemons.clear();
    kill_processes_of(home);
  }

  RunResult jm(const std::vector<std::string>& args) { return run_jobman(args, RunOptions{env, "", ""}); }

  // `jobman ARGS --json`, which must exit with `exit_code` and print nothing on stderr but errors.
  json sync_json(std::vector<std::string> args, int exit_code = 0) {
    args.insert(args.begin(), "sync");
    args.emplace_back("--json");
    const auto r = jm(args);
    EXPECT_EQ(r.exit_code, exit_code) << r.out << r.err;
    if (exit_code == 0) {
      EXPECT_EQ(r.err, "") << "--json output is not mixed with logging";
    }
    const auto document = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(document.is_discarded()) << r.out;
    return document;
  }

  store::JobStore& db() {
    if (!store) {
      store.emplace(store::JobStore::open(home / "jobman.db"));
    }
    return *store;
  }

  // A job in the store whose attempt 1 holds `queued_resource` (empty in tpu-vm mode) and `node` in `zone`.
  std::int64_t job_holding(const std::string& queued_resource, const std::string& node,
                           const std::string& zone = kZone) {
    domain::NewJob job;
    job.name = "held";
    job.user = kUser;
    job.accelerator = "v4-8";
    job.zone = zone;
    job.pricing = domain::Pricing::spot;
    job.tpu_name = "held";
    job.hosts = 1;
    job.config_yaml = "job:\n  name: held\n";
    const auto id = db().jobs().create({job}).front();
    db().attempts().begin(id, domain::Placement{queued_resource, node, zone, {}, 0, std::nullopt, {}});
    return id;
  }

  // Ends attempt 1 of job `id` in a terminal phase; with `released`, its slice confirmed gone.
  void finish(std::int64_t id, Phase phase, bool released) {
    db().attempts().end(id, 1,
                        phase == Phase::succeeded ? domain::AttemptOutcome::succeeded : domain::AttemptOutcome::failed,
                        std::nullopt);
    if (released) {
      db().attempts().mark_released(id, db().attempts().of(id).front().slice_name(), "deleted");
    }
    domain::PhaseChange change;
    change.to = phase;
    change.reason = "test";
    ASSERT_TRUE(db().jobs().transition(id, std::nullopt, change));
  }

  std::string location(const std::string& zone) const { return "/v2/projects/jobman-mock/locations/" + zone; }

  HttpAnswer api(const std::string& method, const std::string& path, const json& body = nullptr) {
    return http_call(*client, method, path, body, {{"Authorization", "Bearer test-token"}});
  }

  // Makes a spot queued resource with one v4-8 node of the same name, labelled `node_labels`.
  void make_queued_resource(const std::string& id, const json& node_labels, const std::string& zone = kZone) {
    const json body = {
        {"tpu",
         {{"nodeSpec",
           {{{"parent", "projects/jobman-mock/locations/" + zone},
             {"nodeId", id},
             {"node",
              {{"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}, {"labels", node_labels}}}}}}}},
        {"spot", json::object()}};
    const auto made = api("POST", location(zone) + "/queuedResources?queuedResourceId=" + id, body);
    ASSERT_EQ(made.status, 200) << made.text;
  }

  // Makes a standalone spot v4-8 node labelled `node_labels`.
  void make_node(const std::string& id, const json& node_labels, const std::string& zone = kZone) {
    const json body = {{"acceleratorType", "v4-8"},
                       {"runtimeVersion", "tpu-ubuntu2204-base"},
                       {"schedulingConfig", {{"spot", true}}},
                       {"labels", node_labels}};
    const auto made = api("POST", location(zone) + "/nodes?nodeId=" + id, body);
    ASSERT_EQ(made.status, 200) << made.text;
  }

  // The resource's state ("ACTIVE", "READY", "DELETING", ...), or "gone" after a 404.
  std::string state(const std::string& kind, const std::string& id, const std::string& zone = kZone) {
    const auto got = api("GET", location(zone) + "/" + kind + "/" + id);
    if (got.status == 404) {
      return "gone";
    }
    if (got.status != 200) {
      return "HTTP " + std::to_string(got.status);
    }
    return kind == "queuedResources" ? got.body["state"]["state"].get<std::string>()
                                     : got.body["state"].get<std::string>();
  }

  // How long ago the resource was created, by its createTime.
  std::int64_t age_ms(const std::string& kind, const std::string& id) {
    const auto got = api("GET", location(kZone) + "/" + kind + "/" + id);
    const auto created = util::parse_utc(got.body.value("createTime", ""));
    return created ? util::now_ms() - *created : -1;
  }

  // Waits until every queued resource named is ACTIVE, so that its node is in the node listings too.
  void await_active(const std::vector<std::pair<std::string, std::string>>& zone_and_ids) {
    for (const auto& [zone, id] : zone_and_ids) {
      ASSERT_TRUE(eventually([&] { return state("queuedResources", id, zone) == "ACTIVE"; }, kPatience))
          << id << " is " << state("queuedResources", id, zone);
    }
  }

  // The world of the SyncTest: the store's jobs and what the cloud holds (see the comments).
  void make_world() {
    // Held: a live job's queued resource (and so its node), and a tpu-vm job's node.
    job_holding("live-000001-a1", "live-000001-a1");
    job_holding("", "vm-000002-a1");
    // Not held: attempt 1 of job 3 was released, yet its queued resource is still there.
    finish(job_holding("done-000003-a1", "done-000003-a1"), Phase::failed, true);
    make_queued_resource("live-000001-a1", labels("000001"));
    make_node("vm-000002-a1", labels("000002"));
    make_queued_resource("done-000003-a1", labels("000003"));
    // Orphans of jobs the store does not have: a queued resource and a standalone node.
    make_queued_resource("gone-000099-a1", labels("000099"));
    make_node("solo-000098-a1", labels("000098"));
    // Another user's, a resource without jobman's labels, and an orphan in a zone no job uses.
    make_queued_resource("theirs-000001-a1", labels("000001", "someone-else"));
    make_queued_resource("foreign", json{{"team", "ml"}});
    make_queued_resource("far-000097-a1", labels("000097"), kFarZone);
    await_active({{kZone, "live-000001-a1"},
                  {kZone, "done-000003-a1"},
                  {kZone, "gone-000099-a1"},
                  {kZone, "theirs-000001-a1"},
                  {kZone, "foreign"},
                  {kFarZone, "far-000097-a1"}});
  }

  // Starts `jobman daemon` with `extra` options, its log in dir/daemon-N.log; returns the log's path.
  fs::path start_daemon(const std::vector<std::string>& extra) {
    std::vector<std::string> argv{jobman_binary(), "daemon", "--tick", "50ms", "--lease-ttl", "2s"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const auto log = dir / ("daemon-" + std::to_string(daemons.size()) + ".log");
    daemons.push_back(std::make_unique<LineReadingProcess>(argv, env, log));
    return log;
  }

  bool has_event(std::int64_t id, const std::string& text) {
    for (const auto& e : db().events().of(id)) {
      if (e.message.find(text) != std::string::npos) {
        return true;
      }
    }
    return false;
  }

  TempDir dir;
  fs::path home = dir / "home";
  std::unique_ptr<MockCloudProcess> mock =
      start_test_mock(dir, test_world(2, "  us-central2-b:\n    v4:\n      spot: {chips: 256}\n"
                                         "  europe-west4-a:\n    v4:\n      spot: {chips: 64}\n"));
  std::unique_ptr<httplib::Client> client;
  std::map<std::string, std::string> env;
  std::optional<store::JobStore> store;
  std::vector<std::unique_ptr<LineReadingProcess>> daemons;
};

TEST_F(SyncTest, ListsExactlyThisUsersOrphansInTheZonesInUseWithTheirAgeStateAndJob) {
  make_world();
  const auto document = sync_json({});
  EXPECT_EQ(listed(document), (std::set<std::string>{"queued-resource done-000003-a1", "queued-resource gone-000099-a1",
                                                     "node solo-000098-a1"}))
      << document.dump(2);
  EXPECT_EQ(document["zones"], json::array({kZone}));
  EXPECT_EQ(document["owner"], kUser);
  EXPECT_EQ(document["delete"], false);
  for (const auto& resource : document["resources"]) {
    EXPECT_EQ(resource["zone"], kZone);
    EXPECT_EQ(resource["owner"], kUser);
    EXPECT_EQ(resource["attempt"], 1);
    EXPECT_EQ(resource["deleted"], false);
    EXPECT_TRUE(resource["error"].is_null());
    EXPECT_TRUE(resource["age_seconds"].is_number_integer()) << resource.dump();
    EXPECT_GE(resource["age_seconds"].get<int>(), 0);
    EXPECT_TRUE(util::parse_utc(resource["created_at"].get<std::string>()).has_value()) << resource.dump();
    if (resource["name"] == "done-000003-a1") {
      EXPECT_EQ(resource["kind"], "queued-resource");
      EXPECT_EQ(resource["state"], "ACTIVE");
      EXPECT_EQ(resource["job_id"], 3);
      EXPECT_EQ(resource["nodes"], json::array({"done-000003-a1"})) << "its node is part of it, not listed alone";
    } else if (resource["name"] == "solo-000098-a1") {
      EXPECT_EQ(resource["kind"], "node");
      EXPECT_EQ(resource["state"], "READY");
      EXPECT_EQ(resource["job_id"], 98);
      EXPECT_EQ(resource["nodes"], json::array());
    }
  }

  // For people: a table with a row per orphan, and a hint on stderr.
  const auto table = jm({"sync"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  std::istringstream lines(table.out);
  std::string header;
  std::getline(lines, header);
  for (const char* column : {"KIND", "NAME", "ZONE", "STATE", "AGE", "JOB"}) {
    EXPECT_NE(header.find(column), std::string::npos) << header;
  }
  EXPECT_TRUE(header.starts_with("KIND  ")) << header;
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    ++rows;
  }
  EXPECT_EQ(rows, 3) << table.out;
  EXPECT_NE(table.out.find("queued-resource  done-000003-a1  us-central2-b  ACTIVE"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("000099"), std::string::npos) << table.out;
  EXPECT_NE(table.err.find("'jobman sync --delete' deletes them"), std::string::npos) << table.err;

  // Listing deleted nothing.
  EXPECT_EQ(state("queuedResources", "gone-000099-a1"), "ACTIVE");
  EXPECT_EQ(state("nodes", "solo-000098-a1"), "READY");
}

// The day jobman's own record is lost: no store and no zone in the settings. sync asks the TPU API for the project's
// zones (locations.list) and looks in every one, so that what jobman left anywhere is found; --zone narrows it.
TEST_F(SyncTest, WithNoStoreItLooksInEveryZoneOfTheProject) {
  make_queued_resource("lost-000007-a1", labels("000007"));
  make_queued_resource("far-000097-a1", labels("000097"), kFarZone);
  make_queued_resource("theirs-000001-a1", labels("000001", "someone-else"), kFarZone);
  await_active({{kZone, "lost-000007-a1"}, {kFarZone, "far-000097-a1"}, {kFarZone, "theirs-000001-a1"}});
  env["JOBMAN_ZONE"] = "";
  ASSERT_FALSE(fs::exists(home / "jobman.db"));

  const auto everywhere = sync_json({});
  EXPECT_EQ(everywhere["zones"], json::array({kFarZone, kZone})) << everywhere.dump(2);
  EXPECT_EQ(listed(everywhere),
            (std::set<std::string>{"queued-resource lost-000007-a1", "queued-resource far-000097-a1"}))
      << everywhere.dump(2);
  const auto table = jm({"sync"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.err.find("the store names no zone; looking in all 2 zones of project jobman-mock"), std::string::npos)
      << table.err;
  EXPECT_EQ(listed(sync_json({"--zone", kZone})), (std::set<std::string>{"queued-resource lost-000007-a1"}));
  // With a store that names a zone, --all-zones still looks everywhere.
  env["JOBMAN_ZONE"] = kZone;
  EXPECT_EQ(sync_json({})["zones"], json::array({kZone}));
  EXPECT_EQ(sync_json({"--all-zones"})["zones"], json::array({kFarZone, kZone}));
  EXPECT_EQ(jm({"sync", "--all-zones", "--zone", kZone}).exit_code, 2);
}

TEST_F(SyncTest, AllOwnersZoneAndOlderThanWidenOrNarrowTheList) {
  make_world();
  EXPECT_EQ(listed(sync_json({"--all-owners"})),
            (std::set<std::string>{"queued-resource done-000003-a1", "queued-resource gone-000099-a1",
                                   "node solo-000098-a1", "queued-resource theirs-000001-a1"}));
  EXPECT_TRUE(sync_json({"--all-owners"})["owner"].is_null());
  const auto far = sync_json({"--zone", kFarZone});
  EXPECT_EQ(listed(far), (std::set<std::string>{"queued-resource far-000097-a1"}));
  EXPECT_EQ(far["zones"], json::array({kFarZone}));
  EXPECT_EQ(listed(sync_json({"--zone", kFarZone, "--zone", kZone})).size(), 4U);
  EXPECT_EQ(sync_json({"--older-than", "1h"})["resources"], json::array()) << "every resource here is seconds old";
  EXPECT_EQ(listed(sync_json({"--older-than", "0s"})).size(), 3U);
  const auto none = jm({"sync", "--older-than", "1d"});
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_EQ(none.out, "");
  EXPECT_NE(none.err.find("No orphaned resources in us-central2-b"), std::string::npos) << none.err;
}

TEST_F(SyncTest, DeleteRemovesExactlyTheOrphansAndLeavesEveryHeldSlice) {
  make_world();
  const auto document = sync_json({"--delete"});
  EXPECT_EQ(document["delete"], true);
  EXPECT_EQ(listed(document), (std::set<std::string>{"queued-resource done-000003-a1", "queued-resource gone-000099-a1",
                                                     "node solo-000098-a1"}));
  for (const auto& resource : document["resources"]) {
    EXPECT_EQ(resource["deleted"], true) << resource.dump();
    EXPECT_TRUE(resource["error"].is_null()) << resource.dump();
  }
  // sync waited for the operations: the orphans (a queued resource with its node) are gone.
  EXPECT_EQ(state("queuedResources", "done-000003-a1"), "gone");
  EXPECT_EQ(state("nodes", "done-000003-a1"), "gone");
  EXPECT_EQ(state("queuedResources", "gone-000099-a1"), "gone");
  EXPECT_EQ(state("nodes", "solo-000098-a1"), "gone");
  // What an attempt holds, other users' resources, foreign ones and other zones' are untouched.
  EXPECT_EQ(state("queuedResources", "live-000001-a1"), "ACTIVE");
  EXPECT_EQ(state("nodes", "live-000001-a1"), "READY");
  EXPECT_EQ(state("nodes", "vm-000002-a1"), "READY");
  EXPECT_EQ(state("queuedResources", "theirs-000001-a1"), "ACTIVE");
  EXPECT_EQ(state("queuedResources", "foreign"), "ACTIVE");
  EXPECT_EQ(state("queuedResources", "far-000097-a1", kFarZone), "ACTIVE");

  // Nothing is left to delete; for people, it says so.
  const auto again = jm({"sync", "--delete"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "");
  EXPECT_NE(again.err.find("No orphaned resources"), std::string::npos) << again.err;
  const auto table = jm({"sync", "--delete", "--zone", kFarZone});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("far-000097-a1"), std::string::npos) << table.out;
  EXPECT_NE(table.err.find("Deleted 1 of 1 orphaned resource(s)"), std::string::npos) << table.err;
  EXPECT_EQ(state("queuedResources", "far-000097-a1", kFarZone), "gone");
}

TEST_F(SyncTest, BadArgumentsAreUsageErrorsAndAZoneTheApiRefusesIsACloudError) {
  const auto bad_duration = jm({"sync", "--older-than", "soon"});
  EXPECT_EQ(bad_duration.exit_code, 2);
  EXPECT_NE(bad_duration.err.find("--older-than: 'soon' is not a duration"), std::string::npos) << bad_duration.err;
  const auto bad_zone = jm({"sync", "--zone", "a/b"});
  EXPECT_EQ(bad_zone.exit_code, 2) << bad_zone.err;
  const auto unknown = jm({"sync", "--zone", "nowhere-1z"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown.out << unknown.err;
  EXPECT_NE(unknown.err.find("nowhere-1z"), std::string::npos) << unknown.err;
}

TEST_F(SyncTest, ADaemonSweepsOrphansPastTheGraceAtStartAndYoungerOnesOnceTheyAge) {
  constexpr std::int64_t kGraceMs = 6000;
  // Held by a finished job that kept its slice; an orphan of a job whose attempt was released; another user's.
  const auto kept = job_holding("live-000001-a1", "live-000001-a1");
  finish(kept, Phase::succeeded, false);
  const auto released = job_holding("done-000002-a1", "done-000002-a1");
  finish(released, Phase::failed, true);
  make_queued_resource("live-000001-a1", labels("000001"));
  make_queued_resource("done-000002-a1", labels("000002"));
  make_queued_resource("theirs-000001-a1", labels("000001", "someone-else"));
  // The old orphan passes the grace (its createTime has second precision) before the young one is made.
  ASSERT_TRUE(eventually([&] { return age_ms("queuedResources", "done-000002-a1") > kGraceMs + 500; }, kPatience));
  const auto young_made_ms = util::now_ms();
  make_node("young-000098-a1", labels("000098"));

  const auto log = start_daemon({"--orphan-grace", "6s", "--sweep-interval", "1s"});
  // The first sweep deletes the old orphan, records it on its job and in the log, and leaves the young one.
  ASSERT_TRUE(
      eventually([&] { return has_event(released, "deleting orphaned queued resource done-000002-a1"); }, kPatience))
      << file_text(log);
  const auto first = file_text(log);
  EXPECT_NE(first.find("orphan sweep over 1 zone(s): 1 orphan(s) older than 6s to delete, 1 younger left alone"),
            std::string::npos)
      << first;
  EXPECT_NE(first.find("orphan sweep: deleting orphaned queued resource done-000002-a1 in us-central2-b"),
            std::string::npos)
      << first;
  for (const auto& e : db().events().of(released)) {
    if (e.message.find("orphaned") != std::string::npos) {
      EXPECT_EQ(e.kind, "action");
      const auto data = json::parse(e.data_json);
      EXPECT_EQ(data["queued_resource"], "done-000002-a1");
      EXPECT_EQ(data["orphan"], true);
    }
  }
  EXPECT_TRUE(eventually([&] { return state("queuedResources", "done-000002-a1") == "gone"; }, kPatience));

  // A later sweep takes the young one once it is older than the grace; only the log records it (no job 98).
  ASSERT_TRUE(eventually(
      [&] { return file_text(log).find("deleting orphaned node young-000098-a1") != std::string::npos; }, kPatience))
      << file_text(log);
  // Not before its grace had passed (less a second: createTime has second precision).
  EXPECT_GT(util::now_ms() - young_made_ms, kGraceMs - 1000);
  EXPECT_TRUE(eventually([&] { return state("nodes", "young-000098-a1") == "gone"; }, kPatience));

  // The kept slice and the other user's resource stay, sweep after sweep.
  EXPECT_EQ(state("queuedResources", "live-000001-a1"), "ACTIVE");
  EXPECT_EQ(state("queuedResources", "theirs-000001-a1"), "ACTIVE");
  EXPECT_FALSE(has_event(kept, "orphaned"));
  EXPECT_EQ(file_text(log).find("live-000001-a1"), std::string::npos) << file_text(log);
}

// libcurl and libcrypto are opened on first use (jobman/util/shared_library.hpp): the commands that read the store
// never map them, and a command that calls the API opens libcurl and works. The loader says what it maps
// (LD_DEBUG=files, glibc's own trace).
TEST_F(SyncTest, OnlyCommandsThatCallTheApiLoadLibcurl) {
  const auto config =
      dir.write("traced.yaml", "job:\n  name: traced\ntpu:\n  accelerator: v4-8\n  zone: " + std::string(kZone) +
                                   "\ncommand:\n  cmd: echo hi\n");
  const auto created = jm({"create", config.string()});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const auto id = std::stoll(created.out);
  auto traced = env;
  traced["LD_DEBUG"] = "files";
  const auto run = [&](const std::vector<std::string>& args) {
    auto r = run_jobman(args, RunOptions{traced, "", ""});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r.err;
  };
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"list"}, {"show", std::to_string(id)}, {"status"}, {"--version"}}) {
    const auto trace = run(args);
    EXPECT_NE(trace.find("file=libc.so.6"), std::string::npos) << "the trace is there: " << trace;
    EXPECT_EQ(trace.find("file=libcurl"), std::string::npos) << args.front() << " loaded libcurl:\n" << trace;
    EXPECT_EQ(trace.find("file=libcrypto"), std::string::npos) << args.front() << " loaded libcrypto:\n" << trace;
  }
  const auto trace = run({"sync", "--json"});
  EXPECT_NE(trace.find("file=libcurl"), std::string::npos) << "sync lists the zones through libcurl:\n" << trace;
}

} // namespace cli_sync_test
} // namespace jobman::test
