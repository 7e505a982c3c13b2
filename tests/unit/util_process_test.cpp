// The process module: real children (/bin/sh) with pipes, files, environments, directories, process groups, a held
// start, a detached start and exec.
#include "jobman/util/process.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace jobman::util {
namespace util_process_test {

namespace fs = std::filesystem;
using test::ScopedEnv;
using test::TempDir;

// Everything left to read on `fd`, which is then closed.
std::string read_all(int& fd) {
  std::string text;
  std::array<char, 4096> buffer{};
  for (;;) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got > 0) {
      text.append(buffer.data(), static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  close_fd(fd);
  return text;
}

// One line from `fd` (without its newline), read a byte at a time so that nothing after it is taken.
std::string read_line(int fd) {
  std::string line;
  char c = 0;
  while (::read(fd, &c, 1) == 1 && c != '\n') {
    line += c;
  }
  return line;
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Fields of /proc/PID/stat after the command name: [0] is field 3 (the state), [1] the parent, [2] the process
// group, [3] the session.
std::vector<std::string> stat_fields(pid_t pid) {
  const auto text = file_text("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream rest(text.substr(text.rfind(')') + 2));
  std::vector<std::string> fields;
  for (std::string field; rest >> field;) {
    fields.push_back(field);
  }
  return fields;
}

// `script` run by /bin/sh, with its own arguments after it ($0 is "sh").
ProcessBuilder shell(const std::string& script, const std::vector<std::string>& args = {}) {
  return ProcessBuilder({"/bin/sh", "-c", script, "sh"}).args(args);
}

TEST(UtilProcess, StdoutAndStderrArePipesOfTheirOwnAndTheExitStatusIsTheChilds) {
  auto child = shell("echo out; echo err >&2; exit 3").output(Stream::pipe()).error(Stream::pipe()).spawn();
  ASSERT_GT(child.pid, 0);
  EXPECT_EQ(child.exec_error, 0);
  EXPECT_EQ(child.in_fd, -1);
  EXPECT_EQ(read_all(child.out_fd), "out\n");
  EXPECT_EQ(read_all(child.err_fd), "err\n");
  EXPECT_EQ(wait_exit(child.pid), 3);
}

TEST(UtilProcess, StderrMergedIntoStdoutSharesItsPipeInTheOrderWritten) {
  auto child = shell("echo one; echo two >&2; echo three").output(Stream::pipe()).error(Stream::output()).spawn();
  EXPECT_EQ(child.err_fd, -1);
  EXPECT_EQ(read_all(child.out_fd), "one\ntwo\nthree\n");
  EXPECT_EQ(wait_exit(child.pid), 0);
}

TEST(UtilProcess, AStdinPipeFeedsTheChildAndClosingItEndsItsInput) {
  auto child = shell("while read -r line; do echo \"got $line\"; done; echo end")
                   .input(Stream::pipe())
                   .output(Stream::pipe())
                   .spawn();
  const std::string input = "a\nb\n";
  ASSERT_EQ(::write(child.in_fd, input.data(), input.size()), static_cast<ssize_t>(input.size()));
  close_fd(child.in_fd);
  EXPECT_EQ(read_all(child.out_fd), "got a\ngot b\nend\n");
  EXPECT_EQ(wait_exit(child.pid), 0);
}

TEST(UtilProcess, NullStdinReadsNothing) {
  auto child = shell("cat; echo done").input(Stream::null()).output(Stream::pipe()).spawn();
  EXPECT_EQ(read_all(child.out_fd), "done\n");
  EXPECT_EQ(wait_exit(child.pid), 0);
}

TEST(UtilProcess, VariablesAreAddedAndRemovedForTheChildOnlyTheLastSettingCounting) {
  const ScopedEnv kept("JOBMAN_PROCESS_TEST_KEPT", "inherited");
  const ScopedEnv removed("JOBMAN_PROCESS_TEST_REMOVED", "inherited");
  const ScopedEnv replaced("JOBMAN_PROCESS_TEST_REPLACED", "inherited");
  auto child = ProcessBuilder({"/usr/bin/env"})
                   .env("JOBMAN_PROCESS_TEST_ADDED", "first")
                   .env(std::vector<std::pair<std::string, std::string>>{{"JOBMAN_PROCESS_TEST_REPLACED", "new"}})
                   .env(std::map<std::string, std::string>{{"JOBMAN_PROCESS_TEST_ADDED", "second"}})
                   .unset_env("JOBMAN_PROCESS_TEST_REMOVED")
                   .output(Stream::pipe())
                   .spawn();
  std::vector<std::string> ours;
  std::istringstream lines(read_all(child.out_fd));
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("JOBMAN_PROCESS_TEST_")) {
      ours.push_back(line);
    }
  }
  std::sort(ours.begin(), ours.end());
  EXPECT_EQ(ours, (std::vector<std::string>{"JOBMAN_PROCESS_TEST_ADDED=second", "JOBMAN_PROCESS_TEST_KEPT=inherited",
                                            "JOBMAN_PROCESS_TEST_REPLACED=new"}));
  EXPECT_EQ(wait_exit(child.pid), 0);
  EXPECT_EQ(std::getenv("JOBMAN_PROCESS_TEST_ADDED"), nullptr) << "this process's environment is left alone";
  EXPECT_STREQ(std::getenv("JOBMAN_PROCESS_TEST_REPLACED"), "inherited");
  EXPECT_STREQ(std::getenv("JOBMAN_PROCESS_TEST_REMOVED"), "inherited");
}

TEST(UtilProcess, AClearedEnvironmentHoldsOnlyWhatIsSetAndItsPathFindsTheProgram) {
  const TempDir dir;
  const auto bin = dir / "bin";
  fs::create_directories(bin);
  const auto program = dir.write("bin/jobman-process-test-hello", "#!/bin/sh\necho \"hello from $0\"\n/usr/bin/env\n");
  fs::permissions(program, fs::perms::owner_all);
  // Not on this process's PATH: only the child's own PATH finds it.
  auto child = ProcessBuilder({"jobman-process-test-hello"})
                   .clear_env()
                   .env("PATH", bin.string())
                   .env("ONLY", "this")
                   .output(Stream::pipe())
                   .spawn();
  EXPECT_EQ(child.exec_error, 0);
  const auto out = read_all(child.out_fd);
  EXPECT_EQ(wait_exit(child.pid), 0);
  EXPECT_EQ(out.substr(0, out.find('\n')), "hello from " + program.string());
  std::istringstream lines(out.substr(out.find('\n') + 1));
  std::vector<std::string> env;
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("PWD=") && !line.starts_with("SHLVL=") && !line.starts_with("_=")) { // Set by the shell.
      env.push_back(line);
    }
  }
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=" + bin.string(), "ONLY=this"}));
}

