// The job commands end to end: the real binary, a fresh JOBMAN_HOME per test.
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <set>
#include <sys/stat.h>

namespace jobman::test {
namespace cli_jobs_test {

const std::string kData = std::string(JOBMAN_TEST_DATA_DIR) + "/cli/";

class CliJobs : public ::testing::Test {
protected:
  TempDir dir;
  RunOptions opts() const {
    RunOptions o;
    o.env["JOBMAN_HOME"] = (dir / "home").string();
    o.env["XDG_CONFIG_HOME"] = (dir / "config").string();
    o.env["JOBMAN_PROJECT"] = "";
    o.env["JOBMAN_CLOUD"] = "";
    o.env["JOBMAN_ZONE"] = "";
    o.env["NO_COLOR"] = "";
    o.env["USER"] = "alice";
    return o;
  }
  RunResult jm(const std::vector<std::string>& args) const { return run_jobman(args, opts()); }
  nlohmann::json json_of(const std::vector<std::string>& args, int expected_exit = 0) const {
    const auto r = jm(args);
    EXPECT_EQ(r.exit_code, expected_exit) << r.err;
    // Logging is silenced under --json; what is left on stderr is the notice that nobody drives the jobs (these
    // tests run no supervisor).
    EXPECT_TRUE(r.err.empty() || r.err.find("no supervisor driving") != std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("warn"), std::string::npos) << r.err;
    return nlohmann::json::parse(r.out);
  }
  std::string create(const std::string& config) const {
    const auto r = jm({"create", config});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }
};

TEST_F(CliJobs, CreatePrintsZeroPaddedIdsThatListAndShowFind) {
  EXPECT_EQ(create(kData + "train.yaml"), "000001");
  EXPECT_EQ(create(kData + "train.yaml"), "000002");
  const auto list = json_of({"list", "--json"});
  ASSERT_EQ(list.size(), 2U);
  EXPECT_EQ(list[0]["id"], 1);
  EXPECT_EQ(list[0]["name"], "cli-train");
  EXPECT_EQ(list[0]["user"], "alice");
  EXPECT_EQ(list[0]["accelerator"], "v4-32");
  EXPECT_EQ(list[0]["zone"], "us-central2-b");
  EXPECT_EQ(list[0]["status"], "PENDING");
  EXPECT_EQ(list[0]["hosts"], 4);
  const auto show = json_of({"show", "2", "--json"});
  EXPECT_EQ(show["id"], 2);
  EXPECT_EQ(show["events"][0]["kind"], "created");

  const auto table = jm({"list"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("JOB ID"), std::string::npos);
  EXPECT_NE(table.out.find("HOST0 IP"), std::string::npos);
  EXPECT_NE(table.out.find("000002"), std::string::npos);
  EXPECT_EQ(table.out.find('\x1b'), std::string::npos) << "no colour without a terminal";
}

TEST_F(CliJobs, ConfigSnapshotIsNotAffectedByLaterEdits) {
  const auto config = dir.write("job.yaml", "job:\n  name: snap\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                                            "command:\n  cmd: echo first\n");
  const auto id = create(config.string());
  dir.write("job.yaml", "job:\n  name: snap\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                        "command:\n  cmd: echo second\n");
  const auto r = jm({"show", id, "--config"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("echo first"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("echo second"), std::string::npos) << r.out;
}

TEST_F(CliJobs, DryRunRecordsNothingAndShowsTheRequest) {
  const auto r = jm({"create", kData + "train.yaml", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("queuedResources?queuedResourceId="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"acceleratorType\": \"v4-32\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"spot\": {}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("python3 train.py --lr 0.001"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("workers 0-3"), std::string::npos) << r.out;
  EXPECT_EQ(json_of({"list", "--all", "--json"}).size(), 0U);

  const auto plan = json_of({"create", kData + "train.yaml", "--dry-run", "--json"});
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0]["plan"]["api"]["body"]["tpu"]["nodeSpec"][0]["node"]["acceleratorType"], "v4-32");
}

TEST_F(CliJobs, BadConfigNamesFileLineAndKeyAndRecordsNothing) {
  const auto r = jm({"create", kData + "bad-key.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad-key.yaml:9:3: recovery.max_failure: unknown key (did you mean 'max_failures'?)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(json_of({"list", "--all", "--json"}).size(), 0U);
}

TEST_F(CliJobs, SetAndSweepCreateOneJobPerCombination) {
  const auto r = jm({"create", kData + "train.yaml", "--set", "tpu.accelerator=v4-8", "--sweep", "vars.lr=0.1,0.2",
                     "--sweep", "command.workers=0,all"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "000001\n000002\n000003\n000004\n");
  const auto list = json_of({"list", "--json"});
  ASSERT_EQ(list.size(), 4U);
  std::set<std::string> names;
  for (const auto& job : list) {
    EXPECT_EQ(job["accelerator"], "v4-8");
    names.insert(job["name"].get<std::string>());
    EXPECT_FALSE(job["sweep"].is_null());
  }
  EXPECT_EQ(names.size(), 4U) << "sweep members must be told apart by name";
}

TEST_F(CliJobs, ExitCodesFollowTheTable) {
  EXPECT_EQ(jm({"show", "42"}).exit_code, 3);
  EXPECT_NE(jm({"show", "42"}).err.find("no job 000042"), std::string::npos);
  EXPECT_EQ(jm({"show", "abc"}).exit_code, 2);
  EXPECT_EQ(jm({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(jm({"list", "--bogus"}).exit_code, 2);
  EXPECT_EQ(jm({"create"}).exit_code, 2);
  EXPECT_EQ(jm({"create", (dir / "missing.yaml").string()}).exit_code, 2);
  EXPECT_EQ(jm({"list", "--status", "RUNING"}).exit_code, 2);
  EXPECT_NE(jm({"list", "--status", "RUNING"}).err.find("did you mean RUNNING?"), std::string::npos);
  EXPECT_EQ(jm({"--help"}).exit_code, 0);
  EXPECT_EQ(jm({"cancel", "--help"}).exit_code, 0);
}

TEST_F(CliJobs, FairShareLimitsAreSetShownAndRemovedAndBadOnesNamed) {
  const auto bad_tier = jm({"store", "share", "v9:spot", "4"});
  EXPECT_EQ(bad_tier.exit_code, 2);
  EXPECT_NE(bad_tier.err.find("store share: TIER: 'v9' is not a TPU generation"), std::string::npos) << bad_tier.err;
  const auto bad_chips = jm({"store", "cap", "v4:spot", "lots"});
  EXPECT_EQ(bad_chips.exit_code, 2);
  EXPECT_NE(bad_chips.err.find("store cap: CHIPS: 'lots' is not a number of chips"), std::string::npos)
      << bad_chips.err;
  const auto none = jm({"store", "limits"});
  EXPECT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.err.find("No limits set"), std::string::npos) << none.err;

  EXPECT_EQ(jm({"store", "share", "v5e:spot", "16"}).out, "Every user's share of v5litepod spot chips is now 16\n");
  EXPECT_EQ(jm({"store", "share", "v5e:spot", "32", "--user", "bob"}).out,
            "bob's share of v5litepod spot chips is now 32\n");
  EXPECT_EQ(jm({"store", "cap", "v5e:spot", "64"}).out, "The lab's cap on v5litepod spot chips is now 64\n");
  EXPECT_EQ(jm({"store", "cap", "v5e:spot", "64"}).out, "The lab's cap on v5litepod spot chips was already 64\n");
  const auto shown = jm({"store", "limits"});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  for (const std::string row : {"v5litepod spot  the lab     64     0", "v5litepod spot  every user  16",
                                "v5litepod spot  bob         32     0"}) {
    EXPECT_NE(shown.out.find(row), std::string::npos) << row << "\n" << shown.out;
  }
  const auto limits = json_of({"store", "limits", "--json"});
  ASSERT_EQ(limits["tiers"].size(), 1U) << limits.dump();
  EXPECT_EQ(limits["tiers"][0]["tier"], "v5litepod:spot");
  EXPECT_EQ(limits["tiers"][0]["every_user_share"], 16);
  EXPECT_EQ(limits["tiers"][0]["users"][0]["user"], "bob");
  EXPECT_EQ(limits["tiers"][0]["users"][0]["share"], 32);
  EXPECT_EQ(jm({"store", "cap", "v5e:spot", "none"}).out, "The lab's cap on v5litepod spot chips is now unlimited\n");
  EXPECT_TRUE(json_of({"store", "limits", "--json"})["tiers"][0]["lab_cap"].is_null());
}

TEST_F(CliJobs, EveryCommandHelpHasExamples) {
  for (const std::string cmd :
       {"create", "validate", "list", "show", "resume", "cancel", "delete", "clean", "settings", "completion"}) {
    const auto r = jm({cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("Examples:"), std::string::npos) << cmd << " --help has no examples";
  }
}

TEST_F(CliJobs, AMisspelledCommandOrOptionIsNamedWithTheNearestOneAndExitCode2) {
  const std::map<std::vector<std::string>, std::string> typos = {
      {{"creat", kData + "train.yaml"},
       "jobman: error: unknown command 'creat' (did you mean 'create'?)\nRun 'jobman --help' for the commands.\n"},
      {{"lst"}, "jobman: error: unknown command 'lst' (did you mean 'list'?)\nRun 'jobman --help' for the commands.\n"},
      {{"list", "--stauts", "RUNNING"},
       "jobman: error: unknown option '--stauts' (did you mean '--status'?)\n"
       "Run 'jobman list --help' for its options.\n"},
      {{"-v", "list", "--all", "--stauts=RUNNING"},
       "jobman: error: unknown option '--stauts' (did you mean '--status'?)\n"
       "Run 'jobman list --help' for its options.\n"},
      {{"worker", "strat", "-a", "v4-8"},
       "jobman: error: unknown command 'strat' (did you mean 'start'?)\n"
       "Run 'jobman worker --help' for the commands.\n"},
      {{"task", "submit", "train.sh", "--nmae", "x"},
       "jobman: error: unknown option '--nmae' (did you mean '--name'?)\n"
       "Run 'jobman task submit --help' for its options.\n"},
      {{"frobnicate"}, "jobman: error: unknown command 'frobnicate'\nRun 'jobman --help' for the commands.\n"},
  };
  for (const auto& [args, message] : typos) {
    const auto r = jm(args);
    EXPECT_EQ(r.exit_code, 2) << args[0];
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, message);
  }
  // Known words with a bad value or a missing argument keep the parser's own message.
  const auto no_config = jm({"create"});
  EXPECT_EQ(no_config.exit_code, 2);
  EXPECT_EQ(no_config.err.find("unknown"), std::string::npos) << no_config.err;
  EXPECT_NE(no_config.err.find("CONFIG"), std::string::npos) << no_config.err;
  // What follows `--` is the worker's command, not jobman's.
  const auto ssh = jm({"ssh", "7", "--", "ls", "--colour"});
  EXPECT_EQ(ssh.exit_code, 3) << ssh.err;
}

TEST_F(CliJobs, EachGroupsHelpShowsExamplesOfItsOwnCommands) {
  const std::map<std::string, std::vector<std::string>> groups = {
      {"worker", {"jobman worker start -a v4-8", "jobman worker stop", "jobman worker logs"}},
      {"task", {"jobman task submit train.sh", "jobman task requeue", "jobman task show"}},
      {"store", {"jobman store migrate --to", "jobman store limits", "jobman store share"}},
      {"analytics", {"jobman analytics availability", "jobman analytics cost"}},
  };
  for (const auto& [group, examples] : groups) {
    const auto r = jm({group, "--help"});
    EXPECT_EQ(r.exit_code, 0) << group << ": " << r.err;
    EXPECT_NE(r.out.find("Examples:"), std::string::npos) << r.out;
    for (const auto& example : examples) {
      EXPECT_NE(r.out.find(example), std::string::npos) << group << " --help lacks '" << example << "':\n" << r.out;
    }
    EXPECT_EQ(r.out.find("jobman create configs/examples"), std::string::npos)
        << group << " --help shows the top-level examples:\n"
        << r.out;
  }
  // A group's command without examples of its own shows the group's, never the top level's.
  for (const std::string group : {"worker", "task"}) {
    const auto r = jm({group, "show", "--help"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("jobman " + group + " show"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("jobman create configs/examples"), std::string::npos) << r.out;
  }
}

// `create --wait` prints each id as soon as it is recorded; Ctrl-C while it waits leaves the jobs to the supervisor
// (here there is none: autostart is off, so they stay PENDING until the test interrupts the wait).
TEST_F(CliJobs, CreateWaitPrintsTheIdsAtOnceAndCtrlCLeavesTheJobsRunning) {
  auto env = opts().env;
  env["JOBMAN_AUTOSTART"] = "0";
  LineReadingProcess create({jobman_binary(), "create", kData + "train.yaml", "--sweep", "vars.lr=0.1,0.2", "--wait"},
                            env, dir / "create.err", std::chrono::seconds(30));
  EXPECT_EQ(create.next_line().value_or("<no id printed>"), "000001");
  EXPECT_EQ(create.next_line().value_or("<no id printed>"), "000002");
  create.send(SIGINT);
  EXPECT_EQ(create.finish(), 130);
  EXPECT_FALSE(create.killed_by_signal()) << "jobman answers SIGINT itself";
  EXPECT_EQ(create.lines(), (std::vector<std::string>{"000001", "000002"})) << "stdout is the ids alone";
  const auto err = file_text(dir / "create.err");
  EXPECT_NE(err.find("jobman: interrupted; jobs 000001, 000002 keep running under the supervisor. Follow them with "
                     "`jobman wait 000001 000002` or `jobman logs 000001 -f`"),
            std::string::npos)
      << err;
  EXPECT_EQ(jm({"list", "-q", "--status", "PENDING"}).out, "000001\n000002\n") << "nothing was cancelled";
}

// `create --wait` on a job that ends: the id on stdout, how it ended on stderr, the exit code as for `wait`.
TEST_F(CliJobs, CreateWaitSaysHowTheJobEndedOnStderrAndKeepsStdoutForTheId) {
  auto env = opts().env;
  env["JOBMAN_AUTOSTART"] = "0";
  LineReadingProcess create({jobman_binary(), "create", kData + "train.yaml", "--wait"}, env, dir / "create.err",
                            std::chrono::seconds(30));
  ASSERT_EQ(create.next_line().value_or("<no id printed>"), "000001");
  ASSERT_EQ(jm({"cancel", "1", "--no-wait"}).exit_code, 0);
  EXPECT_EQ(create.finish(), 5) << file_text(dir / "create.err");
  EXPECT_EQ(create.lines(), std::vector<std::string>{"000001"});
  EXPECT_NE(file_text(dir / "create.err").find("000001: CANCELLED"), std::string::npos)
      << file_text(dir / "create.err");
}

TEST_F(CliJobs, CancelResumeDeleteCleanChangeTheDesiredState) {
  create(kData + "train.yaml");
  create(kData + "train.yaml");
  auto r = jm({"cancel", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "000001: cancelled\n");
  EXPECT_EQ(jm({"cancel", "1"}).exit_code, 0) << "cancel is safe to repeat";
  auto job = json_of({"show", "1", "--json"});
  EXPECT_EQ(job["status"], "CANCELLED");
  EXPECT_EQ(job["desired"], "stop");

  r = jm({"resume", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  job = json_of({"show", "1", "--json"});
  EXPECT_EQ(job["status"], "PENDING");
  EXPECT_EQ(job["desired"], "run");

  r = jm({"delete", "1", "99"});
  EXPECT_EQ(r.exit_code, 3) << "a missing id is reported after the others are handled";
  EXPECT_NE(r.err.find("no job 000099"), std::string::npos);
  EXPECT_EQ(json_of({"show", "1", "--json"})["status"], "DELETED");

  r = jm({"clean", "--all-finished"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "000001: removed\n");
  EXPECT_EQ(jm({"show", "1"}).exit_code, 3);
  EXPECT_EQ(create(kData + "train.yaml"), "000003") << "ids are never reused";
}

// Found by the chaos harness (seed 3): `wait` on a job deleted by the user never returned, since it waited for the
// job to stop wanting deletion.
TEST_F(CliJobs, WaitReturnsAtOnceForADeletedJob) {
  create(kData + "train.yaml");
  ASSERT_EQ(jm({"delete", "1"}).exit_code, 0);
  const auto waited = jm({"wait", "1", "--timeout", "30"});
  EXPECT_EQ(waited.exit_code, 5) << "5: cancelled or deleted, not 124 (timed out): " << waited.out << waited.err;
  EXPECT_NE(waited.out.find("DELETED"), std::string::npos) << waited.out;
}

TEST_F(CliJobs, ListFiltersByStatusNameAndUser) {
  create(kData + "train.yaml");
  create(kData + "train.yaml");
  jm({"cancel", "2"});
  auto r = jm({"list", "-q", "--status", "cancelled"});
  EXPECT_EQ(r.out, "000002\n");
  r = jm({"list", "-q", "--name", "cli-*"});
  EXPECT_EQ(r.out, "000001\n000002\n");
  r = jm({"list", "-q", "--name", "other-*"});
  EXPECT_EQ(r.out, "");
  r = jm({"list", "-q", "--user", "bob"});
  EXPECT_EQ(r.out, "");
}

TEST_F(CliJobs, SecretsInAConfigNeverReachTheStore) {
  const auto config =
      dir.write("secret.yaml", "job:\n  name: sec\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                               "command:\n  cmd: echo hi\nbrevo_email:\n  api_key: xkeysib-S3CRET-VALUE\n"
                               "  sender: a@example.com\n  receiver: b@example.com\n");
  const auto id = create(config.string());
  const auto r = jm({"show", id, "--config"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("<redacted>"), std::string::npos) << r.out;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "home")) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(bytes.find("S3CRET"), std::string::npos) << entry.path();
  }
}

TEST_F(CliJobs, StoreFilesAreReadableByTheOwnerOnly) {
  create(kData + "train.yaml");
  struct stat st {};
  ASSERT_EQ(::stat((dir / "home" / "jobman.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  ASSERT_EQ(::stat((dir / "home").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700);
}

} // namespace cli_jobs_test
} // namespace jobman::test

namespace jobman::test {
namespace cli_jobs_test {

// Runs `jobman list` on a pseudo-terminal (util-linux `script`) so that colour decisions see a TTY.
RunResult list_on_terminal(const TempDir& dir, bool no_color) {
  RunOptions o;
  o.env["JOBMAN_HOME"] = (dir / "home").string();
  o.env["XDG_CONFIG_HOME"] = (dir / "config").string();
  o.env["JOBMAN_ZONE"] = "";
  o.env["TERM"] = "xterm";
  o.env["NO_COLOR"] = no_color ? "1" : "";
  o.env["JOBMAN_AUTOSTART"] = "0"; // list would start a supervisor for the job nobody drives, outliving the test.
  return run_program({"/usr/bin/script", "-qec", jobman_binary() + " list", "/dev/null"}, o);
}

TEST(CliColor, ColourOnATerminalUnlessNoColor) {
  TempDir dir;
  RunOptions o;
  o.env["JOBMAN_HOME"] = (dir / "home").string();
  o.env["XDG_CONFIG_HOME"] = (dir / "config").string();
  o.env["JOBMAN_ZONE"] = "";
  ASSERT_EQ(run_jobman({"create", kData + "train.yaml"}, o).exit_code, 0);
  const auto colored = list_on_terminal(dir, false);
  ASSERT_EQ(colored.exit_code, 0) << colored.err;
  EXPECT_NE(colored.out.find("\x1b["), std::string::npos) << colored.out;
  const auto plain = list_on_terminal(dir, true);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("000001"), std::string::npos) << plain.out;
  EXPECT_EQ(plain.out.find("\x1b["), std::string::npos) << plain.out;
}

} // namespace cli_jobs_test
} // namespace jobman::test
