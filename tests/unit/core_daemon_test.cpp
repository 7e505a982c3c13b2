// The supervisor as a process: which lease owners are dead, and its log kept to a size.
#include "jobman/core/daemon.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "support/temp_dir.hpp"

#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <gtest/gtest.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace jobman::core {
namespace core_daemon_test {

namespace fs = std::filesystem;

TEST(LeaseOwners, OnlyAProcessOfThisMachineThatIsGoneIsDead) {
  const auto me = lease_owner_id();
  const auto fields = util::split(me, ':');
  ASSERT_EQ(fields.size(), 4U) << me;
  EXPECT_FALSE(lease_owner_dead_here(me)) << "this process runs";

  // A child that has ended: dead, once reaped and while still a zombie.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::_exit(0);
  }
  const std::string child_owner = fields[0] + ":" + std::to_string(child) + ":" + fields[2] + ":" + fields[3];
  int status = 0;
  // Until the parent reaps it, the child is a zombie: dead all the same.
  while (util::read_file("/proc/" + std::to_string(child) + "/stat").find(") Z ") == std::string::npos) {
    std::this_thread::yield();
  }
  EXPECT_TRUE(lease_owner_dead_here(child_owner)) << "a zombie";
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(lease_owner_dead_here(child_owner)) << "gone";

  // The same pid with another start time is another process: the owner is dead.
  EXPECT_TRUE(lease_owner_dead_here(fields[0] + ":1:" + "999999999:" + fields[3])) << "pid 1 started at another time";

  // Other machines, other boots or pid namespaces, and old ids without the machine are never judged.
  EXPECT_FALSE(lease_owner_dead_here("another-host:" + std::to_string(child) + ":" + fields[2] + ":" + fields[3]));
  EXPECT_FALSE(lease_owner_dead_here(fields[0] + ":" + std::to_string(child) + ":" + fields[2] + ":00000000"));
  EXPECT_FALSE(lease_owner_dead_here(fields[0] + ":" + std::to_string(child) + ":" + fields[2]));
  EXPECT_FALSE(lease_owner_dead_here("garbage"));
}

// Points stderr at `path` for the life of the object, and gives stdout and stderr back at the end (rotate_log moves
// both).
class StderrTo {
public:
  explicit StderrTo(const fs::path& path) : saved_out_(::dup(STDOUT_FILENO)), saved_err_(::dup(STDERR_FILENO)) {
    std::fflush(stdout);
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  ~StderrTo() {
    std::fflush(stdout);
    ::dup2(saved_out_, STDOUT_FILENO);
    ::dup2(saved_err_, STDERR_FILENO);
    ::close(saved_out_);
    ::close(saved_err_);
  }
  StderrTo(const StderrTo&) = delete;
  StderrTo& operator=(const StderrTo&) = delete;

private:
  int saved_out_;
  int saved_err_;
};

void write_err(const std::string& text) {
  ASSERT_EQ(::write(STDERR_FILENO, text.data(), text.size()), static_cast<ssize_t>(text.size()));
}

TEST(DaemonLog, ALogOverItsSizeIsRotatedKeepingAFewOldFiles) {
  const test::TempDir dir;
  const auto log = dir / "daemon.log";
  const StderrTo redirect(log);
  write_err(std::string(50, 'a'));
  rotate_log(log, 100, 2);
  EXPECT_FALSE(fs::exists(dir / "daemon.log.1")) << "under its size: left alone";

  write_err(std::string(60, 'b'));
  rotate_log(log, 100, 2);
  ASSERT_TRUE(fs::exists(dir / "daemon.log.1"));
  EXPECT_EQ(fs::file_size(dir / "daemon.log.1"), 110U);
  write_err("after\n");
  EXPECT_EQ(util::read_file(log), "after\n") << "stderr goes to a new log";

  write_err(std::string(200, 'c'));
  rotate_log(log, 100, 2);
  write_err(std::string(200, 'd'));
  rotate_log(log, 100, 2);
  EXPECT_EQ(fs::file_size(dir / "daemon.log.1"), 200U);
  EXPECT_EQ(fs::file_size(dir / "daemon.log.2"), 206U);
  EXPECT_FALSE(fs::exists(dir / "daemon.log.3")) << "two old files kept";
  EXPECT_EQ(fs::file_size(log), 0U);
}

TEST(DaemonLog, AnotherProcessesRotationIsFollowed) {
  const test::TempDir dir;
  const auto log = dir / "daemon.log";
  const StderrTo redirect(log);
  write_err("before\n");
  fs::rename(log, dir / "daemon.log.1"); // As another supervisor of the store would.
  rotate_log(log, 1 << 20, 3);
  write_err("after\n");
  EXPECT_EQ(util::read_file(log), "after\n");
  EXPECT_EQ(util::read_file(dir / "daemon.log.1"), "before\n");
}

} // namespace core_daemon_test
} // namespace jobman::core
