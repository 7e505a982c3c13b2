// ${section.key} references: what is replaced, what is left for the shell, and what is an error.
#include "jobman/config/loader.hpp"

#include <cstdlib>
#include <gtest/gtest.h>
#include <map>
#include <optional>

namespace jobman::config {
namespace config_interpolation_test {

// A valid config whose command (and optional extra sections) a test chooses.
std::string config_with(const std::string& cmd_yaml, const std::string& extra = "") {
  return "job:\n  name: demo\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\ncommand:\n  cmd: " + cmd_yaml + "\n" +
         extra;
}

JobConfig parse_one(const std::string& text, const LoadOptions& options = {}) {
  auto configs = parse_job_configs(text, "interp.yaml", options);
  EXPECT_EQ(configs.size(), 1u);
  return configs.front();
}

std::string error_of(const std::string& text) {
  try {
    parse_job_configs(text, "interp.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ConfigInterpolation, ReferencesAreReplacedInsideText) {
  const auto c = parse_one(config_with("'echo ${job.name} in ${tpu.zone} on ${tpu.accelerator}'"));
  EXPECT_EQ(c.command.cmd, "echo demo in us-central2-b on v4-8");
}

TEST(ConfigInterpolation, ShellSyntaxIsLeftForTheShell) {
  const std::string cmd = "echo $HOME ${HOME} ${1} ${VAR:-x} ${#arr[@]} $(date) $$ ${HOME}/${USER}";
  const auto c = parse_one(config_with("'" + cmd + "'"));
  EXPECT_EQ(c.command.cmd, cmd);
}

TEST(ConfigInterpolation, DoubleDollarEscapesAReference) {
  const auto c = parse_one(config_with("'echo $${job.name} ${job.name} $${HOME}'"));
  EXPECT_EQ(c.command.cmd, "echo ${job.name} demo $${HOME}") << "$${HOME} is not a reference, so it stays";
}

TEST(ConfigInterpolation, EscapedReferencesSurviveTheResolvedYamlRoundTrip) {
  const auto c = parse_one(config_with("'echo $${job.name} and $$${tpu.zone}'"));
  EXPECT_EQ(c.command.cmd, "echo ${job.name} and $${tpu.zone}");
  const auto again = parse_job_configs(c.resolved_yaml, "again.yaml");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].command.cmd, c.command.cmd);
}

TEST(ConfigInterpolation, ReferencesChain) {
  const auto c = parse_one(config_with("'${vars.c}'", "vars:\n  a: base\n  b: ${vars.a}-mid\n  c: ${vars.b}-top\n"));
  EXPECT_EQ(c.command.cmd, "base-mid-top");
  EXPECT_EQ(c.vars.at("c"), "base-mid-top");
}

TEST(ConfigInterpolation, ChainsMayRunThroughLaterSections) {
  const std::string text = "job:\n  name: run-${vars.tag}\n"
                           "tpu:\n  accelerator: ${vars.acc}\n  zone: us-central2-b\n  name: ${job.name}-tpu\n"
                           "command:\n  cmd: echo ${tpu.name}\n"
                           "vars:\n  tag: t1\n  acc: v4-16\n";
  const auto c = parse_one(text);
  EXPECT_EQ(c.job.name, "run-t1");
  EXPECT_EQ(c.tpu.name, "run-t1-tpu");
  EXPECT_EQ(c.tpu.accelerator.name, "v4-16");
  EXPECT_EQ(c.command.cmd, "echo run-t1-tpu");
}

TEST(ConfigInterpolation, WholeValueReferenceKeepsListType) {
  const auto c =
      parse_one(config_with("echo\n  workers: ${vars.first}", "vars:\n  first: 0\n") + "ssh:\n  identities: []\n");
  EXPECT_EQ(c.command.workers.indices, (std::vector<int>{0}));
  const std::string text = "job:\n  name: demo\n"
                           "tpu:\n  accelerator: v4-32\n  zone: us-central2-b\n  tags: [a, b]\n"
                           "gcsfuse:\n  bucket_name: b\n  mount_path: /mnt\n  flags: ${tpu.tags}\n"
                           "command:\n  cmd: echo\n  workers: ${gcsfuse.flags.1}\n";
  EXPECT_NE(error_of(text).find("command.workers"), std::string::npos) << "'b' is not a worker index";
  const std::string lists = "job:\n  name: demo\n"
                            "tpu:\n  accelerator: v4-32\n  zone: us-central2-b\n  tags: [a, b]\n"
                            "gcsfuse:\n  bucket_name: b\n  mount_path: /mnt\n  flags: ${tpu.tags}\n"
                            "command:\n  cmd: echo ${gcsfuse.flags.0}\n";
  const auto d = parse_one(lists);
  ASSERT_TRUE(d.gcsfuse);
  EXPECT_EQ(d.gcsfuse->flags, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(d.command.cmd, "echo a") << "list items are addressed by index";
}

TEST(ConfigInterpolation, WholeValueReferenceToAMappingCopiesIt) {
  const std::string text = "job:\n  name: demo\n"
                           "tpu:\n  accelerator: v4-8\n  zone: us-central2-b\n  metadata: {owner: me, team: tpu}\n"
                           "  labels: ${tpu.metadata}\n"
                           "command:\n  cmd: echo\n";
  const auto c = parse_one(text);
  EXPECT_EQ(c.tpu.labels, (std::map<std::string, std::string>{{"owner", "me"}, {"team", "tpu"}}));
}

TEST(ConfigInterpolation, WholeValueReferenceToNullGivesNull) {
  const auto c = parse_one("job:\n  name: demo\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                           "  startup_script: ${vars.script}\ncommand:\n  cmd: echo\nvars:\n  script: null\n");
  EXPECT_EQ(c.tpu.startup_script, std::nullopt);
}

TEST(ConfigInterpolation, DefaultsCanBeReferenced) {
  const std::string text = "job:\n  name: demo\ntpu:\n  accelerator: v6e-4\n"
                           "command:\n  cmd: echo ${tpu.name} ${tpu.zone} ${tpu.version} ${job.env_type}\n";
  LoadOptions options;
  options.default_zone = "us-east1-d";
  const auto c = parse_one(text, options);
  EXPECT_EQ(c.command.cmd, "echo demo us-east1-d v2-alpha-tpuv6e none");
}

TEST(ConfigInterpolation, MissingReferenceSuggestsTheClosestKey) {
  EXPECT_NE(error_of(config_with("'echo ${tpu.acelerator}'"))
                .find("interp.yaml:7:8: command.cmd: unresolved reference ${tpu.acelerator}: tpu has no key "
                      "'acelerator' (did you mean 'accelerator'?)"),
            std::string::npos)
      << error_of(config_with("'echo ${tpu.acelerator}'"));
  EXPECT_NE(error_of(config_with("'echo ${tpuu.zone}'")).find("no section 'tpuu' (did you mean 'tpu'?)"),
            std::string::npos);
  EXPECT_NE(error_of(config_with("'${job.name.first}'")).find("job.name is a single value, not a mapping"),
            std::string::npos);
}

TEST(ConfigInterpolation, ReferenceThroughANullSectionIsAnError) {
  const std::string message = error_of(config_with("'echo ${gcsfuse.bucket_name}'", "gcsfuse: null\n"));
  EXPECT_NE(message.find("unresolved reference ${gcsfuse.bucket_name}: gcsfuse is null"), std::string::npos) << message;
}

TEST(ConfigInterpolation, CyclesAreReportedOnceWithTheWholeChain) {
  const std::string text = "job:\n  name: ${tpu.name}\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                           "  name: ${job.name}\ncommand:\n  cmd: echo ${job.name} ${tpu.name}\n";
  const std::string message = error_of(text);
  EXPECT_NE(message.find("interp.yaml:2:9: job.name: cyclic reference: job.name -> tpu.name -> job.name"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one cycle, one message:\n" << message;
}

TEST(ConfigInterpolation, DefaultTpuNameTakesPartInCycles) {
  const std::string text = "job:\n  name: x-${tpu.name}\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                           "command:\n  cmd: echo\n";
  EXPECT_NE(error_of(text).find("cyclic reference: job.name -> tpu.name -> job.name"), std::string::npos);
}

TEST(ConfigInterpolation, SelfReferenceIsACycle) {
  EXPECT_NE(error_of(config_with("'${command.cmd}'")).find("cyclic reference: command.cmd -> command.cmd"),
            std::string::npos);
}

TEST(ConfigInterpolation, EnvironmentVariablesResolveWithAndWithoutDefault) {
  ::setenv("JOBMAN_TEST_INTERP_VALUE", "from-env", 1);
  ::unsetenv("JOBMAN_TEST_INTERP_UNSET");
  const auto c = parse_one(
      config_with("'${oc.env:JOBMAN_TEST_INTERP_VALUE} ${oc.env:JOBMAN_TEST_INTERP_UNSET,fallback} "
                  "${oc.env:JOBMAN_TEST_INTERP_UNSET, \"quoted default\"} ${oc.env:JOBMAN_TEST_INTERP_VALUE,unused}'"));
  EXPECT_EQ(c.command.cmd, "from-env fallback quoted default from-env");
  const std::string message = error_of(config_with("'${oc.env:JOBMAN_TEST_INTERP_UNSET}'"));
  EXPECT_NE(message.find("${oc.env:JOBMAN_TEST_INTERP_UNSET}: environment variable JOBMAN_TEST_INTERP_UNSET is not "
                         "set (set it, or give a default: ${oc.env:JOBMAN_TEST_INTERP_UNSET,default})"),
            std::string::npos)
      << message;
  ::unsetenv("JOBMAN_TEST_INTERP_VALUE");
}

TEST(ConfigInterpolation, TheSnapshotKeepsEnvironmentCallsWhereValuesPassToTheWorkers) {
  ::setenv("JOBMAN_TEST_INTERP_SECRET", "s3cr3t-value", 1);
  ::setenv("JOBMAN_TEST_INTERP_ZONE", "us-central2-b", 1);
  ::unsetenv("JOBMAN_TEST_INTERP_UNSET");
  const std::string text =
      "job:\n  name: demo\n  env_type: docker\ntpu:\n  accelerator: v4-8\n  zone: ${oc.env:JOBMAN_TEST_INTERP_ZONE}\n"
      "  metadata:\n    token: ${vars.token}\ndocker:\n  image: img\n"
      "  env_vars: ['KEY=${oc.env:JOBMAN_TEST_INTERP_SECRET}']\n"
      "command:\n  cmd: 'export K=${oc.env:JOBMAN_TEST_INTERP_SECRET} D=${oc.env:JOBMAN_TEST_INTERP_UNSET,dflt} "
      "L=$${oc.env:JOBMAN_TEST_INTERP_SECRET} N=${job.name}'\n"
      "vars:\n  token: ${oc.env:JOBMAN_TEST_INTERP_SECRET}\n";
  const auto c = parse_one(text);
  // In memory, for this process, every call is resolved.
  EXPECT_EQ(c.command.cmd, "export K=s3cr3t-value D=dflt L=${oc.env:JOBMAN_TEST_INTERP_SECRET} N=demo");
  EXPECT_EQ(c.docker->env_vars, std::vector<std::string>{"KEY=s3cr3t-value"});
  EXPECT_EQ(c.tpu.metadata.at("token"), "s3cr3t-value");
  // The snapshot holds the calls instead, except where jobman itself uses the value (the zone).
  EXPECT_EQ(c.resolved_yaml.find("s3cr3t-value"), std::string::npos) << c.resolved_yaml;
  EXPECT_NE(c.resolved_yaml.find("zone: us-central2-b"), std::string::npos) << c.resolved_yaml;
  EXPECT_EQ(c.environment, (std::map<std::string, std::string>{{"JOBMAN_TEST_INTERP_SECRET", "s3cr3t-value"}}));

  // Read back as a recorded config, the calls get their values at launch; the escaped text stays literal.
  LoadOptions recorded;
  recorded.recorded = true;
  auto back = parse_one(c.resolved_yaml, recorded);
  EXPECT_EQ(back.tpu.zone, "us-central2-b");
  EXPECT_EQ(back.command.cmd.find("s3cr3t-value"), std::string::npos);
  ::unsetenv("JOBMAN_TEST_INTERP_SECRET");
  auto missing = back;
  EXPECT_EQ(expand_environment(missing, [](const std::string&) { return std::nullopt; }),
            std::vector<std::string>{"JOBMAN_TEST_INTERP_SECRET"});
  EXPECT_EQ(missing.command.cmd, "export K=${oc.env:JOBMAN_TEST_INTERP_SECRET} D=dflt "
                                 "L=${oc.env:JOBMAN_TEST_INTERP_SECRET} N=demo");
  EXPECT_TRUE(expand_environment(back, [&](const std::string& name) -> std::optional<std::string> {
                return c.environment.contains(name) ? std::optional(c.environment.at(name)) : std::nullopt;
              }).empty());
  EXPECT_EQ(back.command.cmd, c.command.cmd);
  EXPECT_EQ(back.docker->env_vars, c.docker->env_vars);
  EXPECT_EQ(back.tpu.metadata, c.tpu.metadata);
  // A recorded config read again snapshots the same text.
  EXPECT_EQ(parse_one(c.resolved_yaml, recorded).resolved_yaml, c.resolved_yaml);
  ::unsetenv("JOBMAN_TEST_INTERP_ZONE");
}

TEST(ConfigInterpolation, UnknownResolversAreErrors) {
  EXPECT_NE(error_of(config_with("'${oc.decode:job.name}'")).find("unsupported resolver 'oc.decode'"),
            std::string::npos);
}

TEST(ConfigInterpolation, TheFormsOmegaConfResolvesAreResolvedTheSameWay) {
  ::setenv("JOBMAN_TEST_INTERP_VALUE", "from-env", 1);
  ::unsetenv("JOBMAN_TEST_INTERP_UNSET");
  // \${ is OmegaConf's escape: the shell gets ${HOME}; \\${x} is a backslash and x's value.
  EXPECT_EQ(parse_one(config_with("'echo \\${HOME} \\${tpu.zone} \\\\${job.name}'")).command.cmd,
            "echo ${HOME} ${tpu.zone} \\demo");
  // A call's default may hold a reference.
  EXPECT_EQ(parse_one(config_with("'${oc.env:JOBMAN_TEST_INTERP_UNSET,${tpu.zone}}/"
                                  "${oc.env:JOBMAN_TEST_INTERP_VALUE,${tpu.zone}}'"))
                .command.cmd,
            "us-central2-b/from-env");
  // ${.key} is a key beside the value, ${..key} one in the mapping above.
  const auto relative = parse_one("job:\n  name: demo\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                                  "  name: ${.accelerator}-${..job.name}\ncommand:\n  cmd: echo ${..tpu.zone}\n");
  EXPECT_EQ(relative.tpu.name, "v4-8-demo");
  EXPECT_EQ(relative.command.cmd, "echo us-central2-b");
  // ${oc.select:key,default}: the key's value when there is one.
  EXPECT_EQ(parse_one(config_with("'${oc.select:job.name,x} ${oc.select:vars.missing,fallback} "
                                  "${oc.select:vars.missing,${tpu.zone}} [${oc.select:vars.missing}]'"))
                .command.cmd,
            "demo fallback us-central2-b []");
  ::unsetenv("JOBMAN_TEST_INTERP_VALUE");
}

TEST(ConfigInterpolation, YamlMergeKeysMergeAsPyYamlMergesThem) {
  const auto c = parse_one("x-common: &common\n  image: base:1\n  workdir: /w\nx-more: &more\n  workdir: /other\n"
                           "  mount_dirs: [/d]\njob:\n  name: demo\n  env_type: docker\ntpu:\n  accelerator: v4-8\n"
                           "  zone: us-central2-b\ndocker:\n  <<: [*common, *more]\n  image: mine:2\n"
                           "command:\n  cmd: echo\n");
  ASSERT_TRUE(c.docker.has_value());
  EXPECT_EQ(c.docker->image, "mine:2");
  EXPECT_EQ(c.docker->workdir, "/w");
  EXPECT_EQ(c.docker->mount_dirs, std::vector<std::string>{"/d"});
  EXPECT_NE(error_of(config_with("echo", "docker:\n  <<: 3\n")).find("a merge key (<<) takes a mapping"),
            std::string::npos);
}

TEST(ConfigInterpolation, ListsCannotBeEmbeddedInText) {
  const std::string text = "job:\n  name: demo\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n  tags: [a, b]\n"
                           "command:\n  cmd: echo tags ${tpu.tags}\n";
  EXPECT_NE(error_of(text).find("command.cmd: cannot put ${tpu.tags} inside text: it is a list"), std::string::npos)
      << error_of(text);
}

TEST(ConfigInterpolation, ResolvedValuesAreValidatedWhereTheyAreUsed) {
  const std::string text = "job:\n  name: demo\ntpu:\n  accelerator: ${vars.acc}\n  zone: us-central2-b\n"
                           "command:\n  cmd: echo\nvars:\n  acc: v4-9\n";
  const std::string message = error_of(text);
  EXPECT_NE(message.find("interp.yaml:4:16: tpu.accelerator: 'v4-9' is not a valid v4 size"), std::string::npos)
      << message;
}

TEST(ConfigInterpolation, FailedReferencesDoNotCascade) {
  const std::string text = "job:\n  name: demo\ntpu:\n  accelerator: ${vars.nope}\n  zone: us-central2-b\n"
                           "command:\n  cmd: echo\n  workers: [0, 1]\n";
  const std::string message = error_of(text);
  EXPECT_NE(message.find("unresolved reference ${vars.nope}"), std::string::npos);
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

} // namespace config_interpolation_test
} // namespace jobman::config
