// --set overrides and sweeps (the sweep: section and --sweep), applied before references and validation.
#include "jobman/config/loader.hpp"

#include <gtest/gtest.h>

namespace jobman::config {
namespace config_overrides_test {

std::string base() {
  return "job:\n  name: mnist\n"
         "tpu:\n  accelerator: v4-32\n  zone: us-central2-b\n"
         "command:\n  cmd: train --lr ${vars.lr} --bs ${vars.bs} --out /ckpt/${job.name}\n"
         "vars:\n  lr: 0.1\n  bs: 32\n";
}

std::vector<JobConfig> parse(const std::string& text, std::vector<std::string> sets,
                             std::vector<std::string> sweeps = {}) {
  LoadOptions options;
  options.set_overrides = std::move(sets);
  options.sweep_args = std::move(sweeps);
  return parse_job_configs(text, "sweep.yaml", options);
}

ConfigError error_of(const std::string& text, std::vector<std::string> sets, std::vector<std::string> sweeps = {}) {
  try {
    parse(text, std::move(sets), std::move(sweeps));
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return ConfigError({});
}

std::vector<std::string> names(const std::vector<JobConfig>& configs) {
  std::vector<std::string> out;
  out.reserve(configs.size());
  for (const auto& c : configs) {
    out.push_back(c.job.name);
  }
  return out;
}

TEST(ConfigSet, ScalarValueReplacesTheKey) {
  const auto c = parse(base(), {"tpu.zone=us-central2-b", "tpu.accelerator=v4-8", "vars.lr=0.5"});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].tpu.accelerator.name, "v4-8");
  EXPECT_EQ(c[0].command.cmd, "train --lr 0.5 --bs 32 --out /ckpt/mnist");
}

TEST(ConfigSet, ValueIsReadAsYaml) {
  const auto c = parse(base(), {"command.workers=[0,1]", "job.loop=false", "tpu.tags=[a, b]"});
  EXPECT_EQ(c[0].command.workers.indices, (std::vector<int>{0, 1}));
  EXPECT_FALSE(c[0].job.loop);
  EXPECT_EQ(c[0].recovery.max_preemptions, 0);
  EXPECT_EQ(c[0].tpu.tags, (std::vector<std::string>{"a", "b"}));
}

TEST(ConfigSet, TextThatIsNotAYamlValueStaysText) {
  const auto c = parse(base(), {"command.cmd=echo a: b", "vars.note=x=1,y=2"});
  EXPECT_EQ(c[0].command.cmd, "echo a: b");
  EXPECT_EQ(c[0].vars.at("note"), "x=1,y=2");
}

TEST(ConfigSet, CreatesMissingSections) {
  const auto c =
      parse(base(), {"gcsfuse.bucket_name=demo", "gcsfuse.mount_path=/mnt/bucket", "recovery.max_failures=3"});
  ASSERT_TRUE(c[0].gcsfuse);
  EXPECT_EQ(c[0].gcsfuse->bucket_name, "demo");
  EXPECT_EQ(c[0].recovery.max_failures, 3);
}

TEST(ConfigSet, FillsANullSection) {
  const auto c = parse(base() + "gcsfuse: null\n", {"gcsfuse.bucket_name=demo", "gcsfuse.mount_path=/mnt"});
  ASSERT_TRUE(c[0].gcsfuse);
  EXPECT_EQ(c[0].gcsfuse->mount_path, "/mnt");
}

TEST(ConfigSet, UnknownKeyIsAnErrorWithSuggestion) {
  const auto e = error_of(base(), {"tpu.zoen=us-central2-b"});
  ASSERT_EQ(e.diagnostics().size(), 1u) << e.what();
  const auto& d = e.diagnostics()[0];
  EXPECT_EQ(d.where.file, "--set");
  EXPECT_EQ(d.where.line, 0);
  EXPECT_EQ(d.where.key_path, "tpu.zoen");
  EXPECT_EQ(d.format(), "--set: tpu.zoen: unknown key (did you mean 'zone'?)");
}

TEST(ConfigSet, BadValueNamesTheArgument) {
  const auto e = error_of(base(), {"job.loop=sometimes"});
  EXPECT_EQ(std::string(e.what()), "--set: job.loop: expected true or false, got 'sometimes'");
}

TEST(ConfigSet, ArgumentWithoutEqualsIsAnError) {
  const auto e = error_of(base(), {"tpu.zone"});
  EXPECT_EQ(std::string(e.what()),
            "--set: 'tpu.zone' is not of the form key.path=value (e.g. --set tpu.zone=us-central2-b)");
  EXPECT_NE(std::string(error_of(base(), {"=x"}).what()).find("is not of the form key.path=value"), std::string::npos);
  EXPECT_NE(std::string(error_of(base(), {"tpu..zone=x"}).what()).find("is not of the form key.path=value"),
            std::string::npos);
}

TEST(ConfigSet, CannotSetBelowAScalar) {
  const auto e = error_of(base(), {"job.name.first=x"});
  EXPECT_NE(
      std::string(e.what()).find("--set: job.name.first: cannot set this key: job.name is 'mnist', not a mapping"),
      std::string::npos)
      << e.what();
}

TEST(ConfigSet, MalformedFlowValueIsAnError) {
  const auto e = error_of(base(), {"command.workers=[0,1"});
  EXPECT_NE(std::string(e.what()).find("--set: command.workers: cannot read the value '[0,1'"), std::string::npos)
      << e.what();
}

TEST(ConfigSet, FileErrorsAndSetErrorsAreReportedTogether) {
  const auto e = error_of(base() + "recovery:\n  extra: 1\n", {"tpu.zoen=x"});
  ASSERT_EQ(e.diagnostics().size(), 2u) << e.what();
  EXPECT_EQ(e.diagnostics()[0].where.file, "sweep.yaml") << "file problems first, in document order";
  EXPECT_EQ(e.diagnostics()[1].where.file, "--set");
}

TEST(ConfigSweep, CartesianProductInStableOrder) {
  const auto c = parse(base(), {}, {"vars.lr=0.1,0.01", "vars.bs=32,64,128"});
  EXPECT_EQ(names(c), (std::vector<std::string>{"mnist-lr=0.1-bs=32", "mnist-lr=0.1-bs=64", "mnist-lr=0.1-bs=128",
                                                "mnist-lr=0.01-bs=32", "mnist-lr=0.01-bs=64", "mnist-lr=0.01-bs=128"}));
  EXPECT_EQ(c[4].sweep_point, (std::map<std::string, std::string>{{"vars.lr", "0.01"}, {"vars.bs", "64"}}));
}

TEST(ConfigSweep, InterpolationIsResolvedPerMember) {
  const auto c = parse(base(), {}, {"vars.lr=0.1,0.01"});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].command.cmd, "train --lr 0.1 --bs 32 --out /ckpt/mnist-lr=0.1");
  EXPECT_EQ(c[1].command.cmd, "train --lr 0.01 --bs 32 --out /ckpt/mnist-lr=0.01");
  EXPECT_EQ(c[1].tpu.name, "mnist-lr=0.01") << "tpu.name defaults to the suffixed job name";
  EXPECT_EQ(c[1].vars.at("lr"), "0.01");
}

