// What a loaded config holds: defaults, keys the Python jobman ignored, secrets, warnings, JSON and YAML output.
#include "jobman/config/loader.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <filesystem>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace jobman::config {
namespace config_model_test {

std::string minimal() {
  return "job:\n  name: demo\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
         "command:\n  cmd: echo hi\n";
}

JobConfig parse_one(const std::string& text, const LoadOptions& options = {}) {
  auto configs = parse_job_configs(text, "model.yaml", options);
  EXPECT_EQ(configs.size(), 1u);
  return configs.front();
}

std::string error_of(const std::string& text, const LoadOptions& options = {}) {
  try {
    parse_job_configs(text, "model.yaml", options);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// The error of `text` read as the file `display_name` (whose directory relative paths are found from).
std::string error_of(const std::string& text, const std::string& display_name) {
  try {
    parse_job_configs(text, display_name);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

const ConfigWarning* find_warning(const JobConfig& c, const std::string& key_path) {
  const auto it = std::find_if(c.warnings.begin(), c.warnings.end(),
                               [&](const ConfigWarning& w) { return w.where.key_path == key_path; });
  return it == c.warnings.end() ? nullptr : &*it;
}

TEST(ConfigModel, DefaultsAreFilledIn) {
  const auto c = parse_one(minimal());
  EXPECT_EQ(c.job.env_type, EnvType::none);
  EXPECT_TRUE(c.job.loop);
  EXPECT_EQ(c.tpu.name, "demo");
  EXPECT_EQ(c.tpu.version, "tpu-ubuntu2204-base");
  EXPECT_EQ(c.tpu.pricing, Pricing::spot);
  EXPECT_EQ(c.tpu.allocation_mode, AllocationMode::queued_resources);
  EXPECT_EQ(c.tpu.queue_timeout_seconds, std::nullopt);
  EXPECT_FALSE(c.tpu.keep_on_success);
  EXPECT_TRUE(c.command.workers.all);
  EXPECT_EQ(c.recovery.max_preemptions, std::nullopt);
  EXPECT_EQ(c.recovery.max_failures, 0);
  EXPECT_EQ(c.recovery.restart_exit_codes, (std::vector<int>{42}));
  EXPECT_EQ(c.recovery.poll_interval_seconds, 30);
  EXPECT_EQ(c.recovery.backoff_initial_seconds, 10);
  EXPECT_EQ(c.recovery.backoff_max_seconds, 600);
  EXPECT_DOUBLE_EQ(c.recovery.backoff_multiplier, 2.0);
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_TRUE(c.sweep_point.empty());
  EXPECT_EQ(c.source_path, "");
}

TEST(ConfigModel, ZoneDefaultsToTheSettingsZone) {
  const std::string text = "job:\n  name: demo\ntpu:\n  accelerator: v5e-4\ncommand:\n  cmd: echo\n";
  LoadOptions options;
  options.default_zone = "us-west4-a";
  const auto c = parse_one(text, options);
  EXPECT_EQ(c.tpu.zone, "us-west4-a");
  EXPECT_EQ(c.tpu.accelerator.name, "v5litepod-4") << "the alias resolves to the API name";
  EXPECT_EQ(c.tpu.version, "v2-alpha-tpuv5-lite");
  EXPECT_EQ(error_of(text), "model.yaml:3:1: tpu.zone: required key is missing (set tpu.zone, or a default zone in "
                            "settings.yaml (zone:) or JOBMAN_ZONE)");
}

TEST(ConfigModel, RecoverySectionIsRead) {
  const auto c = parse_one(minimal() + "recovery:\n  max_preemptions: 5\n  max_failures: 2\n"
                                       "  restart_exit_codes: [42, 75]\n  poll_interval: 2m\n"
                                       "  backoff:\n    initial: 1s\n    max: 1h30m\n    multiplier: 1.5\n");
  EXPECT_EQ(c.recovery.max_preemptions, 5);
  EXPECT_EQ(c.recovery.max_failures, 2);
  EXPECT_EQ(c.recovery.restart_exit_codes, (std::vector<int>{42, 75}));
  EXPECT_EQ(c.recovery.poll_interval_seconds, 120);
  EXPECT_EQ(c.recovery.backoff_initial_seconds, 1);
  EXPECT_EQ(c.recovery.backoff_max_seconds, 5400);
  EXPECT_DOUBLE_EQ(c.recovery.backoff_multiplier, 1.5);
  EXPECT_NE(c.resolved_yaml.find("max: 1h30m\n"), std::string::npos) << c.resolved_yaml;
  EXPECT_EQ(parse_one(minimal() + "recovery:\n  poll_interval: 45\n").recovery.poll_interval_seconds, 45);
}

TEST(ConfigModel, BadHardwareKeysSurviveTheSnapshot) {
  const auto c =
      parse_one(minimal() + "recovery:\n  max_bad_hardware: 5\n  bad_hardware: [default, 'XID [0-9]+: ${vars.x}']\n"
                            "vars:\n  x: fatal\n");
  EXPECT_EQ(c.recovery.max_bad_hardware, 5);
  EXPECT_EQ(c.recovery.bad_hardware, (std::vector<std::string>{"default", "XID [0-9]+: fatal"}));
  const auto again = parse_one(c.resolved_yaml);
  EXPECT_EQ(again.recovery.max_bad_hardware, 5);
  EXPECT_EQ(again.recovery.bad_hardware, c.recovery.bad_hardware);
  EXPECT_EQ(parse_one(minimal()).recovery.bad_hardware, (std::vector<std::string>{"default"}));
  const auto preflight = parse_one(
      "job:\n  name: d\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n  preflight: systolic-train --selftest\n"
      "command:\n  cmd: echo\n");
  EXPECT_EQ(preflight.tpu.preflight, "systolic-train --selftest");
  EXPECT_EQ(parse_one(preflight.resolved_yaml).tpu.preflight, "systolic-train --selftest");
}

TEST(ConfigModel, LoopFalseMeansNoPreemptionBudgetUnlessGivenExplicitly) {
  const std::string no_loop = "job:\n  name: demo\n  loop: false\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                              "command:\n  cmd: echo\n";
  EXPECT_EQ(parse_one(no_loop).recovery.max_preemptions, 0);
  EXPECT_EQ(parse_one(no_loop + "recovery:\n  max_preemptions: 3\n").recovery.max_preemptions, 3);
  EXPECT_EQ(parse_one(no_loop + "recovery:\n  max_preemptions: unlimited\n").recovery.max_preemptions, std::nullopt);
  EXPECT_EQ(parse_one(no_loop + "recovery:\n  max_preemptions: null\n").recovery.max_preemptions, std::nullopt);
  const auto c = parse_one(no_loop + "recovery:\n  max_preemptions: unlimited\n");
  EXPECT_EQ(parse_one(c.resolved_yaml).recovery.max_preemptions, std::nullopt) << "the explicit value survives";
}

TEST(ConfigModel, TpuKeysOfJobmanAreRead) {
  const auto c = parse_one("job:\n  name: demo\ntpu:\n  accelerator: v5p-16\n  zone: us-east5-a\n"
                           "  queue_timeout: 1h\n  network: net\n  subnetwork: sub\n"
                           "  service_account: sa@p.iam.gserviceaccount.com\n  reservation: res-1\n"
                           "  labels: {team: research, cost-center: ml_42}\n  keep_on_success: yes\n"
                           "  startup_script: |\n    #!/bin/bash\n    echo start\n"
                           "command:\n  cmd: echo\n  workers: [1, 0]\n");
  EXPECT_EQ(c.tpu.queue_timeout_seconds, 3600);
  EXPECT_EQ(c.tpu.network, "net");
  EXPECT_EQ(c.tpu.subnetwork, "sub");
  EXPECT_EQ(c.tpu.service_account, "sa@p.iam.gserviceaccount.com");
  EXPECT_EQ(c.tpu.reservation, "res-1");
  EXPECT_EQ(c.tpu.labels.at("cost-center"), "ml_42");
  EXPECT_TRUE(c.tpu.keep_on_success);
  EXPECT_EQ(c.tpu.startup_script, "#!/bin/bash\necho start\n");
  EXPECT_EQ(c.tpu.version, "v2-alpha-tpuv5");
  EXPECT_EQ(c.command.workers.indices, (std::vector<int>{0, 1})) << "indices are sorted";
  EXPECT_EQ(c.command.workers.to_gcloud(), "0,1");
}

TEST(ConfigModel, GcloudFlagsWithAnApiEquivalentMoveIntoTheModel) {
  const auto c = parse_one("job:\n  name: demo\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                           "  tags: [base]\n"
                           "  flags:\n    - --network=vpc\n    - --subnetwork sub\n    - --service-account\n"
                           "    - sa@x.iam.gserviceaccount.com\n    - --reserved\n    - --internal-ips\n"
                           "    - --tags=a,b\n    - --labels=team=ml,env=dev\n    - --metadata=owner=me\n"
                           "    - --reservation=r1\n    - --boot-disk-size=200\n    - --spot\n"
                           "command:\n  cmd: echo\n");
  EXPECT_EQ(c.tpu.network, "vpc");
  EXPECT_EQ(c.tpu.subnetwork, "sub");
  EXPECT_EQ(c.tpu.service_account, "sa@x.iam.gserviceaccount.com");
  EXPECT_TRUE(c.tpu.reserved);
  EXPECT_TRUE(c.tpu.internal_ips);
  EXPECT_EQ(c.tpu.reservation, "r1");
  EXPECT_EQ(c.tpu.tags, (std::vector<std::string>{"base", "a", "b"}));
  EXPECT_EQ(c.tpu.labels, (std::map<std::string, std::string>{{"env", "dev"}, {"team", "ml"}}));
  EXPECT_EQ(c.tpu.metadata.at("owner"), "me");
  EXPECT_EQ(c.tpu.flags, (std::vector<std::string>{"--boot-disk-size=200", "--spot"}));
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0].where.key_path, "tpu.flags");
  EXPECT_EQ(c.warnings[0].where.line, 8) << "the list of flags starts on line 8";
  EXPECT_NE(c.warnings[0].message.find("--boot-disk-size=200, --spot"), std::string::npos) << c.warnings[0].message;
  // The snapshot holds the mapped values as keys and only the rest as flags.
  const auto again = parse_one(c.resolved_yaml);
  EXPECT_EQ(to_json(again), to_json(c));
  EXPECT_EQ(again.warnings.size(), 1u);
}

TEST(ConfigModel, EmptyFlagsNeedNoWarning) {
  const auto c = parse_one("job:\n  name: demo\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n  flags: []\n"
                           "command:\n  cmd: echo\n");
  EXPECT_TRUE(c.warnings.empty());
}

TEST(ConfigModel, EmailApiKeyIsNeverInTheSnapshot) {
  const std::string text = minimal() + "brevo_email:\n  api_key: xkeysib-secret-123\n  sender: a@b.c\n"
                                       "  receiver: me@b.c\n";
  const auto c = parse_one(text);
  ASSERT_TRUE(c.email);
  EXPECT_EQ(c.email->api_key, "xkeysib-secret-123");
  EXPECT_TRUE(c.email->enabled());
  EXPECT_EQ(c.resolved_yaml.find("xkeysib-secret-123"), std::string::npos);
  EXPECT_NE(c.resolved_yaml.find("api_key: \"<redacted>\""), std::string::npos) << c.resolved_yaml;
  EXPECT_EQ(to_json(c).find("xkeysib-secret-123"), std::string::npos);
  EXPECT_EQ(find_warning(c, "brevo_email"), nullptr) << "the mail is sent (notify layer): nothing to warn of";
  EXPECT_TRUE(c.warnings.empty());
}

TEST(ConfigModel, EmailApiKeyFromTheEnvironmentKeepsItsReference) {
  ::setenv("JOBMAN_TEST_BREVO_KEY", "xkeysib-from-env", 1);
  const auto c = parse_one(minimal() + "brevo_email:\n  api_key: ${oc.env:JOBMAN_TEST_BREVO_KEY}\n  receiver: a@b.c\n");
  EXPECT_EQ(c.email->api_key, "xkeysib-from-env");
  EXPECT_EQ(c.resolved_yaml.find("xkeysib-from-env"), std::string::npos);
  EXPECT_NE(c.resolved_yaml.find("api_key: \"${oc.env:JOBMAN_TEST_BREVO_KEY}\""), std::string::npos) << c.resolved_yaml;
  EXPECT_EQ(parse_one(c.resolved_yaml).email->api_key, "xkeysib-from-env");
  ::unsetenv("JOBMAN_TEST_BREVO_KEY");
}

TEST(ConfigModel, EmailSectionWithoutKeyIsQuiet) {
  const auto c = parse_one(minimal() + "brevo_email:\n  api_key: null\n  sender: null\n  receiver: null\n");
  ASSERT_TRUE(c.email);
  EXPECT_FALSE(c.email->enabled());
  EXPECT_TRUE(c.warnings.empty());
}

TEST(ConfigModel, ZoneOutsideTheCatalogIsAWarning) {
  const auto c = parse_one("job:\n  name: demo\ntpu:\n  accelerator: v4-8\n  zone: europe-west4-a\n"
                           "command:\n  cmd: echo\n");
  const ConfigWarning* w = find_warning(c, "tpu.zone");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->message, "v4 is not offered in europe-west4-a as far as jobman knows (known: us-central2-b)");
  EXPECT_EQ(w->where.line, 5);
  EXPECT_EQ(w->where.column, 9);
}

TEST(ConfigModel, RuntimeVersionOfAnotherGenerationIsAWarning) {
  const auto c = parse_one("job:\n  name: demo\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                           "  version: v2-alpha-tpuv6e\ncommand:\n  cmd: echo\n");
  const ConfigWarning* w = find_warning(c, "tpu.version");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->message,
            "runtime version 'v2-alpha-tpuv6e' is meant for v6e, not v4 (v4 usually runs tpu-ubuntu2204-base)");
}

TEST(ConfigModel, QueueTimeoutIsIgnoredForPlainTpuVms) {
  const auto c = parse_one("job:\n  name: demo\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                           "  allocation_mode: tpu-vm\n  queue_timeout: 10m\ncommand:\n  cmd: echo\n");
  EXPECT_EQ(c.tpu.allocation_mode, AllocationMode::tpu_vm);
  ASSERT_NE(find_warning(c, "tpu.queue_timeout"), nullptr);
}

TEST(ConfigModel, EnvironmentFilesAreRelativeToTheConfigAndCheckedOnlyWhenUsed) {
  test::TempDir dir;
  dir.write("envs/requirements.txt", "jax\n");
  const auto path = dir.write("job.yaml", "job:\n  name: demo\n  env_type: venv\n"
                                          "tpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                                          "venv:\n  name: train\n  requirements_file: envs/requirements.txt\n"
                                          "conda:\n  name: fms\n  config_file: missing.yaml\n"
                                          "command:\n  cmd: echo\n");
  const auto configs = load_job_configs(path.string());
  ASSERT_EQ(configs.size(), 1u);
  const auto& c = configs[0];
  EXPECT_EQ(c.venv->requirements_file, (dir.path() / "envs/requirements.txt").string());
  EXPECT_EQ(c.conda->config_file, (dir.path() / "missing.yaml").string());
  ASSERT_EQ(c.warnings.size(), 1u) << "only the unused conda section; its missing file is not checked";
  EXPECT_EQ(c.warnings[0].where.key_path, "conda");
}

// The Python jobman hands relative paths to scp unchanged, so they are relative to where its users run it (their
// repository's root: `jobman create configs/x.yaml` with `assets/...` paths). There first, then beside the config.
TEST(ConfigModel, RelativeFilesAreFoundFromTheWorkingDirectoryFirst) {
  test::TempDir dir;
  dir.write("assets/requirements.txt", "jax\n");
  dir.write("configs/assets/fms.yaml", "name: fms\n");
  dir.write("configs/job.yaml", "job:\n  name: demo\n  env_type: venv\n"
                                "tpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                                "venv:\n  name: train\n  requirements_file: assets/requirements.txt\n"
                                "conda:\n  name: fms\n  config_file: assets/fms.yaml\n"
                                "command:\n  cmd: echo\n");
  const auto before = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  const auto configs = load_job_configs("configs/job.yaml");
  std::filesystem::current_path(before);
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0].venv->requirements_file, (dir.path() / "assets/requirements.txt").string())
      << "from the working directory, as the Python jobman reads it";
  EXPECT_EQ(configs[0].conda->config_file, (dir.path() / "configs/assets/fms.yaml").string())
      << "not in the working directory: beside the config";
}

TEST(ConfigModel, MissingFileOfTheEnvironmentInUseIsAWarning) {
  test::TempDir dir;
  const auto path = dir.write("job.yaml", "job:\n  name: demo\n  env_type: conda\n"
                                          "tpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                                          "conda:\n  name: fms\n  config_file: env.yaml\n"
                                          "command:\n  cmd: echo\n");
  const auto c = load_job_configs(path.string()).front();
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0].where.key_path, "conda.config_file");
  EXPECT_EQ(c.warnings[0].message, "file not found: " + (dir.path() / "env.yaml").string());
  EXPECT_EQ(c.warnings[0].where.file, path.string());
  EXPECT_EQ(c.warnings[0].where.line, 9);
}

