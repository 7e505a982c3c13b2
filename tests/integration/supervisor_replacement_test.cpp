// A supervisor that dies is replaced at once by whatever command runs next, and each store has a supervisor of its
// own: the background supervisors that create, list and wait start, killed with SIGKILL, on a real mock.
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/util/strings.hpp"
#include "support/line_process.hpp"
#include "support/postgres_server.hpp"
#include "support/run.hpp"
#include "support/store_backends.hpp"
#include "support/supervisor_home.hpp"

#include <csignal>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <sys/types.h>

namespace jobman::test {
namespace supervisor_replacement_test {

namespace fs = std::filesystem;
using domain::Phase;

class SupervisorReplacementTest : public SupervisorHome {
protected:
  void SetUp() override {
    SupervisorHome::SetUp();
    env["JOBMAN_AUTOSTART"] = "1"; // Commands start supervisors in the background, as for a user.
  }

  // The pid the store's daemon lock names: the newest background supervisor.
  pid_t daemon_pid(const std::string& lock = "daemon.lock") {
    std::ifstream in(home / lock);
    pid_t pid = -1;
    in >> pid;
    return pid;
  }

  // Kills `pid` with SIGKILL and waits until it is gone (reaped by init, or a zombie nobody will wait for).
  static void kill_and_await(pid_t pid) {
    ASSERT_GT(pid, 1);
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    ASSERT_TRUE(eventually(
        [&] {
          std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
          std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
          const auto paren = text.rfind(')');
          return text.empty() || (paren != std::string::npos && text.size() > paren + 2 && text[paren + 2] == 'Z');
        },
        kPatience));
  }

