// Libraries opened on first use: nothing happens until a function is asked for; then the library's own function is
// returned, and a library or function that is not there is an error that names it and its package.
#include "jobman/util/error.hpp"
#include "jobman/util/shared_library.hpp"

#include <cmath>
#include <gtest/gtest.h>

namespace jobman::util {
namespace util_shared_library_test {

TEST(SharedLibrary, OpensOnTheFirstLookupAndReturnsTheLibrarysOwnFunction) {
  SharedLibrary libm("libm.so.6", "libc6");
  EXPECT_FALSE(libm.opened());
  const auto cosine = function<double (*)(double)>(libm, "cos");
  EXPECT_TRUE(libm.opened());
  EXPECT_EQ(cosine(0.5), std::cos(0.5));
  EXPECT_EQ(function<double (*)(double, double)>(libm, "pow")(2.0, 10.0), 1024.0);
}

TEST(SharedLibrary, AMissingLibraryOrFunctionIsAnErrorThatNamesIt) {
  SharedLibrary missing("libjobman-absent.so.7", "jobman-absent7");
  try {
    missing.symbol("anything");
    FAIL() << "opened a library that does not exist";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("cannot load libjobman-absent.so.7 (Debian package jobman-absent7)"), std::string::npos)
        << message;
    EXPECT_EQ(e.code(), ExitCode::error);
  }
  EXPECT_FALSE(missing.opened());

  SharedLibrary libm("libm.so.6", "libc6");
  try {
    libm.symbol("jobman_no_such_function");
    FAIL() << "found a function that does not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("libm.so.6 has no function jobman_no_such_function"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(libm.opened()) << "the library itself was there";
}

} // namespace util_shared_library_test
} // namespace jobman::util