TEST(ConfigSweep, SectionAndCommandLineCombine) {
  const auto c =
      parse(base() + "sweep:\n  vars.lr: [0.1, 0.2]\n  tpu:\n    accelerator: [v4-8, v4-16]\n", {}, {"vars.bs=16,32"});
  ASSERT_EQ(c.size(), 8u);
  EXPECT_EQ(c[0].job.name, "mnist-lr=0.1-accelerator=v4-8-bs=16");
  EXPECT_EQ(c[7].job.name, "mnist-lr=0.2-accelerator=v4-16-bs=32");
  EXPECT_EQ(c[7].tpu.accelerator.name, "v4-16");
  EXPECT_EQ(c[7].resolved_yaml.find("sweep"), std::string::npos) << "a member is a plain job";
}

TEST(ConfigSweep, CommandLineReplacesTheSameKeyInTheSection) {
  const auto c = parse(base() + "sweep:\n  vars.lr: [0.1, 0.2, 0.3]\n", {}, {"vars.lr=[1, 2]"});
  EXPECT_EQ(names(c), (std::vector<std::string>{"mnist-lr=1", "mnist-lr=2"}));
}

TEST(ConfigSweep, SharedLeafNamesUseTheFullPath) {
  const auto c = parse(base(), {}, {"vars.name=a,b", "job.name=x"});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].job.name, "x-vars.name=a-job.name=x");
}

