// Per-user settings: the settings file, JOBMAN_* variables, origins and bad values.
#include "jobman/config/settings.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"
#include "support/temp_dir.hpp"

#include <array>
#include <cstdlib>
#include <gtest/gtest.h>
#include <map>
#include <optional>

namespace jobman::config {
namespace settings_test {

constexpr std::array<const char*, 13> variables{
    "XDG_CONFIG_HOME",  "JOBMAN_CLOUD",          "JOBMAN_PROJECT",      "JOBMAN_ZONE",
    "JOBMAN_GCLOUD",    "JOBMAN_POLL_INTERVAL",  "JOBMAN_API_ENDPOINT", "JOBMAN_MOCK_TIME_SCALE",
    "JOBMAN_AUTOSTART", "JOBMAN_BREVO_ENDPOINT", "JOBMAN_STORE",        "JOBMAN_HOME",
    "JOBMAN_TRANSPORT"};

// Points XDG_CONFIG_HOME at a fresh directory and clears JOBMAN_*; restores everything afterwards.
class SettingsLoad : public ::testing::Test {
protected:
  void SetUp() override {
    for (const auto& name : variables) {
      const char* value = std::getenv(name);
      saved_[name] = value == nullptr ? std::nullopt : std::optional<std::string>(value);
      ::unsetenv(name);
    }
    ::setenv("XDG_CONFIG_HOME", dir_.path().c_str(), 1);
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  std::string write_settings(const std::string& text) { return dir_.write("jobman/settings.yaml", text).string(); }
  static std::string origin_of(const config::Settings& s, const std::string& key) {
    for (const auto& source : s.sources) {
      if (source.key == key) {
        return source.origin;
      }
    }
    return "(none)";
  }
  static std::string error_of() {
    try {
      load_settings();
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  }

  test::TempDir dir_;

private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST_F(SettingsLoad, PathFollowsXdgConfigHome) {
  EXPECT_EQ(settings_path(), (dir_.path() / "jobman" / "settings.yaml").string());
}

TEST_F(SettingsLoad, MissingFileGivesDefaults) {
  const auto s = load_settings();
  EXPECT_EQ(s.cloud, CloudKind::mock);
  EXPECT_EQ(s.project, "");
  EXPECT_EQ(s.zone, "");
  EXPECT_EQ(s.gcloud, "gcloud");
  EXPECT_EQ(s.poll_interval_seconds, 30);
  EXPECT_EQ(s.api_endpoint, "");
  EXPECT_EQ(s.mock_time_scale, 60);
  EXPECT_TRUE(s.autostart);
  EXPECT_EQ(s.transport, Transport::ssh);
  ASSERT_EQ(s.sources.size(), 12u);
  std::vector<std::string> keys;
  for (const auto& source : s.sources) {
    keys.push_back(source.key);
    EXPECT_TRUE(source.origin.starts_with("default")) << source.key << ": " << source.origin;
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"cloud", "project", "zone", "gcloud", "transport", "poll_interval",
                                            "api_endpoint", "mock_time_scale", "autostart", "strict_locality",
                                            "brevo_endpoint", "store"}));
  EXPECT_EQ(s.sources[0].value, "mock");
  EXPECT_EQ(s.sources[4].value, "ssh");
  EXPECT_EQ(s.sources[5].value, "30s");
}

TEST_F(SettingsLoad, FileValuesAreReadWithTheirLines) {
  const auto path = write_settings("# my settings\nproject: my-proj\nzone: us-central2-b\ngcloud: /opt/gcloud\n"
                                   "poll_interval: 2m\napi_endpoint: http://127.0.0.1:8080\n");
  const auto s = load_settings();
  EXPECT_EQ(s.project, "my-proj");
  EXPECT_EQ(s.cloud, CloudKind::google) << "a project means Google Cloud";
  EXPECT_EQ(s.zone, "us-central2-b");
  EXPECT_EQ(s.gcloud, "/opt/gcloud");
  EXPECT_EQ(s.poll_interval_seconds, 120);
  EXPECT_EQ(s.api_endpoint, "http://127.0.0.1:8080");
  EXPECT_EQ(origin_of(s, "project"), path + ":2");
  EXPECT_EQ(origin_of(s, "api_endpoint"), path + ":6");
  EXPECT_EQ(origin_of(s, "cloud"), "default (a project is set)");
  EXPECT_EQ(s.sources[0].value, "google");
  EXPECT_EQ(s.sources[5].value, "2m");
}

TEST_F(SettingsLoad, TransportIsSshOrGcloud) {
  const auto path = write_settings("transport: ssh\n");
  EXPECT_EQ(load_settings().transport, Transport::ssh);
  EXPECT_EQ(origin_of(load_settings(), "transport"), path + ":1");
  ::setenv("JOBMAN_TRANSPORT", "gcloud", 1);
  EXPECT_EQ(load_settings().transport, Transport::gcloud);
  ::setenv("JOBMAN_TRANSPORT", "scp", 1);
  try {
    load_settings();
    ADD_FAILURE() << "transport scp was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'scp' is not one of ssh, gcloud"), std::string::npos) << e.what();
  }
}

TEST_F(SettingsLoad, MockTimeScaleIsANumberFromOneUp) {
  const auto path = write_settings("mock_time_scale: 2.5\n");
  EXPECT_EQ(load_settings().mock_time_scale, 2.5);
  EXPECT_EQ(origin_of(load_settings(), "mock_time_scale"), path + ":1");
  ::setenv("JOBMAN_MOCK_TIME_SCALE", "1000", 1);
  EXPECT_EQ(load_settings().mock_time_scale, 1000);
  for (const char* bad : {"0.5", "fast", "1e9", "60x"}) {
    ::setenv("JOBMAN_MOCK_TIME_SCALE", bad, 1);
    try {
      (void)load_settings();
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("JOBMAN_MOCK_TIME_SCALE"), std::string::npos) << e.what();
    }
  }
}