TEST(ConfigModel, JsonHasEverySectionInAStableOrder) {
  const auto c = parse_one(minimal() + "vars:\n  lr: 0.1\n");
  const auto j = nlohmann::ordered_json::parse(to_json(c));
  std::vector<std::string> keys;
  for (const auto& [key, value] : j.items()) {
    keys.push_back(key);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"job", "tpu", "gcsfuse", "ssh", "docker", "conda", "venv", "setup",
                                            "command", "recovery", "vars", "brevo_email", "notify"}));
  EXPECT_EQ(j["tpu"]["accelerator"], "v4-8");
  EXPECT_EQ(j["command"]["workers"], "all");
  EXPECT_EQ(j["recovery"]["max_failures"], 0);
  EXPECT_EQ(j["recovery"]["poll_interval"], "30s");
  EXPECT_EQ(j["vars"]["lr"], "0.1");
  EXPECT_TRUE(j["gcsfuse"].is_null());
  EXPECT_TRUE(j["setup"].is_null());
  EXPECT_EQ(to_json(c, -1).find('\n'), std::string::npos);
  EXPECT_EQ(to_json(c), to_json(parse_one(minimal() + "vars:\n  lr: 0.1\n"))) << "deterministic";
}

TEST(ConfigModel, ResolvedYamlRoundTripsAwkwardStrings) {
  const std::string text = "job:\n  name: demo\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                           "  metadata:\n    a: \"null\"\n    b: \"  spaced  \"\n    c: \"true\"\n    d: \"#hash\"\n"
                           "    e: \"tab\\there\"\n    f: \"é ü\"\n    g: \"\"\n    h: \"x: y\"\n"
                           "command:\n  cmd: \"  indented first line\\n\\ttab\\n\\n\\nkeep trailing\\n\\n\"\n"
                           "vars:\n  n: \"007\"\n  s: \"- dash\"\n";
  const auto c = parse_one(text);
  const auto again = parse_one(c.resolved_yaml);
  EXPECT_EQ(again.tpu.metadata, c.tpu.metadata);
  EXPECT_EQ(again.command.cmd, c.command.cmd);
  EXPECT_EQ(again.vars, c.vars);
  EXPECT_EQ(again.resolved_yaml, c.resolved_yaml);
  const auto no_newline = parse_one("job:\n  name: demo\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                                    "command:\n  cmd: |-\n    line one\n    line two\n");
  EXPECT_EQ(no_newline.command.cmd, "line one\nline two");
  EXPECT_EQ(parse_one(no_newline.resolved_yaml).command.cmd, "line one\nline two");
}

TEST(ConfigModel, UnusedEnvironmentSectionsAreNamedOnce) {
  const auto c = parse_one(minimal() + "docker:\n  image: python:3.11\n");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0].where.key_path, "docker");
  EXPECT_EQ(c.warnings[0].message, "section not used: job.env_type is none");
}

