// Checkpoint directories two jobs would share, and where a home keeps each store's files.
#include "jobman/config/loader.hpp"
#include "jobman/core/checkpoint_paths.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/store/attempts.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

namespace jobman::core {
namespace core_checkpoint_paths_test {

TEST(CheckpointPaths, TheValuesOfCheckpointFlagsAreFoundInEitherForm) {
  EXPECT_EQ(checkpoint_paths("systolic-train --steps 10 --ckpt-dir ~/bucket/ckpt/a --ckpt-every 5"),
            (std::vector<std::string>{"~/bucket/ckpt/a"}));
  EXPECT_EQ(checkpoint_paths("python train.py --checkpoint_dir=/mnt/b/run \\\n  --output-dir '/mnt/b/out dir'"),
            (std::vector<std::string>{"/mnt/b/run", "/mnt/b/out dir"}));
  EXPECT_EQ(checkpoint_paths("train --ckpt-dir ~/bucket/$JOBMAN_JOB_ID"),
            (std::vector<std::string>{"~/bucket/$JOBMAN_JOB_ID"}));
  EXPECT_TRUE(checkpoint_paths("echo --ckpt-every 10").empty());
  EXPECT_TRUE(checkpoint_paths("train --ckpt-dir").empty()) << "a flag with no value names nothing";
}

class SharedCheckpointsTest : public ::testing::Test {
protected:
  // A config whose command keeps its checkpoints in `dir` (in the bucket mounted at ~/bucket).
  std::vector<config::JobConfig> config_with(const std::string& name, const std::string& dir) {
    const auto path = tmp.write(name + ".yaml", "job:\n  name: " + name +
                                                    "\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                                                    "gcsfuse:\n  bucket_name: b\n  mount_path: ~/bucket\n"
                                                    "command:\n  cmd: systolic-train --ckpt-dir " +
                                                    dir + " --ckpt-every 10\n");
    return config::load_job_configs(path.string());
  }

  // Records `configs` as jobs that ran (an attempt each).
  void ran(const std::vector<config::JobConfig>& configs) {
    for (const auto id : create_jobs(store, configs, "alice")) {
      (void)store.attempts().begin(id, domain::Placement{"qr", "node", "us-central2-b", {}, 0, std::nullopt, {}});
    }
  }

  test::TempDir tmp;
  test::ScopedEnv home{"JOBMAN_HOME", tmp.path().string()};
  store::JobStore store = store::JobStore::open_in_memory();
};

TEST_F(SharedCheckpointsTest, ANewJobWhoseCheckpointsAnotherJobWroteIsWarnedAbout) {
  ran(config_with("first", "~/bucket/ckpt/run"));
  const auto warnings = shared_checkpoint_warnings(store, config_with("copy", "~/bucket/ckpt/run/"));
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_NE(warnings[0].find("copy.yaml: command.cmd: checkpoint directory ~/bucket/ckpt/run/ (gs://b/ckpt/run)"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("job 000001 (first), which wrote its checkpoints there"), std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("$JOBMAN_JOB_ID"), std::string::npos) << warnings[0];
}

TEST_F(SharedCheckpointsTest, DirectoriesOfTheirOwnAreNotWarnedAbout) {
  ran(config_with("first", "~/bucket/ckpt/run"));
  EXPECT_TRUE(shared_checkpoint_warnings(store, config_with("other", "~/bucket/ckpt/other")).empty());
  EXPECT_TRUE(shared_checkpoint_warnings(store, config_with("keyed", "~/bucket/ckpt/run-$JOBMAN_JOB_ID")).empty())
      << "a directory the shell expands is each job's own";
  EXPECT_TRUE(shared_checkpoint_warnings(store, config_with("local", "~/ckpt/run")).empty())
      << "a worker's own disk is each slice's own";
  // A job recorded but never run wrote nothing.
  (void)create_jobs(store, config_with("never", "~/bucket/ckpt/never"), "alice");
  EXPECT_TRUE(shared_checkpoint_warnings(store, config_with("after", "~/bucket/ckpt/never")).empty());
}

TEST(StoreFiles, EachStoreOfAHomeHasItsOwnJobDirectories) {
  const test::TempDir dir;
  const test::ScopedEnv home("JOBMAN_HOME", dir.path().string());
  EXPECT_EQ(store_key((dir / "jobman.db").string()), "");
  EXPECT_EQ(jobs_root((dir / "jobman.db").string()), dir / "jobs");
  const auto other = store_key((dir / "other.db").string());
  EXPECT_EQ(other.size(), 12U);
  EXPECT_EQ(jobs_root((dir / "other.db").string()), dir / "stores" / other / "jobs");
  // A server's store is named by its server and database, not by who connects or with which password.
  const auto alice = store_key("postgresql://alice@db.lab.org/jobman");
  EXPECT_EQ(store_key("postgresql://bob:secret@db.lab.org/jobman"), alice);
  EXPECT_NE(store_key("postgresql://alice@db.lab.org/other"), alice);
  EXPECT_NE(alice, other);
}

} // namespace core_checkpoint_paths_test
} // namespace jobman::core