  // Whether process `pid` has the store open: it reads it.
  static bool has_open(pid_t pid, const fs::path& file) {
    std::error_code ec;
    for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
      std::error_code link_ec;
      if (fs::read_symlink(fd.path(), link_ec) == file) {
        return true;
      }
    }
    return false;
  }
};

// `kill -9` of the supervisor: the very next `list` finds the dead owner's leases (its process is gone, which /proc
// tells at once, long before the leases run out), ends them, and starts a supervisor that re-attaches to the
// running workload. The job goes on in the same attempt to the checksum of an uninterrupted run.
TEST_F(SupervisorReplacementTest, ADeadSupervisorIsReplacedByTheNextList) {
  const auto id = create(config(training(300, 20)));
  ASSERT_TRUE(await_phase(id, Phase::running));
  const auto dead_owner = db().leases().of(id)->owner;
  const auto pid = daemon_pid();
  ASSERT_NE(dead_owner.find(":" + std::to_string(pid) + ":"), std::string::npos) << dead_owner;
  kill_and_await(pid);

  const auto listed = jm({"list"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.err.find("supervisor " + dead_owner + " is dead"), std::string::npos) << listed.err;
  EXPECT_NE(listed.err.find("1 unfinished job has no supervisor driving it; starting one"), std::string::npos)
      << listed.err;
  EXPECT_NE(daemon_pid(), pid) << "a new supervisor holds the lock";
  ASSERT_TRUE(eventually([&] { return db().leases().of(id) && db().leases().of(id)->owner != dead_owner; }, kPatience));
  const auto done = wait_for(id);
  EXPECT_EQ(done.attempt, 1);
  EXPECT_EQ(done.preemptions, 0);
  EXPECT_EQ(checksums(id, 1, 1), std::vector<std::string>{uninterrupted_checksum(300)});
}

// `show` names a dead supervisor as dead, not as the driver. With autostart off nothing is started, and `list` says
// at once (not when the lease runs out) that the job has no supervisor.
TEST_F(SupervisorReplacementTest, ShowSaysTheDriverIsDeadAndAutostartOffSaysSo) {
  const auto id = create(config(training(300, 20)));
  ASSERT_TRUE(await_phase(id, Phase::running));
  const auto dead_owner = db().leases().of(id)->owner;
  env["JOBMAN_AUTOSTART"] = "0";
  kill_and_await(daemon_pid());

  const auto shown = jm({"show", std::to_string(id)});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("nobody: supervisor " + dead_owner + " is dead"), std::string::npos) << shown.out;
  EXPECT_NE(shown.err.find("autostart is off"), std::string::npos) << shown.err;
  const auto json = jm({"show", std::to_string(id), "--json"});
  const auto driver = nlohmann::json::parse(json.out)["driver"];
  EXPECT_EQ(driver["owner"], dead_owner);
  EXPECT_EQ(driver["dead"], true);
  EXPECT_EQ(driver["live"], false);
  const auto listed = jm({"list"});
  EXPECT_NE(listed.err.find("1 unfinished job has no supervisor driving it, and autostart is off"), std::string::npos)
      << listed.err;
  EXPECT_EQ(job(id).phase, Phase::running) << "nothing drove it meanwhile";
}

// A `wait` already waiting when the supervisor is killed notices within a second, starts another, and ends as the
// job does: exit 0, where it used to sit until its timeout (124).
TEST_F(SupervisorReplacementTest, AWaitAlreadyRunningOutlivesItsSupervisor) {
  const auto id = create(config(training(300, 20)));
  ASSERT_TRUE(await_phase(id, Phase::running));
  const auto dead_owner = db().leases().of(id)->owner;
  LineReadingProcess waiter({jobman_binary(), "wait", std::to_string(id), "--timeout", "150"}, env, dir / "wait.err",
                            std::chrono::seconds(180));
  ASSERT_TRUE(eventually([&] { return has_open(waiter.pid(), home / "jobman.db"); }, kPatience))
      << "wait reads the store";
  kill_and_await(daemon_pid());
  EXPECT_EQ(waiter.finish(), 0) << file_text(dir / "wait.err");
  EXPECT_NE(file_text(dir / "wait.err").find("supervisor " + dead_owner + " is dead"), std::string::npos)
      << file_text(dir / "wait.err");
  const auto done = job(id);
  EXPECT_EQ(done.phase, Phase::succeeded) << done.phase_reason;
  EXPECT_EQ(done.attempt, 1);
  EXPECT_EQ(checksums(id, 1, 1), std::vector<std::string>{uninterrupted_checksum(300)});
}

// Two stores in one home (the home's SQLite file and another through JOBMAN_STORE): a supervisor runs for each, with
// a lock and a log of its own, and the second store's jobs do not wait forever behind the first's supervisor. The
// second store's job 1 has the first's name and id, so its slice would have the first's name: it is refused
// (the slice found under that name is the other store's) rather than taken, and the first job goes on untouched.
TEST_F(SupervisorReplacementTest, EachStoreOfAHomeGetsASupervisorOfItsOwn) {
  const auto first = create(config(training(200, 20)));
  ASSERT_TRUE(await_phase(first, Phase::running));
  const auto first_pid = daemon_pid();

  auto other_env = env;
  other_env["JOBMAN_STORE"] = (dir / "other.db").string();
  const auto on_other = [&](const std::vector<std::string>& args) {
    return run_jobman(args, RunOptions{other_env, "", ""});
  };
  const auto clash = on_other({"create", config(training(40, 10))});
  ASSERT_EQ(clash.exit_code, 0) << clash.err;
  EXPECT_NE(clash.err.find("started the supervisor in the background"), std::string::npos) << clash.err;
  std::string other_lock;
  for (const auto& entry : fs::directory_iterator(home)) {
    const auto name = entry.path().filename().string();
    if (name.starts_with("daemon-") && name.ends_with(".lock")) {
      other_lock = name;
    }
  }
  ASSERT_FALSE(other_lock.empty()) << "the other store's supervisor has a lock of its own";
  EXPECT_TRUE(fs::exists(home / (other_lock.substr(0, other_lock.size() - 5) + ".log")));
  EXPECT_NE(daemon_pid(other_lock), first_pid);
  EXPECT_EQ(daemon_pid(), first_pid) << "the first store's supervisor is left as it was";

  const auto refused = on_other({"wait", clash.out.substr(0, clash.out.find('\n')), "--timeout", "120"});
  EXPECT_EQ(refused.exit_code, 4) << refused.out << refused.err;
  EXPECT_NE(on_other({"show", "1", "--events"}).out.find("is another jobman store's"), std::string::npos);

  const auto second = on_other({"create", config(training(40, 10))});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const auto waited = on_other({"wait", second.out.substr(0, second.out.find('\n')), "--timeout", "120"});
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err;
  const auto ended = wait_for(first);
  EXPECT_EQ(ended.attempt, 1) << "the first store's slice was never taken";
  EXPECT_EQ(checksums(first, 1, 1), std::vector<std::string>{uninterrupted_checksum(200)});
}

// `jobman store migrate` of a personal store into a lab's PostgreSQL store whose role is not the login: right after
// `wait` (the supervisor may still be releasing the slice), and with a job still running, whose supervisor
// `jobman daemon stop` stops. The jobs stay the user's (recorded as the role), their logs come along, and the lab
// store's own supervisor re-attaches to the running workload and finishes it.
TEST_F(SupervisorReplacementTest, MigrateRightAfterWaitAndWithAJobRunningKeepsTheJobsYours) {
  if (!postgres_testable()) {
    GTEST_SKIP() << "PostgreSQL 15 is not installed (Debian package postgresql)";
  }
  const auto lab_url = fresh_postgres_url();
  auto lab_env = env;
  lab_env["JOBMAN_STORE"] = lab_url;
  const auto on_lab = [&](const std::vector<std::string>& args) {
    return run_jobman(args, RunOptions{lab_env, "", ""});
  };

  const auto done = create(config(training(40, 10)));
  EXPECT_EQ(wait_for(done).attempt, 1);
  const auto copied = on_lab({"store", "migrate", "--json"});
  ASSERT_EQ(copied.exit_code, 0) << copied.err;
  const auto copy = nlohmann::json::parse(copied.out);
  EXPECT_EQ(copy["jobs"], 1);
  EXPECT_EQ(copy["job_directories"], 1);
  const std::string role = copy["user"];
  EXPECT_NE(role, db().jobs().get(done).user) << "the lab's role is not the login";

  // A job still running: migrate refuses, naming the command that stops its supervisor.
  const auto running = create(config(training(600, 20)));
  ASSERT_TRUE(await_phase(running, Phase::running));
  const auto refused = on_lab({"store", "migrate"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("jobman daemon stop"), std::string::npos) << refused.err;
  const auto stopped = jm({"daemon", "stop"});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_NE(stopped.out.find(": stopped"), std::string::npos) << stopped.out;
  const auto again = on_lab({"store", "migrate"});
  ASSERT_EQ(again.exit_code, 0) << again.err;

  // On the lab's store the jobs are the role's own, `list` shows them without --user, and the logs came along.
  const auto listed = on_lab({"list", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const auto jobs = nlohmann::json::parse(listed.out);
  ASSERT_EQ(jobs.size(), 2U) << listed.out;
  for (const auto& job : jobs) {
    EXPECT_EQ(job["user"], role) << job.dump(2);
  }
  const auto logs = on_lab({"logs", std::to_string(done)});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("checksum=" + uninterrupted_checksum(40)), std::string::npos) << logs.out;
  // The lab store's supervisor (started by wait) re-attaches to the workload the stopped one left running.
  const auto waited = on_lab({"wait", std::to_string(running), "--timeout", "120"});
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err;
  const auto shown = nlohmann::json::parse(on_lab({"show", std::to_string(running), "--json"}).out);
  EXPECT_EQ(shown["attempts"].size(), 1U) << "the same attempt, not a new slice";
}

// A supervisor started while the store's PostgreSQL server is down (started before it at boot, or while it restarts)
// waits for the server, says so once, and then drives the store's jobs as any supervisor does.
TEST_F(SupervisorReplacementTest, ASupervisorStartedWhileTheStoresServerIsDownWaitsForIt) {
  if (!PostgresServer::available()) {
    GTEST_SKIP() << "PostgreSQL 15 is not installed (Debian package postgresql)";
  }
  PostgresServer server;
  auto lab_env = env;
  lab_env["JOBMAN_STORE"] = server.admin_url();
  lab_env["JOBMAN_AUTOSTART"] = "0";
  const auto on_lab = [&](const std::vector<std::string>& args) {
    return run_jobman(args, RunOptions{lab_env, "", ""});
  };
  const auto created = on_lab({"create", config(training(5, 10))});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  server.stop();
  LineReadingProcess daemon({jobman_binary(), "daemon", "--tick", "50ms"}, lab_env, dir / "lab-daemon.log");
  ASSERT_TRUE(eventually(
      [&] { return file_text(dir / "lab-daemon.log").find("waiting for its server") != std::string::npos; }, kPatience))
      << file_text(dir / "lab-daemon.log");
  EXPECT_EQ(file_text(dir / "lab-daemon.log").find(server.admin_password()), std::string::npos)
      << "the password stays out of the log";
  server.start_again();
  const auto waited = on_lab({"wait", std::string(util::trim(created.out)), "--timeout", "120"});
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err << file_text(dir / "lab-daemon.log");
}

} // namespace supervisor_replacement_test
} // namespace jobman::test