TEST(ConfigSweep, ListValuesAreSweptAsValues) {
  const auto c = parse(base() + "sweep:\n  command.workers: [[0], [1, 2], all]\n", {});
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].job.name, "mnist-workers=[0]");
  EXPECT_EQ(c[1].command.workers.indices, (std::vector<int>{1, 2}));
  EXPECT_TRUE(c[2].command.workers.all);
}

TEST(ConfigSweep, SetOverridesApplyToEveryMember) {
  const auto c = parse(base(), {"vars.bs=256"}, {"vars.lr=1,2"});
  for (const auto& member : c) {
    EXPECT_EQ(member.vars.at("bs"), "256");
  }
}

TEST(ConfigSweep, UnknownKeyIsAnError) {
  const auto e = error_of(base(), {}, {"tpu.zoen=a,b"});
  EXPECT_EQ(std::string(e.what()), "--sweep: tpu.zoen: unknown key (did you mean 'zone'?)");
}

TEST(ConfigSweep, EmptyListIsAnError) {
  EXPECT_EQ(std::string(error_of(base(), {}, {"vars.lr="}).what()),
            "--sweep: vars.lr: empty list of values (a sweep needs at least one value)");
  EXPECT_NE(std::string(error_of(base() + "sweep:\n  vars.lr: []\n", {}).what()).find("sweep.vars.lr: empty list"),
            std::string::npos);
}

TEST(ConfigSweep, MoreThanAThousandMembersIsAnError) {
  const auto e = error_of(
      base(), {}, {"vars.a=1,2,3,4,5,6,7,8,9,10,11", "vars.b=1,2,3,4,5,6,7,8,9,10", "vars.c=1,2,3,4,5,6,7,8,9,10"});
  EXPECT_NE(std::string(e.what()).find("the sweep has 1100 combinations, more than the 1000 allowed"),
            std::string::npos)
      << e.what();
}

TEST(ConfigSweep, ExactlyAThousandMembersIsAllowed) {
  const auto c =
      parse(base(), {}, {"vars.a=1,2,3,4,5,6,7,8,9,10", "vars.b=1,2,3,4,5,6,7,8,9,10", "vars.lr=1,2,3,4,5,6,7,8,9,10"});
  EXPECT_EQ(c.size(), 1000u);
  EXPECT_EQ(c.back().job.name, "mnist-a=10-b=10-lr=10");
}

TEST(ConfigSweep, ErrorsInEveryMemberAreReportedOnce) {
  const auto e = error_of(base() + "recovery:\n  extra: 1\n", {}, {"vars.lr=1,2,3"});
  EXPECT_EQ(e.diagnostics().size(), 1u) << e.what();
}

TEST(ConfigSweep, MemberSpecificErrorsNameTheValue) {
  const auto e = error_of(base(), {}, {"tpu.accelerator=v4-8,v4-9"});
  ASSERT_EQ(e.diagnostics().size(), 1u) << e.what();
  EXPECT_EQ(e.diagnostics()[0].format(),
            "--sweep: tpu.accelerator: 'v4-9' is not a valid v4 size (valid: v4-8, v4-16, v4-32, v4-64, v4-128, "
            "v4-256, v4-512, v4-1024, v4-2048, v4-4096)");
}

} // namespace config_overrides_test
} // namespace jobman::config
