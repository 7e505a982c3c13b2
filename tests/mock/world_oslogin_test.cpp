// OS Login in the mock: a user's login profile, its POSIX account per project and its SSH keys, kept across a
// restart.
#include "mock_cloud/world.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

namespace world_oslogin_test {

using jobman::mock::MockConfig;
using jobman::mock::PoolConfig;
using jobman::mock::Tier;
using jobman::mock::World;
using nlohmann::json;

constexpr std::int64_t kStart = 1'800'000'000'000;
const std::string kAccount = "jobman@lab.iam.gserviceaccount.com";
const std::string kKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKk2 me@lab";

MockConfig test_config() {
  MockConfig config;
  jobman::mock::ZoneConfig zone;
  zone.name = "us-central2-b";
  zone.pools["v4"][Tier::spot] = PoolConfig{16, 16, {}};
  config.zones.push_back(zone);
  return config;
}

TEST(MockOsLogin, AnImportedKeyGivesThePosixAccountOfItsProject) {
  World world(test_config(), 1, 7);
  EXPECT_EQ(world.get_login_profile(kAccount, "lab", kStart).body, json({{"name", kAccount}}));
  const auto imported = world.import_ssh_public_key(kAccount, "lab", {{"key", kKey}}, kStart);
  ASSERT_EQ(imported.status, 200) << imported.body.dump();
  const auto& profile = imported.body["loginProfile"];
  ASSERT_EQ(profile["posixAccounts"].size(), 1U) << profile.dump();
  const auto& account = profile["posixAccounts"][0];
  EXPECT_EQ(account["accountId"], "lab");
  EXPECT_EQ(account["primary"], true);
  EXPECT_EQ(account["operatingSystemType"], "LINUX");
  const auto username = account["username"].get<std::string>();
  EXPECT_TRUE(username.starts_with("sa_")) << username; // A service account's, as OS Login names it.
  EXPECT_EQ(account["homeDirectory"], "/home/" + username);
  EXPECT_TRUE(account["uid"].is_string() && account["gid"].is_string());
  ASSERT_EQ(profile["sshPublicKeys"].size(), 1U);
  const auto& key = profile["sshPublicKeys"].begin().value();
  EXPECT_EQ(key["key"], kKey);
  EXPECT_EQ(key["name"], "users/" + kAccount + "/sshPublicKeys/" + key["fingerprint"].get<std::string>());
  // The same key again, from a file (its line's end kept) and with another comment, is the same entry; a person's
  // account is named after the email.
  ASSERT_TRUE(world.import_ssh_public_key(kAccount, "lab", {{"key", kKey + " again\n"}}, kStart).ok());
  const auto keys = world.get_login_profile(kAccount, "", kStart).body["sshPublicKeys"];
  ASSERT_EQ(keys.size(), 1U);
  EXPECT_EQ(keys.begin().value()["key"], kKey + " again");
  const auto person = world.import_ssh_public_key("Ada.Lovelace@example.com", "lab", {{"key", kKey}}, kStart);
  EXPECT_EQ(person.body["loginProfile"]["posixAccounts"][0]["username"], "ada_lovelace_example_com");
  // Another project's profile has the keys but not this project's account.
  EXPECT_FALSE(world.get_login_profile(kAccount, "other", kStart).body.contains("posixAccounts"));
}

TEST(MockOsLogin, ExpiredKeysLeaveTheProfileAndBadKeysAreRefused) {
  World world(test_config(), 1, 7);
  const std::int64_t expires_usec = (kStart + 60'000) * 1000;
  ASSERT_TRUE(world
                  .import_ssh_public_key(kAccount, "lab",
                                         {{"key", kKey}, {"expirationTimeUsec", std::to_string(expires_usec)}}, kStart)
                  .ok());
  const auto fresh = world.get_login_profile(kAccount, "lab", kStart).body;
  EXPECT_EQ(fresh["sshPublicKeys"].begin().value()["expirationTimeUsec"], std::to_string(expires_usec));
  EXPECT_FALSE(world.get_login_profile(kAccount, "lab", kStart + 60'000).body.contains("sshPublicKeys"));
  for (const json& bad : {json({{"key", "not a key"}}), json({{"key", "ssh-ed25519"}}), json({{"key", 7}}),
                          json({{"key", kKey}, {"expirationTimeUsec", "soon"}}), json::object()}) {
    EXPECT_EQ(world.import_ssh_public_key(kAccount, "lab", bad, kStart).status, 400) << bad.dump();
  }
  EXPECT_EQ(world.import_ssh_public_key("no-email", "lab", {{"key", kKey}}, kStart).status, 400);
  EXPECT_EQ(world.get_login_profile("no-email", "lab", kStart).status, 400);
}

TEST(MockOsLogin, ARestartedWorldKeepsTheProfiles) {
  jobman::test::TempDir dir;
  const auto db = dir / "state.db";
  json profile;
  {
    World before(test_config(), 1, 7);
    before.attach_store(db, kStart);
    ASSERT_TRUE(before.import_ssh_public_key(kAccount, "lab", {{"key", kKey}}, kStart).ok());
    profile = before.get_login_profile(kAccount, "lab", kStart).body;
  }
  World restarted(test_config(), 1, 7);
  restarted.attach_store(db, kStart + 1'000);
  EXPECT_EQ(restarted.get_login_profile(kAccount, "lab", kStart + 1'000).body, profile);
}

} // namespace world_oslogin_test
