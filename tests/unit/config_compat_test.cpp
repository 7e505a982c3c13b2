// Configs written for the Python jobman, and jobman's own examples, load unchanged and read back the same.
#include "jobman/config/loader.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

namespace jobman::config {
namespace config_compat_test {

std::string compat_dir() {
  return JOBMAN_SHARED_DIR "/compat";
}

std::string examples_dir() {
  return JOBMAN_SOURCE_DIR "/configs/examples";
}

JobConfig load_one(const std::string& path) {
  auto configs = load_job_configs(path);
  EXPECT_EQ(configs.size(), 1u) << path;
  return configs.front();
}

std::vector<std::string> warning_texts(const JobConfig& config) {
  std::vector<std::string> out;
  for (const auto& warning : config.warnings) {
    out.push_back(warning.where.key_path + ": " + warning.message);
  }
  return out;
}

bool has_warning(const JobConfig& config, const std::string& key_path, const std::string& fragment) {
  return std::any_of(config.warnings.begin(), config.warnings.end(), [&](const ConfigWarning& w) {
    return w.where.key_path == key_path && w.message.find(fragment) != std::string::npos;
  });
}

// Both directories hold the same four files; every check runs on both.
class ConfigCompat : public ::testing::TestWithParam<std::string> {
protected:
  [[nodiscard]] std::string path(const std::string& name) const { return GetParam() + "/" + name; }
};

TEST_P(ConfigCompat, TemplateLoadsWithDockerAndInterpolatedCommand) {
  const JobConfig c = load_one(path("template.yaml"));
  EXPECT_EQ(c.job.name, "test-jobman");
  EXPECT_EQ(c.job.env_type, EnvType::docker);
  EXPECT_TRUE(c.job.loop);
  EXPECT_EQ(c.job.remote_user, "zephyr");
  EXPECT_EQ(c.tpu.allocation_mode, AllocationMode::queued_resources);
  EXPECT_EQ(c.tpu.accelerator.name, "v4-128");
  EXPECT_EQ(c.tpu.accelerator.hosts, 16);
  EXPECT_EQ(c.tpu.accelerator.chips, 64);
  EXPECT_EQ(c.tpu.name, "yufeng-v4-128");
  EXPECT_EQ(c.tpu.zone, "us-central2-b");
  EXPECT_EQ(c.tpu.version, "tpu-ubuntu2204-base");
  EXPECT_EQ(c.tpu.pricing, Pricing::spot);
  EXPECT_EQ(c.tpu.startup_script, std::nullopt);
  EXPECT_EQ(c.tpu.tags, (std::vector<std::string>{"jobman", "experiment"}));
  EXPECT_EQ(c.tpu.metadata, (std::map<std::string, std::string>{{"owner", "yufeng"}, {"purpose", "test"}}));
  ASSERT_TRUE(c.gcsfuse);
  EXPECT_EQ(c.gcsfuse->bucket_name, "llm_pruning_us_central2_b");
  EXPECT_EQ(c.gcsfuse->mount_path, "/home/zephyr/gcs-bucket");
  ASSERT_TRUE(c.ssh);
  EXPECT_EQ(c.ssh->private_key, "~/.ssh/id_rsa");
  ASSERT_EQ(c.ssh->identities.size(), 1u);
  EXPECT_EQ(c.ssh->identities[0].public_key, "~/.ssh/id_rsa.pub");
  EXPECT_NE(c.ssh->identities[0].config_entry.find("IdentitiesOnly yes"), std::string::npos);
  ASSERT_TRUE(c.docker);
  EXPECT_EQ(c.docker->image, "yx3038/maxtext_base_image:latest");
  EXPECT_EQ(c.docker->flags, (std::vector<std::string>{"--privileged", "--network=host"}));
  EXPECT_EQ(c.docker->env_vars, (std::vector<std::string>{"HOME=/home/zephyr"}));
  EXPECT_EQ(c.docker->mount_dirs, (std::vector<std::string>{"/home/zephyr"}));
  EXPECT_EQ(c.docker->workdir, "/home/zephyr");
  ASSERT_TRUE(c.venv);
  EXPECT_EQ(c.venv->python, "python3.9");
  EXPECT_FALSE(c.command.workers.all);
  EXPECT_EQ(c.command.workers.indices, (std::vector<int>{0}));
  EXPECT_EQ(c.command.workers.to_gcloud(), "0");
  EXPECT_NE(c.command.cmd.find("export BUCKET_NAME=llm_pruning_us_central2_b\n"), std::string::npos);
  EXPECT_NE(c.command.cmd.find("gcloud config set compute/zone us-central2-b\n"), std::string::npos);
  EXPECT_EQ(c.command.cmd.find("${"), std::string::npos);
  EXPECT_EQ(c.recovery.max_preemptions, std::nullopt) << "loop: true keeps the unlimited default";
  ASSERT_TRUE(c.email);
  EXPECT_FALSE(c.email->enabled());
  // The conda and venv sections are there for other env types: said once each, nothing else.
  EXPECT_EQ(warning_texts(c), (std::vector<std::string>{"conda: section not used: job.env_type is docker",
                                                        "venv: section not used: job.env_type is docker"}));
  EXPECT_EQ(c.source_path, path("template.yaml"));
}

TEST_P(ConfigCompat, V4ConfigLoadsWithVenvAndDockerFlagsKept) {
  const JobConfig c = load_one(path("v4-us-central2-b.yaml"));
  EXPECT_EQ(c.job.name, "test-v4");
  EXPECT_EQ(c.job.env_type, EnvType::venv);
  EXPECT_EQ(c.tpu.accelerator.name, "v4-32");
  EXPECT_EQ(c.tpu.accelerator.hosts, 4);
  EXPECT_EQ(c.tpu.name, "yufeng-v4-32");
  EXPECT_TRUE(c.tpu.flags.empty());
  ASSERT_TRUE(c.ssh);
  ASSERT_EQ(c.ssh->identities.size(), 2u);
  EXPECT_EQ(c.ssh->identities[1].private_key, "~/.ssh/id_ed25519_github");
  ASSERT_TRUE(c.docker);
  EXPECT_EQ(c.docker->flags.size(), 8u);
  EXPECT_EQ(c.docker->flags[2], "--env HOME=/home/zephyr");
  ASSERT_TRUE(c.venv);
  EXPECT_EQ(c.venv->name, "maxtext_env");
  EXPECT_EQ(c.venv->python, "3.10");
  const auto requirements = std::filesystem::path(GetParam()) / "assets/requirements_maxtext.txt";
  EXPECT_EQ(c.venv->requirements_file, std::filesystem::absolute(requirements).lexically_normal().string())
      << "paths are relative to the config file";
  EXPECT_NE(c.command.cmd.find("export TPU_PREFIX=yufeng-v4-32\n"), std::string::npos);
  EXPECT_NE(c.command.cmd.find("export BUCKET_NAME=llm_pruning_us_central2_b\n"), std::string::npos);
  EXPECT_EQ(c.command.workers.indices, (std::vector<int>{0}));
  EXPECT_FALSE(c.email);
  EXPECT_TRUE(has_warning(c, "docker", "section not used: job.env_type is venv"));
  EXPECT_TRUE(has_warning(c, "conda", "section not used"));
  EXPECT_TRUE(has_warning(c, "venv.requirements_file", "file not found"));
  // It exports TPU_PREFIX=${tpu.name}, which the Python jobman resolves to the node's name.
  EXPECT_TRUE(has_warning(c, "command.cmd", "the command finds the node's name in $JOBMAN_TPU_NAME"));
  EXPECT_EQ(c.warnings.size(), 4u) << ::testing::PrintToString(warning_texts(c));
}

TEST_P(ConfigCompat, QuickStartLoadsWithLoopOffAndNullSections) {
  const JobConfig c = load_one(path("quick_start.yaml"));
  EXPECT_EQ(c.job.name, "quick-start");
  EXPECT_EQ(c.job.env_type, EnvType::conda);
  EXPECT_FALSE(c.job.loop);
  EXPECT_EQ(c.recovery.max_preemptions, 0) << "loop: False means no preemption budget";
  EXPECT_EQ(c.tpu.accelerator.name, "v6e-1");
  EXPECT_EQ(c.tpu.accelerator.hosts, 1);
  EXPECT_EQ(c.tpu.name, "yufeng-v6e-1");
  EXPECT_EQ(c.tpu.zone, "us-east1-d");
  EXPECT_EQ(c.tpu.version, "v2-alpha-tpuv6e");
  EXPECT_EQ(c.tpu.metadata.at("purpose"), "testing jobman");
  EXPECT_FALSE(c.gcsfuse) << "gcsfuse: null";
  EXPECT_FALSE(c.ssh) << "ssh: null";
  ASSERT_TRUE(c.conda);
  EXPECT_EQ(c.conda->name, "fms");
  EXPECT_TRUE(c.command.workers.all);
  EXPECT_EQ(c.command.workers.to_gcloud(), "all");
  EXPECT_EQ(c.command.cmd, "pip show jax\npip show flax\n");
  ASSERT_EQ(c.warnings.size(), 1u) << ::testing::PrintToString(warning_texts(c));
  EXPECT_EQ(c.warnings[0].where.key_path, "conda.config_file");
  EXPECT_GT(c.warnings[0].where.line, 0);
}

TEST_P(ConfigCompat, TestVenvLoadsWithVenvEnvironment) {
  const JobConfig c = load_one(path("test_venv.yaml"));
  EXPECT_EQ(c.job.name, "test-venv");
  EXPECT_EQ(c.job.env_type, EnvType::venv);
  EXPECT_EQ(c.recovery.max_preemptions, 0);
  ASSERT_TRUE(c.venv);
  EXPECT_EQ(c.venv->name, "maxtext");
  EXPECT_EQ(c.venv->python, "3.9");
  ASSERT_TRUE(c.ssh);
  EXPECT_TRUE(c.ssh->identities.empty());
  EXPECT_FALSE(c.docker);
  ASSERT_EQ(c.warnings.size(), 1u) << ::testing::PrintToString(warning_texts(c));
  EXPECT_EQ(c.warnings[0].where.key_path, "venv.requirements_file");
}

TEST_P(ConfigCompat, ResolvedYamlLoadsBackToTheSameConfig) {
  for (const auto& name : {"template.yaml", "v4-us-central2-b.yaml", "quick_start.yaml", "test_venv.yaml"}) {
    SCOPED_TRACE(name);
    const JobConfig first = load_one(path(name));
    const auto again = parse_job_configs(first.resolved_yaml, path(name));
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].resolved_yaml, first.resolved_yaml);
    EXPECT_EQ(to_json(again[0]), to_json(first));
    EXPECT_EQ(again[0].command.cmd, first.command.cmd);
    EXPECT_EQ(again[0].tpu.accelerator.hosts, first.tpu.accelerator.hosts);
    // Less the one about ${tpu.name} in the command, which the snapshot holds resolved.
    EXPECT_EQ(again[0].warnings.size(),
              first.warnings.size() - (has_warning(first, "command.cmd", "$JOBMAN_TPU_NAME") ? 1 : 0));
  }
}