// The Python jobman builds an environment only when its section exists (`VENV(cfg) if cfg.venv is not None else
// None`), and runs the command bare otherwise: so does jobman, with one warning at job.env_type.
TEST(ConfigModel, AnEnvironmentWithoutItsSectionRunsTheCommandBareWithOneWarning) {
  for (const std::string& env : std::vector<std::string>{"venv", "conda", "docker"}) {
    for (const std::string& section : std::vector<std::string>{"", env + ": null\n"}) {
      std::string text = minimal();
      text.insert(text.find("tpu:"), "  env_type: " + env + "\n");
      const auto c = parse_one(text + section);
      EXPECT_EQ(c.job.env_type, EnvType::none) << env << " " << section;
      ASSERT_EQ(c.warnings.size(), 1u) << env << " " << section;
      EXPECT_EQ(c.warnings[0].where.key_path, "job.env_type");
      EXPECT_EQ(c.warnings[0].where.line, 3);
      EXPECT_NE(c.warnings[0].message.find("the config has no " + env +
                                           " section: the command runs without an "
                                           "environment"),
                std::string::npos)
          << c.warnings[0].message;
    }
  }
  // Another environment's section is still named as unused, against the env_type the config gave.
  std::string text = minimal();
  text.insert(text.find("tpu:"), "  env_type: venv\n");
  const auto c = parse_one(text + "conda:\n  name: fms\n");
  EXPECT_EQ(c.job.env_type, EnvType::none);
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_EQ(c.warnings[1].where.key_path, "conda");
  EXPECT_EQ(c.warnings[1].message, "section not used: job.env_type is venv");
  EXPECT_FALSE(c.conda && c.job.env_type == EnvType::conda);
}