TEST_F(SettingsLoad, TheStoreIsAFileInJobmansHomeUnlessSetToAFileOrAPostgresqlUrl) {
  ::setenv("JOBMAN_HOME", (dir_.path() / "home").c_str(), 1);
  EXPECT_EQ(store_location(load_settings()), (dir_.path() / "home" / "jobman.db").string());

  const auto path = write_settings("store: postgresql://lab:s3cret@db.lab.org/jobman?sslmode=verify-full\n");
  const auto s = load_settings();
  EXPECT_EQ(store_location(s), "postgresql://lab:s3cret@db.lab.org/jobman?sslmode=verify-full");
  EXPECT_EQ(origin_of(s, "store"), path + ":1");
  for (const auto& source : s.sources) {
    EXPECT_EQ(source.value.find("s3cret"), std::string::npos) << "`jobman settings` shows " << source.value;
  }

  ::setenv("JOBMAN_STORE", "~/lab/jobs.db", 1);
  EXPECT_EQ(store_location(load_settings()), (util::home_dir() / "lab" / "jobs.db").string());
  ::setenv("JOBMAN_STORE", "jobs.db", 1);
  EXPECT_NE(error_of().find("relative path"), std::string::npos) << error_of();
  ::setenv("JOBMAN_STORE", "mysql://db.lab.org/jobman", 1);
  EXPECT_NE(error_of().find("JOBMAN_STORE"), std::string::npos) << error_of();
  EXPECT_NE(error_of().find("neither a file nor a postgresql:// URL"), std::string::npos) << error_of();
}

TEST_F(SettingsLoad, AutostartIsABoolean) {
  write_settings("autostart: no\n");
  EXPECT_FALSE(load_settings().autostart);
  ::setenv("JOBMAN_AUTOSTART", "1", 1);
  EXPECT_TRUE(load_settings().autostart);
  ::setenv("JOBMAN_AUTOSTART", "sometimes", 1);
  EXPECT_THROW((void)load_settings(), ConfigError);
}

TEST_F(SettingsLoad, ExplicitCloudWinsOverTheProjectRule) {
  write_settings("project: my-proj\ncloud: mock\n");
  EXPECT_EQ(load_settings().cloud, CloudKind::mock);
  ::setenv("JOBMAN_CLOUD", "google", 1);
  const auto s = load_settings();
  EXPECT_EQ(s.cloud, CloudKind::google);
  EXPECT_EQ(origin_of(s, "cloud"), "env JOBMAN_CLOUD");
}

