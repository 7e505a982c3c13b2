// Every malformed config in tests/data/configs/bad is rejected with the message its first line announces; every
// config in tests/data/configs/warn, which the Python jobman runs, loads with the warning its first line announces.
#include "jobman/config/loader.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

namespace jobman::config {
namespace config_bad_test {

std::filesystem::path bad_dir() {
  return JOBMAN_TEST_DATA_DIR "/configs/bad";
}

std::filesystem::path warn_dir() {
  return JOBMAN_TEST_DATA_DIR "/configs/warn";
}

std::vector<std::string> yaml_files(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".yaml") {
      out.push_back(entry.path().filename().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> bad_files() {
  return yaml_files(bad_dir());
}

// The text after `prefix` on the file's first line.
std::string expectation(const std::filesystem::path& path, const std::string& prefix = "# expect: ") {
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  return first.rfind(prefix, 0) == 0 ? first.substr(prefix.size()) : std::string();
}

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

class ConfigBadFile : public ::testing::TestWithParam<std::string> {};

TEST_P(ConfigBadFile, IsRejectedWithTheExpectedMessage) {
  const auto path = bad_dir() / GetParam();
  const std::string expected = expectation(path);
  ASSERT_FALSE(expected.empty()) << path << " has no '# expect: ' first line";
  // Messages name the file as given; load it from its directory so they say just the file name.
  const std::string text = file_text(path);
  try {
    parse_job_configs(text, GetParam());
    FAIL() << path << " loaded without error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << "expected: " << expected << "\nactual:\n"
                                                                       << e.what();
    EXPECT_EQ(e.code(), ExitCode::usage);
    EXPECT_FALSE(e.diagnostics().empty());
  }
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(0, info.param.size() - 5);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

class ConfigWarnFile : public ::testing::TestWithParam<std::string> {};

TEST_P(ConfigWarnFile, LoadsWithTheExpectedWarning) {
  const auto path = warn_dir() / GetParam();
  const std::string expected = expectation(path, "# expect-warning: ");
  ASSERT_FALSE(expected.empty()) << path << " has no '# expect-warning: ' first line";
  std::vector<JobConfig> configs;
  try {
    configs = parse_job_configs(file_text(path), GetParam());
  } catch (const ConfigError& e) {
    FAIL() << path << " was refused:\n" << e.what();
  }
  ASSERT_EQ(configs.size(), 1U);
  std::string all;
  for (const auto& w : configs[0].warnings) {
    all += w.where.file + ":" + std::to_string(w.where.line) + ":" + std::to_string(w.where.column) + ": " +
           w.where.key_path + ": " + w.message + "\n";
  }
  EXPECT_NE(all.find(expected), std::string::npos) << "expected: " << expected << "\nactual:\n" << all;
}

INSTANTIATE_TEST_SUITE_P(ConfigBadDirectory, ConfigBadFile, ::testing::ValuesIn(bad_files()), test_name);

INSTANTIATE_TEST_SUITE_P(ConfigWarnDirectory, ConfigWarnFile, ::testing::ValuesIn(yaml_files(warn_dir())), test_name);

TEST(ConfigBadFiles, DirectoryHoldsAtLeastThirtyCases) {
  EXPECT_GE(bad_files().size(), 30u);
}

TEST(ConfigBadFiles, LoadingFromDiskNamesThePathAsGiven) {
  const std::string path = (bad_dir() / "bad-unknown-key-recovery.yaml").string();
  try {
    load_job_configs(path);
    FAIL() << "loaded";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  path + ":10:3: recovery.max_preemption: unknown key (did you mean 'max_preemptions'?)"),
              std::string::npos)
        << e.what();
    const auto& d = e.diagnostics();
    const auto it = std::find_if(d.begin(), d.end(), [](const Diagnostic& x) { return x.where.line == 10; });
    ASSERT_NE(it, d.end());
    EXPECT_EQ(it->where.column, 3);
    EXPECT_EQ(it->where.key_path, "recovery.max_preemption");
    EXPECT_EQ(it->hint, "did you mean 'max_preemptions'?");
  }
}

TEST(ConfigBadFiles, AllProblemsAreReportedInDocumentOrder) {
  const std::string text = "job:\n"
                           "  name: x\n"
                           "  env_type: podman\n"
                           "tpu:\n"
                           "  accelerator: v4-7\n"
                           "  zone: us-central2-b\n"
                           "  allocation_mode: cheap\n"
                           "command:\n"
                           "  cmd: echo ${tpu.nope}\n"
                           "recovery:\n"
                           "  max_failures: -1\n";
  try {
    parse_job_configs(text, "many.yaml");
    FAIL() << "loaded";
  } catch (const ConfigError& e) {
    const auto& d = e.diagnostics();
    ASSERT_EQ(d.size(), 5u) << e.what();
    std::vector<int> lines;
    lines.reserve(d.size());
    for (const auto& x : d) {
      lines.push_back(x.where.line);
    }
    EXPECT_EQ(lines, (std::vector<int>{3, 5, 7, 9, 11}));
  }
}

// A misspelled required section is the error, at its own line with the section it misses, in place of "required
// section is missing" with no line; an unknown section that is close to no missing one stays a warning.
TEST(ConfigBadFiles, AMisspelledRequiredSectionIsNamedAtItsLineInsteadOfTheMissingOne) {
  const std::string text = "jbo:\n"
                           "  name: x\n"
                           "tpuu:\n"
                           "  accelerator: v4-8\n"
                           "  zone: us-central2-b\n"
                           "comand:\n"
                           "  cmd: echo hi\n"
                           "wandb:\n"
                           "  project: x\n";
  try {
    parse_job_configs(text, "typo.yaml");
    FAIL() << "loaded";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    std::vector<std::string> all;
    for (const auto& d : e.diagnostics()) {
      all.push_back(d.format());
    }
    EXPECT_EQ(all, (std::vector<std::string>{"typo.yaml:1:1: jbo: unknown section (did you mean 'job'?)",
                                             "typo.yaml:3:1: tpuu: unknown section (did you mean 'tpu'?)",
                                             "typo.yaml:6:1: comand: unknown section (did you mean 'command'?)"}))
        << e.what();
  }
  // Nothing close to the missing section: it is reported missing, and the unknown one stays a warning.
  try {
    parse_job_configs("job:\n  name: x\ncommand:\n  cmd: echo hi\nwandb:\n  project: x\n", "missing.yaml");
    FAIL() << "loaded";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.diagnostics().size(), 1U) << e.what();
    EXPECT_EQ(e.diagnostics()[0].format(), "missing.yaml: tpu: required section is missing");
  }
}

TEST(ConfigBadFiles, MissingFileIsAnIoErrorNotAConfigError) {
  try {
    load_job_configs("/nonexistent/jobman/config.yaml");
    FAIL() << "loaded";
  } catch (const ConfigError&) {
    FAIL() << "a missing file is not a config problem";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/jobman/config.yaml"), std::string::npos);
  }
}

} // namespace config_bad_test
} // namespace jobman::config