// What the Python jobman reads the same way: unknown keys (ignored there), pricing by its two special words, numbers
// as flags.
TEST(ConfigModel, KeysAndValuesThePythonJobmanTakesAreTakenWithAWarning) {
  std::string text = minimal();
  text.insert(text.find("tpu:"), "  loop: 0\n  worker_num: 4\n  queue:\n    enabled: false\n");
  text.insert(text.find("command:"), "  pricing: on-demand\n  project: my-lab\n");
  const auto c = parse_one(text);
  EXPECT_FALSE(c.job.loop);
  EXPECT_EQ(c.tpu.pricing, Pricing::ondemand);
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_EQ(c.warnings[0].where.key_path, "job.worker_num");
  EXPECT_EQ(c.warnings[0].message, "unknown key, ignored as the Python jobman ignores it");
  EXPECT_EQ(c.warnings[1].where.key_path, "tpu.project");

  for (const std::string& value : std::vector<std::string>{"null", "Spot", "standard", "on_demand"}) {
    std::string priced = minimal();
    priced.insert(priced.find("command:"), "  pricing: " + value + "\n");
    const auto p = parse_one(priced);
    EXPECT_EQ(p.tpu.pricing, Pricing::ondemand) << value;
    EXPECT_EQ(p.warnings.size(), value == "null" || value == "Spot" ? 1u : 0u) << value;
  }
}