// The project's own copies always; the originals too when the shared folder is checked out beside the repo.
std::vector<std::string> compat_dirs() {
  std::vector<std::string> dirs{examples_dir() + "/python-jobman"};
  if (std::filesystem::is_directory(compat_dir())) {
    dirs.push_back(compat_dir());
  }
  return dirs;
}

INSTANTIATE_TEST_SUITE_P(ConfigCopies, ConfigCompat, ::testing::ValuesIn(compat_dirs()),
                         [](const auto& param_info) { return param_info.index == 0 ? "examples" : "shared"; });

TEST(ConfigExamples, PythonJobmanCopiesAreByteForByte) {
  if (!std::filesystem::is_directory(compat_dir())) {
    GTEST_SKIP() << "the originals (" << compat_dir() << ") are not beside this checkout";
  }
  for (const auto& entry : std::filesystem::directory_iterator(compat_dir())) {
    if (entry.path().extension() != ".yaml") {
      continue;
    }
    const auto copy = std::filesystem::path(examples_dir()) / "python-jobman" / entry.path().filename();
    ASSERT_TRUE(std::filesystem::exists(copy)) << copy;
    std::ifstream a(entry.path(), std::ios::binary);
    std::ifstream b(copy, std::ios::binary);
    const std::string left((std::istreambuf_iterator<char>(a)), {});
    const std::string right((std::istreambuf_iterator<char>(b)), {});
    EXPECT_EQ(left, right) << copy;
  }
}

