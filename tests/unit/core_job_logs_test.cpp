// Reading a worker's log a whole line at a time, as `jobman logs` does.
#include "jobman/core/job_logs.hpp"
#include "support/temp_dir.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

namespace jobman::core {
namespace core_job_logs_test {

void append(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << bytes;
}

// What one copy_new_lines call writes.
std::string copied(LogReader& reader, LogState state = LogState::growing) {
  std::ostringstream out;
  reader.copy_new_lines(out, state);
  return out.str();
}

TEST(CoreLogReader, PassesOnWholeLinesOnlyAndTheRestOnceItsNewlineCame) {
  const test::TempDir dir;
  const auto path = dir / "worker-0.log";
  LogReader reader(path, "");
  EXPECT_EQ(copied(reader), "") << "a log not written yet has no lines";
  append(path, "one\ntwo\npar");
  EXPECT_EQ(copied(reader), "one\ntwo\n");
  EXPECT_EQ(copied(reader), "") << "the unfinished line waits for its newline";
  append(path, "tial\nthree\n");
  EXPECT_EQ(copied(reader), "partial\nthree\n");
  EXPECT_EQ(copied(reader), "");
}

TEST(CoreLogReader, AFinalLogsLastLineWithoutNewlineIsWrittenWithOne) {
  const test::TempDir dir;
  const auto path = dir / "worker-0.log";
  append(path, "done\nlast words");
  LogReader reader(path, "");
  EXPECT_EQ(copied(reader, LogState::final), "done\nlast words\n");
  EXPECT_EQ(copied(reader, LogState::final), "") << "nothing is written twice";
}

TEST(CoreLogReader, EveryLineGetsThePrefixAndBytesPassUnchanged) {
  const test::TempDir dir;
  const auto path = dir / "worker-1.log";
  using namespace std::string_literals;
  const auto colour = "\x1b[31mred\x1b[0m\r\n"s;
  const auto binary = "\ttab \xff\xfe\0 nul\n"s;
  append(path, colour + binary + "plain\n");
  LogReader reader(path, "[w1] ");
  EXPECT_EQ(copied(reader), "[w1] " + colour + "[w1] " + binary + "[w1] plain\n");
}

TEST(CoreLogReader, ABudgetSplitsABigLogIntoCallsThatTogetherWriteItOnce) {
  const test::TempDir dir;
  const auto path = dir / "worker-0.log";
  std::string whole;
  for (int i = 0; i < 20000; ++i) {
    whole += "line " + std::to_string(i) + " of a long log\n";
  }
  append(path, whole);
  LogReader reader(path, "");
  std::ostringstream out;
  int calls = 0;
  LogCopy copy;
  do {
    copy = reader.copy_new_lines(out, LogState::growing, 1);
    ++calls;
    ASSERT_LT(calls, 1000);
  } while (copy.more);
  EXPECT_GT(calls, 2) << "a budget of one byte stops after each read";
  EXPECT_EQ(out.str(), whole);
}

TEST(CoreLogPaths, WorkerAndSetupLogsOfAnAttempt) {
  EXPECT_EQ(log_path("/h/jobs/000042/attempt-2", LogKind::worker, 3), "/h/jobs/000042/attempt-2/worker-3.log");
  EXPECT_EQ(log_path("/h/jobs/000042/attempt-2", LogKind::setup, 0), "/h/jobs/000042/attempt-2/setup-0.log");
}

} // namespace core_job_logs_test
} // namespace jobman::core