TEST(ConfigModel, ThePythonJobmansQueueModeIsRefusedNotRunAsTheCommand) {
  std::string text = minimal();
  text.insert(text.find("tpu:"), "  queue:\n    enabled: true\n    config: tasks.yaml\n");
  EXPECT_EQ(error_of(text), "model.yaml:4:14: job.queue.enabled: the Python jobman's queue mode (tasks from a queue "
                            "file instead of command.cmd) is not supported (set enabled: false, or remove job.queue, "
                            "to run command.cmd)");
}

// The Python jobman resolves ${...} lazily: a reference nothing reads cannot stop a job there, so it does not here.
TEST(ConfigModel, AReferenceThatCannotBeResolvedWhereNothingReadsItIsAWarning) {
  ::unsetenv("JOBMAN_TEST_UNSET_KEY");
  const auto c = parse_one(minimal() + "brevo_email:\n  api_key: ${oc.env:JOBMAN_TEST_UNSET_KEY}\n"
                                       "docker:\n  image: ${vars.image}\n");
  ASSERT_EQ(c.warnings.size(), 3u);
  EXPECT_EQ(c.warnings[0].where.key_path, "brevo_email.api_key");
  EXPECT_NE(c.warnings[0].message.find("(not used, so not needed)"), std::string::npos) << c.warnings[0].message;
  EXPECT_EQ(c.warnings[1].where.key_path, "docker");
  EXPECT_EQ(c.warnings[2].where.key_path, "docker.image");
  // Where the key is read, the reference must resolve.
  std::string used = minimal();
  used.insert(used.find("tpu:"), "  env_type: docker\n");
  EXPECT_NE(error_of(used + "docker:\n  image: ${vars.image}\n").find("docker.image"), std::string::npos);
}

