// The store on a file system that will not take writes: JOBMAN_HOME mounted read-only, and a full disk. Each test runs
// the real jobman inside a private mount namespace (unshare -rm), so that it can mount without touching the machine.
// A command that cannot write says so plainly, exits 1 and leaves the store as it was; reading still works.
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace jobman::test {
namespace store_faults_test {

namespace fs = std::filesystem;
using nlohmann::json;

class StoreFaultsTest : public ::testing::Test {
protected:
  void SetUp() override {
    fs::create_directories(out);
    config = dir.write("job.yaml", "job:\n  name: faults\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                                   "command:\n  cmd: echo hi\n")
                 .string();
  }

  std::map<std::string, std::string> env() const {
    return {{"JOBMAN_HOME", home.string()},
            {"XDG_CONFIG_HOME", (dir / "config").string()},
            {"JOBMAN_CLOUD", "mock"},
            {"JOBMAN_PROJECT", ""},
            {"JOBMAN_AUTOSTART", "0"}};
  }

  // Runs `script` under bash in a new user and mount namespace; $J is the jobman binary, $H the home, $O `out`.
  RunResult in_namespace(const std::string& script) const {
    auto with_paths = env();
    with_paths["J"] = jobman_binary();
    with_paths["H"] = home.string();
    with_paths["O"] = out.string();
    with_paths["CFG"] = config;
    return run_program({"/usr/bin/unshare", "-rm", "/bin/bash", "-c", "set -u\n" + script},
                       RunOptions{with_paths, "", ""});
  }

  // What `jobman ARGS` left in out/NAME.{rc,out,err}.
  int rc(const std::string& name) const { return std::stoi(file_text(out / (name + ".rc"))); }
  std::string err(const std::string& name) const { return file_text(out / (name + ".err")); }
  std::string output(const std::string& name) const { return file_text(out / (name + ".out")); }

  TempDir dir;
  fs::path home = dir / "home";
  fs::path out = dir / "out";
  std::string config;
};

// Shell text that runs `jobman ARGS`, keeping its exit code, stdout and stderr under $O/NAME.
std::string record(const std::string& name, const std::string& args) {
  return "\"$J\" " + args + " > \"$O/" + name + ".out\" 2> \"$O/" + name + ".err\"; echo $? > \"$O/" + name + ".rc\"\n";
}

TEST_F(StoreFaultsTest, AReadOnlyHomeStillListsAndShowsAndRefusesChangesWithAClearError) {
  ASSERT_EQ(run_jobman({"create", "--no-start", config}, RunOptions{env(), "", ""}).exit_code, 0);
  ASSERT_EQ(run_jobman({"create", "--no-start", config}, RunOptions{env(), "", ""}).exit_code, 0);
  const auto before = fs::file_size(home / "jobman.db");

  const auto run = in_namespace("mount --bind \"$H\" \"$H\" && mount -o remount,bind,ro \"$H\" || exit 99\n" +
                                record("list", "list --all --json") + record("show", "show 1 --json") +
                                record("create", "create --no-start \"$CFG\"") + record("cancel", "cancel 1") +
                                record("clean", "clean 2"));
  ASSERT_EQ(run.exit_code, 0) << run.err;

  EXPECT_EQ(rc("list"), 0) << err("list");
  EXPECT_EQ(json::parse(output("list")).size(), 2U);
  EXPECT_EQ(rc("show"), 0) << err("show");
  EXPECT_EQ(json::parse(output("show"))["status"], "PENDING");
  for (const auto* command : {"create", "cancel", "clean"}) {
    EXPECT_EQ(rc(command), 1) << command << ": " << err(command);
    EXPECT_NE(err(command).find("read-only"), std::string::npos) << command << ": " << err(command);
    EXPECT_NE(err(command).find(home.string()), std::string::npos) << command << " names the home: " << err(command);
  }

  // Outside the namespace the store is as it was: intact, both jobs, nothing cancelled or removed.
  auto store = store::JobStore::open(home / "jobman.db");
  EXPECT_TRUE(store.integrity_ok());
  store::JobFilter all;
  all.include_history = true;
  const auto jobs = store.jobs().list(all);
  ASSERT_EQ(jobs.size(), 2U);
  EXPECT_EQ(jobs[0].desired, domain::DesiredState::run);
  EXPECT_EQ(fs::file_size(home / "jobman.db"), before);
}

TEST_F(StoreFaultsTest, AFullDiskFailsTheCommandWithAClearErrorAndWritesNothingHalfway) {
  // A 1 MiB file system for the home: one job fits; then a filler takes every free block.
  const auto run = in_namespace(
      "mkdir -p \"$H\" && mount -t tmpfs -o size=1m,mode=0700 tmpfs \"$H\" || exit 99\n" +
      record("first", "create --no-start \"$CFG\"") + "dd if=/dev/zero of=\"$H/filler\" bs=4k 2> /dev/null\n" +
      record("full", "create --no-start \"$CFG\"") + record("cancel", "cancel 1") +
      record("listfull", "list --all --json") +
      // Space again: the store works and was never damaged.
      "rm -f \"$H/filler\"\n" + record("again", "create --no-start \"$CFG\"") + record("list", "list --all --json") +
      "cp \"$H\"/jobman.db* \"$O\"/ && ls -A \"$H\" > \"$O/home.ls\"\n");
  ASSERT_EQ(run.exit_code, 0) << run.err;

  EXPECT_EQ(rc("first"), 0) << err("first");
  EXPECT_EQ(rc("full"), 1) << err("full");
  EXPECT_NE(err("full").find("disk is full"), std::string::npos) << err("full");
  EXPECT_NE(err("full").find(home.string()), std::string::npos) << err("full");
  EXPECT_EQ(rc("cancel"), 1) << err("cancel");
  EXPECT_NE(err("cancel").find("disk is full"), std::string::npos) << err("cancel");
  EXPECT_EQ(rc("listfull"), 0) << "reading works on a full disk: " << err("listfull");
  EXPECT_EQ(json::parse(output("listfull")).size(), 1U);

  // The failed create left no job and no directory; the next one works.
  EXPECT_EQ(rc("again"), 0) << err("again");
  const auto listed = json::parse(output("list"));
  ASSERT_EQ(listed.size(), 2U);
  EXPECT_EQ(listed[0]["status"], "PENDING") << "the failed cancel changed nothing";
  EXPECT_EQ(file_text(out / "home.ls").find("jobs"), std::string::npos) << file_text(out / "home.ls");
  auto store = store::JobStore::open(out / "jobman.db");
  EXPECT_TRUE(store.integrity_ok());
}

} // namespace store_faults_test
} // namespace jobman::test