TEST(ConfigExamples, EveryExampleLoadsCleanly) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(examples_dir())) {
    if (entry.path().extension() != ".yaml") {
      continue;
    }
    SCOPED_TRACE(entry.path().string());
    std::vector<JobConfig> configs;
    ASSERT_NO_THROW(configs = load_job_configs(entry.path().string()));
    for (const auto& config : configs) {
      EXPECT_TRUE(config.warnings.empty()) << ::testing::PrintToString(warning_texts(config));
      const auto again = parse_job_configs(config.resolved_yaml, entry.path().string());
      ASSERT_EQ(again.size(), 1u);
      EXPECT_EQ(to_json(again[0]), to_json(config));
    }
    ++count;
  }
  EXPECT_EQ(count, 4);
}

TEST(ConfigExamples, TheWorkerExampleKeepsASpotSliceWithABucketAndASetupScript) {
  const JobConfig c = load_one(examples_dir() + "/worker-v4.yaml");
  EXPECT_EQ(c.job.name, "pool-v4");
  EXPECT_EQ(c.tpu.accelerator.name, "v4-8");
  EXPECT_EQ(c.tpu.pricing, Pricing::spot);
  ASSERT_TRUE(c.gcsfuse.has_value());
  EXPECT_EQ(c.gcsfuse->mount_path, "~/bucket");
  ASSERT_TRUE(c.setup.has_value());
  EXPECT_NE(c.setup->script.find("mkdir -p ~/bucket/ckpt"), std::string::npos) << c.setup->script;
  EXPECT_EQ(c.recovery.max_failures, 3);
}