TEST(UtilProcess, APathLookupTakesTheFirstExecutableRegularFileAsExecvpWould) {
  const TempDir dir;
  for (const char* sub : {"a", "b/tool", "c", "d"}) {
    fs::create_directories(dir / sub); // b holds a directory named like the program.
  }
  const auto plain = dir.write("c/tool", "not executable\n");
  const auto wanted = dir.write("d/tool", "#!/bin/sh\n");
  fs::permissions(plain, fs::perms::owner_read | fs::perms::owner_write);
  fs::permissions(wanted, fs::perms::owner_all);
  const auto path =
      (dir / "a").string() + ":" + (dir / "b").string() + ":" + (dir / "c").string() + ":" + (dir / "d").string();
  EXPECT_EQ(find_in_path("tool", path), wanted.string());
  EXPECT_EQ(find_in_path("tool", (dir / "a").string() + ":" + (dir / "c").string()), "");
}

TEST(UtilProcess, AProgramThatCannotRunIsReportedAndExitsWith127) {
  auto missing = ProcessBuilder({"/nonexistent/jobman-process-test"}).spawn();
  EXPECT_EQ(missing.exec_error, ENOENT);
  EXPECT_EQ(wait_exit(missing.pid), 127);

  auto not_on_path = ProcessBuilder({"jobman-process-test-not-on-any-path"}).spawn();
  EXPECT_EQ(not_on_path.exec_error, ENOENT);
  EXPECT_EQ(wait_exit(not_on_path.pid), 127);

  const TempDir dir;
  const auto text = dir.write("not-executable", "echo no\n");
  auto denied = ProcessBuilder({text.string()}).spawn();
  EXPECT_EQ(denied.exec_error, EACCES);
  EXPECT_EQ(wait_exit(denied.pid), 127);
}

