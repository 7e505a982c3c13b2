// ensure_directory keeps what it makes, and what it finds, private when asked for mode 0700.
#include "jobman/util/system.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace jobman::util {
namespace util_private_directory_test {

unsigned mode_of(const std::filesystem::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 ? static_cast<unsigned>(info.st_mode & 07777) : 07777U;
}

TEST(EnsureDirectory, MissingParentsGetTheModeUnderALooseUmask) {
  const test::TempDir dir;
  const mode_t old = ::umask(002);
  ensure_directory(dir / "home" / "jobs" / "000001" / "attempt-1", 0700);
  ::umask(old);
  for (const auto* sub : {"home", "home/jobs", "home/jobs/000001", "home/jobs/000001/attempt-1"}) {
    EXPECT_EQ(mode_of(dir / sub), 0700U) << sub;
  }
}

TEST(EnsureDirectory, AnExistingDirectoryMoreOpenThanAskedIsClosed) {
  const test::TempDir dir;
  std::filesystem::create_directory(dir / "home");
  ::chmod((dir / "home").c_str(), 0775);
  ensure_directory(dir / "home", 0700);
  EXPECT_EQ(mode_of(dir / "home"), 0700U);
  // One that is already stricter keeps its mode.
  ::chmod((dir / "home").c_str(), 0500);
  ensure_directory(dir / "home", 0700);
  EXPECT_EQ(mode_of(dir / "home"), 0500U);
  ::chmod((dir / "home").c_str(), 0700);
}

} // namespace util_private_directory_test
} // namespace jobman::util
