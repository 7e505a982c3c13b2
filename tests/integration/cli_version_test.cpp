#include "support/run.hpp"

#include <gtest/gtest.h>

namespace jobman::test {
namespace cli_version_test {

TEST(CliVersion, PrintsTheProjectVersion) {
  const auto r = run_jobman({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string("jobman ") + JOBMAN_VERSION + "\n");
}

} // namespace cli_version_test
} // namespace jobman::test