TEST(UtilProcess, AChildRunsInItsDirectoryAndOneThatCannotEnterItFailsWithTheSetupStatus) {
  const TempDir dir;
  auto child = shell("pwd").directory(dir.path()).output(Stream::pipe()).spawn();
  EXPECT_EQ(read_all(child.out_fd), fs::canonical(dir.path()).string() + "\n");
  EXPECT_EQ(wait_exit(child.pid), 0);

  auto missing = shell("echo ran").directory(dir / "missing").output(Stream::pipe()).spawn();
  EXPECT_EQ(missing.exec_error, ENOENT);
  EXPECT_EQ(read_all(missing.out_fd), "");
  EXPECT_EQ(wait_exit(missing.pid), 127);

  auto own_status = shell("echo ran").directory(dir / "missing").setup_failure_status(42).spawn();
  EXPECT_EQ(own_status.exec_error, ENOENT);
  EXPECT_EQ(wait_exit(own_status.pid), 42);
}

TEST(UtilProcess, FilesAreCreatedPrivateTruncatedOrAppendedToAndReadAsStdin) {
  const TempDir dir;
  const auto log = dir / "log";
  EXPECT_EQ(wait_exit(shell("echo one").output(Stream::file(log, FileMode::truncate)).spawn().pid), 0);
  EXPECT_EQ(wait_exit(shell("echo two; echo three >&2")
                          .output(Stream::file(log, FileMode::append))
                          .error(Stream::output())
                          .spawn()
                          .pid),
            0);
  EXPECT_EQ(file_text(log), "one\ntwo\nthree\n");
  struct stat info {};
  ASSERT_EQ(::stat(log.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600U);
  EXPECT_EQ(wait_exit(shell("echo four").output(Stream::file(log, FileMode::truncate)).spawn().pid), 0);
  EXPECT_EQ(file_text(log), "four\n");

  auto reader = shell("cat").input(Stream::file(log)).output(Stream::pipe()).spawn();
  EXPECT_EQ(read_all(reader.out_fd), "four\n");
  EXPECT_EQ(wait_exit(reader.pid), 0);

  auto unopenable = shell("echo ran").output(Stream::file(dir / "missing" / "log")).spawn();
  EXPECT_EQ(unopenable.exec_error, ENOENT);
  EXPECT_EQ(wait_exit(unopenable.pid), 127);
}

TEST(UtilProcess, ADescriptorOfThisProcessCanBeAStream) {
  std::array<int, 2> fds{};
  ASSERT_EQ(::pipe2(fds.data(), O_CLOEXEC), 0);
  auto child = shell("echo through").output(Stream::descriptor(fds[1])).spawn();
  close_fd(fds[1]);
  EXPECT_EQ(read_all(fds[0]), "through\n");
  EXPECT_EQ(wait_exit(child.pid), 0);
}

TEST(UtilProcess, OnlyTheDescriptorsKeptOpenReachTheProgram) {
  std::array<int, 2> kept{};
  std::array<int, 2> closed{};
  ASSERT_EQ(::pipe2(kept.data(), O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(closed.data(), O_CLOEXEC), 0);
  // bash: it takes descriptors above 9 in redirections.
  auto child = ProcessBuilder({"/bin/bash", "-c", "echo kept >&$1; echo closed 2>/dev/null >&$2; echo \"status $?\"",
                               "bash", std::to_string(kept[1]), std::to_string(closed[1])})
                   .keep_open(kept[1])
                   .output(Stream::pipe())
                   .spawn();
  close_fd(kept[1]);
  close_fd(closed[1]);
  EXPECT_EQ(read_all(kept[0]), "kept\n");
  EXPECT_EQ(read_all(closed[0]), "") << "a close-on-exec descriptor is closed in the program";
  EXPECT_NE(read_all(child.out_fd), "status 0\n");
  EXPECT_EQ(wait_exit(child.pid), 0);
}

TEST(UtilProcess, AChildLeadsItsOwnProcessGroupOrSession) {
  auto inherited = shell("read -r x").input(Stream::pipe()).spawn();
  EXPECT_EQ(stat_fields(inherited.pid)[2], std::to_string(::getpgrp()));
  close_fd(inherited.in_fd);
  EXPECT_EQ(wait_exit(inherited.pid), 1);

  auto own = shell("read -r x").input(Stream::pipe()).group(ProcessGroup::own).spawn();
  // A group of its own that it leads, in this process's session.
  EXPECT_EQ(::getpgid(own.pid), own.pid);
  EXPECT_EQ(stat_fields(own.pid)[3], std::to_string(::getsid(0)));
  close_fd(own.in_fd);
  EXPECT_EQ(wait_exit(own.pid), 1);

  auto session = shell("read -r x").input(Stream::pipe()).group(ProcessGroup::new_session).spawn();
  const auto fields = stat_fields(session.pid);
  EXPECT_EQ(fields[2], std::to_string(session.pid));
  EXPECT_EQ(fields[3], std::to_string(session.pid));
  close_fd(session.in_fd);
  EXPECT_EQ(wait_exit(session.pid), 1);
}

TEST(UtilProcess, ASignalThisProcessIgnoresCanBeGivenBackItsDefault) {
  struct sigaction ignore {};
  struct sigaction old {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ASSERT_EQ(::sigaction(SIGUSR1, &ignore, &old), 0);
  auto inheriting = shell("kill -USR1 $$; echo survived").output(Stream::pipe()).spawn();
  auto reset = shell("kill -USR1 $$; echo survived").output(Stream::pipe()).default_signals({SIGUSR1}).spawn();
  ::sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(read_all(inheriting.out_fd), "survived\n");
  EXPECT_EQ(wait_exit(inheriting.pid), 0);
  EXPECT_EQ(read_all(reset.out_fd), "");
  const auto status = wait_child(reset.pid);
  EXPECT_TRUE(status.signaled);
  EXPECT_EQ(status.code, 128 + SIGUSR1);
}

TEST(UtilProcess, AProgramNeverInheritsTheSignalsThisThreadBlocks) {
  // The daemon blocks SIGTERM to sigwait for it; the programs it starts (and their children) must still die of one.
  sigset_t term;
  sigset_t old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &term, &old), 0);
  auto child = shell("kill -TERM $$; echo survived").output(Stream::pipe()).spawn();
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  EXPECT_EQ(read_all(child.out_fd), "");
  const auto status = wait_child(child.pid);
  EXPECT_TRUE(status.signaled);
  EXPECT_EQ(status.code, 128 + SIGTERM);
}

TEST(UtilProcess, AHeldChildWaitsBeforeItsProgramUntilReleased) {
  auto child = shell("echo ran").output(Stream::pipe()).held().spawn();
  ASSERT_GT(child.pid, 0);
  ASSERT_GE(child.gate_fd, 0);
  // Still this program, not /bin/sh: it has not exec'd.
  EXPECT_EQ(fs::read_symlink("/proc/" + std::to_string(child.pid) + "/exe"), fs::read_symlink("/proc/self/exe"));
  EXPECT_EQ(release(child), 0);
  EXPECT_EQ(child.gate_fd, -1);
  EXPECT_EQ(child.report_fd, -1);
  EXPECT_EQ(read_all(child.out_fd), "ran\n");
  EXPECT_EQ(wait_exit(child.pid), 0);

  auto missing = ProcessBuilder({"/nonexistent/jobman-process-test"}).held().spawn();
  EXPECT_EQ(release(missing), ENOENT);
  EXPECT_EQ(missing.exec_error, ENOENT);
  EXPECT_EQ(wait_exit(missing.pid), 127);

  // A gate closed without a go: the child ends without running anything.
  auto dropped = shell("echo ran").output(Stream::pipe()).held().setup_failure_status(125).spawn();
  close_fd(dropped.gate_fd);
  close_fd(dropped.report_fd);
  EXPECT_EQ(read_all(dropped.out_fd), "");
  EXPECT_EQ(wait_exit(dropped.pid), 125);
}

TEST(UtilProcess, ADetachedChildRunsOnInANewSessionReparentedAwayFromThisProcess) {
  std::array<int, 2> to_child{};
  std::array<int, 2> from_child{};
  ASSERT_EQ(::pipe2(to_child.data(), O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(from_child.data(), O_CLOEXEC), 0);
  const pid_t pid = shell("echo $$; read -r x")
                        .input(Stream::descriptor(to_child[0]))
                        .output(Stream::descriptor(from_child[1]))
                        .spawn_detached();
  close_fd(to_child[0]);
  close_fd(from_child[1]);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(read_line(from_child[0]), std::to_string(pid)) << "the pid returned is the program's";
  EXPECT_EQ(::kill(pid, 0), 0) << "it runs on";
  const auto fields = stat_fields(pid);
  EXPECT_NE(fields[1], std::to_string(::getpid())) << "not this process's child";
  EXPECT_NE(fields[3], std::to_string(::getsid(0))) << "it is in a new session";
  EXPECT_NE(fields[3], std::to_string(pid)) << "which it does not lead, so it can never take a controlling terminal";
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1) << "nothing for this process to wait for";
  // Closing its stdin ends it.
  close_fd(to_child[1]);
  EXPECT_EQ(read_all(from_child[0]), "");
}

TEST(UtilProcess, ExecReplacesTheProcessWithItsEnvironmentAndReturnsTheErrorWhenItCannot) {
  EXPECT_EQ(ProcessBuilder({"/nonexistent/jobman-process-test"}).env("JOBMAN_PROCESS_TEST_EXEC", "set").exec(), ENOENT);
  EXPECT_EQ(std::getenv("JOBMAN_PROCESS_TEST_EXEC"), nullptr) << "the environment is restored";

  // In a child of this (single-threaded) test, which becomes the shell.
  std::array<int, 2> fds{};
  ASSERT_EQ(::pipe2(fds.data(), O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int error = shell("echo \"$JOBMAN_PROCESS_TEST_EXEC\"")
                          .env("JOBMAN_PROCESS_TEST_EXEC", "replaced")
                          .output(Stream::descriptor(fds[1]))
                          .exec();
    ::_exit(100 + error);
  }
  close_fd(fds[1]);
  EXPECT_EQ(read_all(fds[0]), "replaced\n");
  EXPECT_EQ(wait_exit(pid), 0);
}

TEST(UtilProcess, AChildKilledByASignalIsToldApartFromOneThatExited) {
  const auto killed = wait_child(shell("kill -KILL $$").spawn().pid);
  EXPECT_TRUE(killed.signaled);
  EXPECT_EQ(killed.code, 128 + SIGKILL);
  const auto exited = wait_child(shell("exit 137").spawn().pid);
  EXPECT_FALSE(exited.signaled);
  EXPECT_EQ(exited.code, 137);
  EXPECT_EQ(wait_exit(::getpid()), -1) << "this process is nobody's child of its own";
}

TEST(UtilProcess, PipesAreRefusedWhereNoProcessCouldReadThem) {
  EXPECT_THROW((void)shell("true").output(Stream::pipe()).spawn_detached(), std::invalid_argument);
  EXPECT_THROW((void)shell("true").input(Stream::pipe()).exec(), std::invalid_argument);
  EXPECT_THROW(shell("true").output(Stream::output()), std::invalid_argument);
  EXPECT_THROW((void)ProcessBuilder(std::vector<std::string>{}), std::invalid_argument);
}

} // namespace util_process_test
} // namespace jobman::util
