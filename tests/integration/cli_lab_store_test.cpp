// A lab on one PostgreSQL store, through the real binary: the roles docs/LAB.md tells a lab to create, passwords in
// a pgpass file only, each user's own view by default, ownership enforced for cancel and its kin, admins, and who
// did what in the events.
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "support/postgres_server.hpp"
#include "support/run.hpp"
#include "support/store_backends.hpp"
#include "support/temp_dir.hpp"

#include <cstdlib>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

namespace jobman::test {
namespace cli_lab_store_test {

constexpr const char* kTrain = JOBMAN_TEST_DATA_DIR "/cli/train.yaml";

// The superuser's URL of the server the tests use: the run's (JOBMAN_TEST_POSTGRES_URL) or this process's own.
std::string superuser_url() {
  if (const char* url = std::getenv("JOBMAN_TEST_POSTGRES_URL"); url != nullptr && *url != '\0') {
    return url;
  }
  return shared_postgres().admin_url();
}

// `url` with its database replaced by `database`.
std::string with_database(const std::string& url, const std::string& database) {
  const auto slash = url.find('/', url.find('@'));
  const auto query = url.find('?', slash);
  return url.substr(0, slash + 1) + database + (query == std::string::npos ? "" : url.substr(query));
}

class CliLabStore : public ::testing::Test {
protected:
  void SetUp() override {
    if (!postgres_testable()) {
      GTEST_SKIP() << "PostgreSQL 15 is not installed (Debian package postgresql)";
    }
    const std::string server = superuser_url();
    const auto at = server.find('@');
    host_port_ = server.substr(at + 1, server.find('/', at) - at - 1);
    // Names of this process's own: the server (and its roles) may be shared by every test process of the run.
    const std::string tag = std::to_string(::getpid());
    database_ = "lab_" + tag;
    owner_ = "lab_owner_" + tag;
    alice_ = "alice_" + tag;
    bob_ = "bob_" + tag;
    users_ = "lab_users_" + tag;
    run_sql(server, "CREATE DATABASE " + database_);
    const auto lab = with_database(server, database_);
    // The setup docs/LAB.md gives, word for word but for the names.
    run_sql(lab, "CREATE ROLE " + owner_ + " LOGIN PASSWORD 'owner-pw'; CREATE SCHEMA jobman AUTHORIZATION " + owner_ +
                     "; ALTER DATABASE " + database_ +
                     " SET search_path = jobman; REVOKE ALL ON SCHEMA public FROM PUBLIC; CREATE ROLE " + users_ +
                     " NOLOGIN; GRANT CONNECT ON DATABASE " + database_ + " TO " + users_ +
                     "; GRANT USAGE ON SCHEMA jobman TO " + users_ + "; ALTER DEFAULT PRIVILEGES FOR ROLE " + owner_ +
                     " IN SCHEMA jobman GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO " + users_ +
                     "; ALTER DEFAULT PRIVILEGES FOR ROLE " + owner_ +
                     " IN SCHEMA jobman GRANT USAGE, SELECT ON SEQUENCES TO " + users_ + "; CREATE ROLE " + alice_ +
                     " LOGIN PASSWORD 'alice-pw' IN ROLE " + users_ + "; CREATE ROLE " + bob_ +
                     " LOGIN PASSWORD 'bob-pw' IN ROLE " + users_);
    // Passwords live in the pgpass file alone, never in a URL.
    dir_.write("pgpass", "*:*:" + database_ + ":" + owner_ + ":owner-pw\n*:*:" + database_ + ":" + alice_ +
                             ":alice-pw\n*:*:" + database_ + ":" + bob_ + ":bob-pw\n");
    std::filesystem::permissions(dir_ / "pgpass",
                                 std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }
  void TearDown() override {
    if (database_.empty()) {
      return;
    }
    const std::string server = superuser_url();
    run_sql(server, "DROP DATABASE IF EXISTS " + database_ + " WITH (FORCE)");
    run_sql(server, "DROP ROLE IF EXISTS " + alice_ + ", " + bob_ + ", " + owner_ + ", " + users_);
  }

  std::string store_of(const std::string& role) const {
    return "postgresql://" + role + "@" + host_port_ + "/" + database_;
  }
  // jobman as `role`, on its own machine (a home of its own).
  RunResult as(const std::string& role, const std::vector<std::string>& args) const {
    RunOptions options;
    options.env = {{"JOBMAN_HOME", (dir_ / role).string()},
                   {"XDG_CONFIG_HOME", (dir_ / "config").string()},
                   {"JOBMAN_STORE", store_of(role)},
                   {"PGPASSFILE", (dir_ / "pgpass").string()},
                   {"PGPASSWORD", ""},
                   {"JOBMAN_PROJECT", ""},
                   {"JOBMAN_CLOUD", ""},
                   {"JOBMAN_AUTOSTART", "false"},
                   {"NO_COLOR", ""}};
    return run_jobman(args, options);
  }

  TempDir dir_;
  std::string host_port_, database_, owner_, alice_, bob_, users_;
};

TEST_F(CliLabStore, EachUserSeesTheirOwnActsOnTheirOwnAndAdminsActOnAll) {
  // The owner's first command creates the tables; the users' roles can then do all the rest.
  const auto first = as(owner_, {"list"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto created = as(alice_, {"create", kTrain});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string id = created.out.substr(0, created.out.find('\n'));

  // Bob's own view is empty; the lab's holds alice's job, under her role.
  const auto bobs = as(bob_, {"list"});
  ASSERT_EQ(bobs.exit_code, 0) << bobs.err;
  EXPECT_EQ(bobs.out.find(id), std::string::npos) << bobs.out;
  const auto lab = as(bob_, {"list", "--user", "all"});
  ASSERT_EQ(lab.exit_code, 0) << lab.err;
  EXPECT_NE(lab.out.find(id), std::string::npos) << lab.out;
  EXPECT_NE(lab.out.find(alice_), std::string::npos) << lab.out;
  EXPECT_NE(as(alice_, {"list"}).out.find(id), std::string::npos);

  // Not his to cancel.
  const auto refused = as(bob_, {"cancel", id, "--no-wait"});
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("is " + alice_ + "'s"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(bob_ + " may not cancel it"), std::string::npos) << refused.err;

  // Only the store's owner (or an admin) names admins.
  const auto self_made = as(alice_, {"store", "admins", "add", alice_});
  EXPECT_EQ(self_made.exit_code, 1) << self_made.err;
  EXPECT_NE(self_made.err.find("may not change the admins"), std::string::npos) << self_made.err;
  const auto named = as(owner_, {"store", "admins", "add", bob_});
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_EQ(as(alice_, {"store", "admins"}).out, bob_ + "\n");

  // The fair share too: everyone may look, the owner (or an admin) sets it.
  const auto grabbed = as(alice_, {"store", "share", "v4:spot", "512", "--user", alice_});
  EXPECT_EQ(grabbed.exit_code, 1) << grabbed.out;
  EXPECT_NE(grabbed.err.find(alice_ + " may not change the settings"), std::string::npos) << grabbed.err;
  ASSERT_EQ(as(owner_, {"store", "share", "v4:spot", "64"}).exit_code, 0);
  ASSERT_EQ(as(bob_, {"store", "cap", "v4:spot", "512"}).exit_code, 0) << "bob is an admin now";
  const auto limits = as(alice_, {"store", "limits"});
  EXPECT_EQ(limits.exit_code, 0) << limits.err;
  EXPECT_NE(limits.out.find("v4 spot  the lab     512"), std::string::npos) << limits.out;
  EXPECT_NE(limits.out.find("v4 spot  every user  64"), std::string::npos) << limits.out;

  // An admin may; the timeline says who did it.
  const auto cancelled = as(bob_, {"cancel", id, "--no-wait"});
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.err;
  const auto events = as(alice_, {"show", id, "--events"});
  EXPECT_NE(events.out.find("cancel requested by " + bob_), std::string::npos) << events.out;

  // No password in anything jobman printed.
  for (const auto& text : {first.out + first.err, created.out + created.err, lab.out, refused.err, events.out,
                           as(alice_, {"settings"}).out}) {
    EXPECT_EQ(text.find("-pw"), std::string::npos) << text;
  }
}

// A job's output streams to the machine whose supervisor drives the attempt: on another machine `logs` says where they
// are, instead of printing nothing.
TEST_F(CliLabStore, LogsOfAnAttemptDrivenOnAnotherMachineSayWhereTheyAre) {
  ASSERT_EQ(as(owner_, {"list"}).exit_code, 0);
  const auto created = as(alice_, {"create", kTrain});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const auto id = std::stoll(created.out.substr(0, created.out.find('\n')));
  {
    // What a supervisor on gpu-host-7 records as it takes the job up and starts its first attempt.
    auto store = store::JobStore::open_location(with_database(superuser_url(), database_));
    store.events().append(id, "action", "driven by supervisor gpu-host-7:4242:99", "");
    store.attempts().begin(id, "qr-1", "node-1", "us-central2-b");
  }
  const auto logs = as(alice_, {"logs", std::to_string(id)});
  EXPECT_EQ(logs.exit_code, 1) << logs.out << logs.err;
  EXPECT_EQ(logs.out, "");
  EXPECT_NE(logs.err.find("has no logs on this machine"), std::string::npos) << logs.err;
  EXPECT_NE(logs.err.find("gpu-host-7:4242:99"), std::string::npos) << logs.err;
  EXPECT_NE(logs.err.find("on gpu-host-7"), std::string::npos) << logs.err;
}

} // namespace cli_lab_store_test
} // namespace jobman::test