TEST_F(SettingsLoad, EnvironmentOverridesTheFile) {
  const auto path = write_settings("zone: us-central2-b\npoll_interval: 10s\n");
  ::setenv("JOBMAN_ZONE", "us-east1-d", 1);
  ::setenv("JOBMAN_PROJECT", "env-proj", 1);
  ::setenv("JOBMAN_POLL_INTERVAL", "45", 1);
  ::setenv("JOBMAN_GCLOUD", "/usr/bin/gcloud", 1);
  ::setenv("JOBMAN_API_ENDPOINT", "https://tpu.example.com", 1);
  const auto s = load_settings();
  EXPECT_EQ(s.zone, "us-east1-d");
  EXPECT_EQ(s.project, "env-proj");
  EXPECT_EQ(s.cloud, CloudKind::google) << "a project from the environment counts too";
  EXPECT_EQ(s.poll_interval_seconds, 45);
  EXPECT_EQ(s.gcloud, "/usr/bin/gcloud");
  EXPECT_EQ(s.api_endpoint, "https://tpu.example.com");
  EXPECT_EQ(origin_of(s, "zone"), "env JOBMAN_ZONE");
  EXPECT_EQ(origin_of(s, "project"), "env JOBMAN_PROJECT");
  EXPECT_EQ(origin_of(s, "poll_interval"), "env JOBMAN_POLL_INTERVAL");
}

TEST_F(SettingsLoad, UnknownKeyIsAnErrorWithSuggestion) {
  const auto path = write_settings("projcet: x\n");
  EXPECT_EQ(error_of(), path + ":1:1: projcet: unknown setting (did you mean 'project'?)");
}

TEST_F(SettingsLoad, BadFileValuesNameFileLineAndKey) {
  const auto path = write_settings("cloud: gogle\nzone: us-central2\npoll_interval: soon\napi_endpoint: tpu.local\n");
  EXPECT_EQ(error_of(), path + ":1:8: cloud: 'gogle' is not one of mock, google (did you mean 'google'?)\n" + path +
                            ":2:7: zone: 'us-central2' is not a zone ('us-central2' is a region; add the zone "
                            "letter, e.g. us-central2-b)\n" +
                            path +
                            ":3:16: poll_interval: 'soon' is not a duration of at least 1s (write e.g. 30s, 5m, or a "
                            "number of seconds)\n" +
                            path + ":4:15: api_endpoint: 'tpu.local' is not an http:// or https:// URL");
}

TEST_F(SettingsLoad, BadEnvironmentValueNamesTheVariable) {
  ::setenv("JOBMAN_CLOUD", "aws", 1);
  EXPECT_EQ(error_of(), "env JOBMAN_CLOUD: 'aws' is not one of mock, google");
  ::unsetenv("JOBMAN_CLOUD");
  ::setenv("JOBMAN_POLL_INTERVAL", "0", 1);
  EXPECT_NE(error_of().find("env JOBMAN_POLL_INTERVAL: '0' is not a duration of at least 1s"), std::string::npos);
}

TEST_F(SettingsLoad, MalformedFilesAreErrors) {
  const auto path = write_settings("zone: [a\n");
  EXPECT_NE(error_of().find(path + ":2:1: YAML syntax error"), std::string::npos) << error_of();
  write_settings("- zone\n");
  EXPECT_NE(error_of().find("settings must be a mapping"), std::string::npos);
  write_settings("zone: {a: b}\n");
  EXPECT_NE(error_of().find("zone: expected a single value, got a mapping"), std::string::npos);
  write_settings("zone: us-central2-b\nzone: us-east1-d\n");
  EXPECT_NE(error_of().find(":2:1: zone: duplicate key"), std::string::npos);
}

TEST_F(SettingsLoad, EmptyFileGivesDefaults) {
  write_settings("# nothing yet\n");
  EXPECT_EQ(load_settings().cloud, CloudKind::mock);
}

} // namespace settings_test
} // namespace jobman::config