TEST(ConfigModel, ProblemsInValuesThePythonJobmanNeverReadsAreWarningsAndTheValuesAreLeftOut) {
  std::string text = minimal() + "venv: maxtext\ndocker:\n  image: img\n  env_vars: {HOME: /x}\n";
  text.insert(text.find("  zone:"), "  tags: [jobman, Experiment]\n  metadata:\n    owner: null\n"
                                    "    startup-script: echo a\n  startup_script: echo b\n");
  const auto c = parse_one(text);
  EXPECT_TRUE(c.tpu.tags.empty());
  EXPECT_TRUE(c.tpu.metadata.empty());
  EXPECT_FALSE(c.tpu.startup_script.has_value());
  for (const char* key : {"tpu.tags[1]", "tpu.metadata.owner", "tpu.startup_script", "venv", "docker.env_vars"}) {
    const auto* warning = find_warning(c, key);
    ASSERT_NE(warning, nullptr) << key;
  }
  EXPECT_NE(find_warning(c, "tpu.tags[1]")->message.find("(tpu.tags is left out of the node)"), std::string::npos)
      << find_warning(c, "tpu.tags[1]")->message;
  // Valid tags and metadata are sent as before.
  std::string valid = minimal();
  valid.insert(valid.find("  zone:"), "  tags: [jobman]\n  metadata:\n    owner: me\n");
  const auto v = parse_one(valid);
  EXPECT_EQ(v.tpu.tags, std::vector<std::string>{"jobman"});
  EXPECT_EQ(v.tpu.metadata.at("owner"), "me");
  // The environment in use is read, so its problems stay errors.
  text.insert(text.find("tpu:"), "  env_type: docker\n");
  EXPECT_NE(error_of(text).find("docker.env_vars"), std::string::npos) << error_of(text);
}

TEST(ConfigModel, AnyOptionalSectionMayBeNull) {
  const auto c = parse_one(minimal() + "gcsfuse: null\nssh: null\ndocker: null\nconda: null\nvenv: null\n"
                                       "setup: null\nrecovery: null\nvars: null\nsweep: null\nbrevo_email: null\n");
  EXPECT_FALSE(c.gcsfuse || c.ssh || c.docker || c.conda || c.venv || c.setup || c.email);
  EXPECT_EQ(c.recovery.max_failures, 0);
}