TEST(ConfigExamples, SpotV4SystolicRunsTheBundledWorkload) {
  const JobConfig c = load_one(examples_dir() + "/spot-v4-systolic.yaml");
  EXPECT_EQ(c.tpu.accelerator.name, "v4-8");
  EXPECT_EQ(c.tpu.pricing, Pricing::spot);
  EXPECT_EQ(c.tpu.zone, "us-central2-b");
  EXPECT_EQ(c.tpu.version, "tpu-ubuntu2204-base") << "defaulted from the generation";
  EXPECT_EQ(c.tpu.name, c.job.name) << "defaulted from job.name";
  ASSERT_TRUE(c.gcsfuse);
  EXPECT_EQ(c.gcsfuse->bucket_name, "jobman-demo");
  EXPECT_EQ(c.gcsfuse->mount_path, "~/bucket");
  EXPECT_NE(c.command.cmd.find(
                "systolic-train --steps 2000 --step-time-ms 20 --ckpt-dir ~/bucket/ckpt/systolic-v4-$JOBMAN_JOB_ID "
                "--ckpt-every 100"),
            std::string::npos);
  EXPECT_NE(c.command.cmd.find("${JOBMAN_ATTEMPT}"), std::string::npos) << "shell variables are left alone";
  EXPECT_EQ(c.recovery.max_preemptions, std::nullopt);
  EXPECT_EQ(c.recovery.max_failures, 1);
}

TEST(ConfigExamples, OndemandV5eUsesAVenv) {
  const JobConfig c = load_one(examples_dir() + "/ondemand-v5e.yaml");
  EXPECT_EQ(c.tpu.accelerator.name, "v5litepod-16");
  EXPECT_EQ(c.tpu.accelerator.hosts, 4);
  EXPECT_EQ(c.tpu.pricing, Pricing::ondemand);
  EXPECT_EQ(c.tpu.zone, "us-central1-a");
  EXPECT_EQ(c.tpu.queue_timeout_seconds, 7200);
  EXPECT_EQ(c.job.env_type, EnvType::venv);
  ASSERT_TRUE(c.venv);
  EXPECT_EQ(c.venv->python, "3.10");
}

TEST(ConfigExamples, SweepV6eMakesOneJobPerLearningRate) {
  const auto configs = load_job_configs(examples_dir() + "/sweep-v6e.yaml");
  ASSERT_EQ(configs.size(), 3u);
  EXPECT_EQ(configs[0].job.name, "sweep-v6e-lr=0.001");
  EXPECT_EQ(configs[1].job.name, "sweep-v6e-lr=0.0003");
  EXPECT_EQ(configs[2].job.name, "sweep-v6e-lr=0.0001");
  for (const auto& c : configs) {
    EXPECT_EQ(c.tpu.accelerator.name, "v6e-8");
    EXPECT_EQ(c.tpu.zone, "us-east1-d");
    EXPECT_NE(c.command.cmd.find("--lr " + c.vars.at("lr") + " "), std::string::npos);
    EXPECT_NE(c.command.cmd.find("/mnt/bucket/ckpt/" + c.job.name + "-$JOBMAN_JOB_ID "), std::string::npos)
        << "each job's checkpoints are its own";
    EXPECT_EQ(c.sweep_point.at("vars.lr"), c.vars.at("lr"));
  }
}

} // namespace config_compat_test
} // namespace jobman::config
