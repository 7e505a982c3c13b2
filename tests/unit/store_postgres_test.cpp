// The PostgreSQL backend on its own: the translation of the store's SQL, connection errors that name the server and
// never its password, reconnection after a server restart, and the wake-ups supervisors listen for.
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/postgres.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "support/postgres_server.hpp"
#include "support/store_backends.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <gtest/gtest.h>
#include <string>
#include <thread>
#include <vector>

namespace jobman::store {
namespace store_postgres_test {

using postgres::translate_for_postgres;

std::int64_t create(JobStore& store, const std::string& name) {
  domain::NewJob job;
  job.name = name;
  job.user = "alice";
  job.accelerator = "v4-8";
  job.zone = "us-central2-b";
  job.pricing = domain::Pricing::spot;
  job.hosts = 1;
  job.config_yaml = "name: " + name + "\n";
  job.config_path = "/tmp/" + name + ".yaml";
  return store.jobs().create({job}).at(0);
}

std::string error_of(const std::string& url) {
  try {
    (void)JobStore::open_location(url);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PostgresTranslation, ParametersBecomeDollarNumbersAsSqliteNumbersThem) {
  const auto t = translate_for_postgres("SELECT a FROM jobs WHERE id = ?2 AND name = :name AND x = ?1 AND y = :name");
  EXPECT_EQ(t.text, "SELECT a FROM jobs WHERE id = $2 AND name = $3 AND x = $1 AND y = $3");
  EXPECT_EQ(t.parameters, 3);
  ASSERT_EQ(t.named.size(), 1u);
  EXPECT_EQ(t.named[0], (std::pair<std::string, int>{":name", 3}));
  EXPECT_FALSE(t.writes);
}

TEST(PostgresTranslation, QuotesUserDropsIndexHintsAndIgnoresConflicts) {
  EXPECT_EQ(translate_for_postgres("SELECT user FROM events INDEXED BY events_by_job WHERE user = ?1").text,
            "SELECT \"user\" FROM events  WHERE \"user\" = $1");
  const auto insert = translate_for_postgres("INSERT OR IGNORE INTO zone_catalogs (zone) VALUES (?1);");
  EXPECT_EQ(insert.text, "INSERT INTO zone_catalogs (zone) VALUES ($1) ON CONFLICT DO NOTHING");
  EXPECT_TRUE(insert.writes);
  EXPECT_TRUE(translate_for_postgres("update jobs set phase = 'x'").writes);
}

TEST(PostgresTranslation, LiteralsAndQuotedNamesAreCopiedAsTheyAre) {
  EXPECT_EQ(translate_for_postgres("SELECT 'it''s ?1 :x user' FROM \"user\" WHERE a = ?1").text,
            "SELECT 'it''s ?1 :x user' FROM \"user\" WHERE a = $1");
}

TEST(PostgresUrl, MessagesShowTheServerWithoutThePassword) {
  EXPECT_EQ(util::without_password("postgresql://alice:s3cret@db.lab.org:5432/jobman"),
            "postgresql://alice@db.lab.org:5432/jobman");
  EXPECT_EQ(util::without_password("postgresql://db.lab.org/jobman?sslmode=require&password=s3cret&user=bob"),
            "postgresql://db.lab.org/jobman?sslmode=require&password=...&user=bob");
  EXPECT_EQ(util::without_password("postgresql://alice@db.lab.org/jobman"), "postgresql://alice@db.lab.org/jobman");
  EXPECT_TRUE(util::is_postgres_url("postgres://db/jobman"));
  EXPECT_FALSE(util::is_postgres_url("/home/alice/jobman.db"));
}

class PostgresConnectionTest : public testing::Test {
protected:
  void SetUp() override {
    if (!test::PostgresServer::available()) {
      GTEST_SKIP() << "PostgreSQL 15 is not installed (Debian package postgresql)";
    }
  }
};

TEST_F(PostgresConnectionTest, AWrongPasswordIsRefusedWithTheServersReasonAndNeverShown) {
  auto& server = test::shared_postgres();
  const std::string url = "postgresql://" + std::string(test::PostgresServer::admin_user()) +
                          ":WrongPassword42@127.0.0.1:" + std::to_string(server.port()) + "/postgres";
  const auto message = error_of(url);
  EXPECT_NE(message.find("cannot connect to postgresql://jobman_admin@127.0.0.1:"), std::string::npos) << message;
  EXPECT_NE(message.find("password authentication failed"), std::string::npos) << message;
  EXPECT_EQ(message.find("WrongPassword42"), std::string::npos) << message;
}

TEST_F(PostgresConnectionTest, AServerThatIsNotThereIsNamedInTheError) {
  test::PostgresServer server;
  const auto url = server.admin_url();
  server.stop();
  const auto message = error_of(url);
  EXPECT_NE(message.find("cannot connect to postgresql://jobman_admin@127.0.0.1:" + std::to_string(server.port())),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("refused"), std::string::npos) << message;
  EXPECT_EQ(message.find(server.admin_password()), std::string::npos) << message;
}

TEST_F(PostgresConnectionTest, AStoreCarriesOnAfterTheServerRestarts) {
  test::PostgresServer server;
  auto store = JobStore::open_location(server.admin_url());
  const auto first = create(store, "before");
  server.restart_fast();
  // The restart ended the store's session; its next statements run on a new one, and nothing is lost.
  EXPECT_EQ(store.jobs().find(first)->name, "before");
  const auto second = create(store, "after");
  EXPECT_GT(second, first);
  EXPECT_EQ(store.jobs().list({}).size(), 2u);
}

TEST_F(PostgresConnectionTest, WhileTheServerIsDownCallsFailAtOnceAndTheStoreRecoversWhenItIsBack) {
  test::PostgresServer server;
  auto store = JobStore::open_location(server.admin_url());
  (void)create(store, "kept");
  server.stop();
  for (int i = 0; i < 3; ++i) {
    try {
      (void)store.jobs().list({});
      ADD_FAILURE() << "a listing succeeded with the server down";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find(server.admin_password()), std::string::npos) << e.what();
    }
  }
  server.start_again();
  // The backoff after the failed tries is at most 15 s; the store comes back within it.
  std::size_t listed = 0;
  for (int i = 0; i < 200 && listed == 0; ++i) {
    try {
      listed = store.jobs().list({}).size();
    } catch (const Error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  EXPECT_EQ(listed, 1u);
}

TEST_F(PostgresConnectionTest, SupervisorsAreWokenByNewJobsAndUsersRequestsNotByProgress) {
  const auto url = test::fresh_postgres_url();
  auto store = JobStore::open_location(url);
  const auto id = create(store, "first");
  postgres::Listener listener(url);
  EXPECT_FALSE(listener.wait(std::chrono::milliseconds(100)));

  (void)create(store, "second");
  EXPECT_TRUE(listener.wait(std::chrono::seconds(30)));
  EXPECT_FALSE(listener.wait(std::chrono::milliseconds(100))) << "one commit wakes once";

  domain::PhaseChange change;
  change.to = domain::Phase::provisioning;
  change.reason = "requesting a slice";
  ASSERT_TRUE(store.jobs().transition(id, domain::Phase::pending, change));
  EXPECT_FALSE(listener.wait(std::chrono::milliseconds(200))) << "a supervisor's own progress woke it";

  (void)store.jobs().set_desired_state(id, domain::DesiredState::stop, "cancelled by alice");
  EXPECT_TRUE(listener.wait(std::chrono::seconds(30)));
}

TEST_F(PostgresConnectionTest, ProcessesOpeningANewStoreTogetherCreateItOnce) {
  // The opening burst of a lab: many commands find the schema empty at once. One creates the tables under the write
  // lock; the others, having waited for it, must see them and not create them again.
  for (int round = 0; round < 3; ++round) {
    const auto url = test::fresh_postgres_url();
    constexpr int kOpeners = 12;
    std::vector<std::string> errors(kOpeners);
    std::vector<std::int64_t> ids(kOpeners, 0);
    std::atomic<int> ready{0};
    std::vector<std::thread> openers;
    openers.reserve(kOpeners);
    for (int i = 0; i < kOpeners; ++i) {
      openers.emplace_back([&, i] {
        ready.fetch_add(1);
        while (ready.load() < kOpeners) {
          std::this_thread::yield();
        }
        try {
          auto store = JobStore::open_location(url);
          ids[i] = create(store, "opener-" + std::to_string(i));
        } catch (const Error& e) {
          errors[i] = e.what();
        }
      });
    }
    for (auto& opener : openers) {
      opener.join();
    }
    for (int i = 0; i < kOpeners; ++i) {
      EXPECT_EQ(errors[i], "") << "round " << round << ", opener " << i;
    }
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "two jobs got one id";
    EXPECT_EQ(JobStore::open_location(url).jobs().list({}).size(), static_cast<std::size_t>(kOpeners));
  }
}

TEST_F(PostgresConnectionTest, TheListenerListensAgainAfterARestart) {
  test::PostgresServer server;
  const auto url = server.admin_url();
  auto store = JobStore::open_location(url);
  postgres::Listener listener(url);
  server.restart_fast();
  // The lost connection is noticed, then made again; a wake-up may have been missed meanwhile, so it says so.
  bool woken = false;
  for (int i = 0; i < 100 && !woken; ++i) {
    woken = listener.wait(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(woken);
  (void)create(store, "after the restart");
  EXPECT_TRUE(listener.wait(std::chrono::seconds(30)));
}

} // namespace store_postgres_test
} // namespace jobman::store