// setup.script: the text, or the file a line of it names (relative to the config's directory), read when the config is
// loaded, so that the job keeps the text it was created with.
TEST(ConfigModel, SetupScriptIsItsTextOrTheTextOfTheFileItNames) {
  const auto text = parse_one(minimal() + "setup:\n  script: |\n    pip install -r requirements.txt\n    echo done\n");
  ASSERT_TRUE(text.setup);
  EXPECT_EQ(text.setup->script, "pip install -r requirements.txt\necho done\n");
  EXPECT_EQ(text.setup->file, "");
  EXPECT_FALSE(parse_one(minimal()).setup);
  // One line is a script of one line, ended with a newline, unless it names a file.
  EXPECT_EQ(parse_one(minimal() + "setup:\n  script: pip install jax\n").setup->script, "pip install jax\n");
  EXPECT_EQ(parse_one(minimal() + "setup:\n  script: bash ~/setup.sh\n").setup->script, "bash ~/setup.sh\n");

  test::TempDir dir;
  // A file's text is taken as it is: no ${...} in it is resolved.
  const std::string script = "#!/bin/bash\nset -e\necho \"${HOME} ${tpu.zone} \\${HOME} $${x}\"\nexit 0";
  dir.write("scripts/bootstrap.sh", script);
  const auto path = dir.write("job.yaml", minimal() + "setup:\n  script: scripts/bootstrap.sh\n");
  const auto configs = load_job_configs(path.string());
  ASSERT_EQ(configs.size(), 1u);
  const auto& c = configs[0];
  ASSERT_TRUE(c.setup);
  EXPECT_EQ(c.setup->script, script + "\n") << "a newline is added to a file that has none at its end";
  EXPECT_EQ(c.setup->file, (dir.path() / "scripts/bootstrap.sh").string());
  EXPECT_TRUE(c.warnings.empty());
  const auto j = nlohmann::json::parse(to_json(c));
  EXPECT_EQ(j["setup"]["script"], script + "\n");
  // From another working directory too: the path is the config's directory's, not the working directory's.
  dir.write("scripts/scripts/bootstrap.sh", "echo decoy\n");
  const auto before = std::filesystem::current_path();
  std::filesystem::current_path(dir.path() / "scripts");
  const auto elsewhere = load_job_configs(path.string());
  std::filesystem::current_path(before);
  ASSERT_EQ(elsewhere.size(), 1u);
  EXPECT_EQ(elsewhere[0].setup->file, (dir.path() / "scripts/bootstrap.sh").string());
  EXPECT_EQ(elsewhere[0].setup->script, script + "\n");
}

TEST(ConfigModel, SetupScriptFromAFixtureFileLoads) {
  const std::string path = JOBMAN_TEST_DATA_DIR "/configs/good/setup-script.yaml";
  const auto configs = load_job_configs(path);
  ASSERT_EQ(configs.size(), 1u);
  ASSERT_TRUE(configs[0].setup);
  EXPECT_EQ(configs[0].setup->file,
            std::filesystem::path(JOBMAN_TEST_DATA_DIR "/configs/good/setup-script.sh").lexically_normal().string());
  EXPECT_EQ(configs[0].setup->script,
            test::file_text(std::filesystem::path(JOBMAN_TEST_DATA_DIR "/configs/good/setup-script.sh")));
  EXPECT_TRUE(configs[0].warnings.empty());
}

// The snapshot holds the script's text, so the recorded config gives the same script whatever the file holds later.
TEST(ConfigModel, SetupScriptSurvivesTheResolvedYamlRoundTrip) {
  test::TempDir dir;
  const std::string script = "echo \"${HOME} ${tpu.zone} \\${HOME} \\\\${vars.x} $${x}\"\n./run.sh";
  dir.write("setup.sh", script);
  const auto path = dir.write("job.yaml", minimal() + "setup:\n  script: setup.sh\n");
  const auto c = load_job_configs(path.string()).front();
  ASSERT_TRUE(c.setup);
  dir.write("setup.sh", "echo changed since\n");
  LoadOptions recorded;
  recorded.recorded = true;
  for (const auto& options : {LoadOptions{}, recorded}) {
    const auto again = parse_one(c.resolved_yaml, options);
    ASSERT_TRUE(again.setup);
    EXPECT_EQ(again.setup->script, script + "\n");
    EXPECT_EQ(again.setup->file, "") << "the snapshot holds the text";
    EXPECT_EQ(again.resolved_yaml, c.resolved_yaml);
  }
  // Text written in the config round-trips too, a one-line script included.
  for (const std::string& value :
       {std::string("\"make setup\""), std::string("|\n    echo ${job.name}\n    ./x.sh\n")}) {
    const auto written = parse_one(minimal() + "setup:\n  script: " + value + "\n");
    ASSERT_TRUE(written.setup) << value;
    const auto again = parse_one(written.resolved_yaml);
    ASSERT_TRUE(again.setup) << value;
    EXPECT_EQ(again.setup->script, written.setup->script) << value;
  }
  EXPECT_EQ(parse_one(minimal() + "setup:\n  script: |\n    echo ${job.name}\n").setup->script, "echo demo\n");
}

// A secret read from the environment in a script written in the config stays out of the snapshot, as in the command;
// a script read from a file whose path came from the environment is the file's text.
TEST(ConfigModel, SetupScriptKeepsEnvironmentCallsOutOfTheSnapshot) {
  ::setenv("JOBMAN_TEST_SETUP_TOKEN", "hf-s3cr3t", 1);
  const auto c =
      parse_one(minimal() + "setup:\n  script: huggingface-cli login --token ${oc.env:JOBMAN_TEST_SETUP_TOKEN}\n");
  EXPECT_EQ(c.setup->script, "huggingface-cli login --token hf-s3cr3t\n");
  EXPECT_EQ(c.resolved_yaml.find("hf-s3cr3t"), std::string::npos) << c.resolved_yaml;
  EXPECT_EQ(c.environment.at("JOBMAN_TEST_SETUP_TOKEN"), "hf-s3cr3t");
  LoadOptions recorded;
  recorded.recorded = true;
  auto back = parse_one(c.resolved_yaml, recorded);
  EXPECT_TRUE(expand_environment(back, [&](const std::string& name) -> std::optional<std::string> {
                return c.environment.contains(name) ? std::optional(c.environment.at(name)) : std::nullopt;
              }).empty());
  EXPECT_EQ(back.setup->script, c.setup->script);
  ::unsetenv("JOBMAN_TEST_SETUP_TOKEN");

  test::TempDir dir;
  const auto file = dir.write("boot.sh", "echo booted\n");
  ::setenv("JOBMAN_TEST_SETUP_FILE", file.string().c_str(), 1);
  const auto from_file = parse_one(minimal() + "setup:\n  script: ${oc.env:JOBMAN_TEST_SETUP_FILE}\n");
  ::unsetenv("JOBMAN_TEST_SETUP_FILE");
  EXPECT_EQ(from_file.setup->script, "echo booted\n");
  EXPECT_EQ(from_file.setup->file, file.string());
  EXPECT_EQ(parse_one(from_file.resolved_yaml, recorded).setup->script, "echo booted\n");
}

TEST(ConfigModel, SetupScriptErrorsNameTheFileLineAndKey) {
  EXPECT_EQ(error_of(minimal() + "setup:\n  script: \"\"\n"), "model.yaml:9:11: setup.script: must not be empty");
  EXPECT_EQ(error_of(minimal() + "setup:\n  script: \"  \"\n"), "model.yaml:9:11: setup.script: must not be empty");
  EXPECT_EQ(error_of(minimal() + "setup:\n  script: null\n"), "model.yaml:9:11: setup.script: required value is null");
  EXPECT_EQ(error_of(minimal() + "setup: {}\n"), "model.yaml:8:1: setup.script: required key is missing (write the "
                                                 "script's text, or the path of a file that holds it)");
  // setup is jobman's own section: an unknown key is an error, and the only one.
  EXPECT_EQ(error_of(minimal() + "setup:\n  scripts: x.sh\n"),
            "model.yaml:9:3: setup.scripts: unknown key (did you mean 'script'?)");
  EXPECT_EQ(error_of(minimal() + "setup:\n  script: [a]\n"),
            "model.yaml:9:11: setup.script: expected a string, got a list");

  test::TempDir dir;
  const auto missing = dir.write("missing.yaml", minimal() + "setup:\n  script: scripts/setup.sh\n");
  EXPECT_EQ(error_of(test::file_text(missing), missing.string()),
            missing.string() + ":9:11: setup.script: file not found: " + (dir.path() / "scripts/setup.sh").string() +
                " (a path is relative to the config's directory; to run a script the workers already have, write a "
                "command such as 'bash scripts/setup.sh')");
  dir.write("empty.sh", "\n \n");
  const auto empty = dir.write("empty.yaml", minimal() + "setup:\n  script: empty.sh\n");
  EXPECT_EQ(error_of(test::file_text(empty), empty.string()),
            empty.string() + ":9:11: setup.script: the file " + (dir.path() / "empty.sh").string() + " is empty");
  dir.write("binary.sh", std::string("\x7f"
                                     "ELF\x02\x01\x01\0\0\xff\xfe",
                                     11));
  const auto binary = dir.write("binary.yaml", minimal() + "setup:\n  script: binary.sh\n");
  EXPECT_EQ(error_of(test::file_text(binary), binary.string()), binary.string() + ":9:11: setup.script: the file " +
                                                                    (dir.path() / "binary.sh").string() +
                                                                    " is not a text file");
  std::filesystem::create_directories(dir.path() / "a-directory.sh");
  const auto directory = dir.write("directory.yaml", minimal() + "setup:\n  script: a-directory.sh\n");
  EXPECT_EQ(error_of(test::file_text(directory), directory.string()),
            directory.string() + ":9:11: setup.script: " + (dir.path() / "a-directory.sh").string() +
                " is not a script file (a regular file of at most 1 MiB)");
  // A device would never end: it is refused, not read.
  EXPECT_EQ(error_of(minimal() + "setup:\n  script: /dev/zero\n"),
            "model.yaml:9:11: setup.script: /dev/zero is not a script file (a regular file of at most 1 MiB)");
}

TEST(ConfigModel, SetupScriptCanBeSetFromTheCommandLine) {
  LoadOptions options;
  options.set_overrides = {"setup.script=echo from --set"};
  const auto c = parse_one(minimal(), options);
  ASSERT_TRUE(c.setup);
  EXPECT_EQ(c.setup->script, "echo from --set\n");
}

} // namespace config_model_test
} // namespace jobman::config
