// Base64url without padding: the encoding of service-account assertions, the mock's JWTs and access tokens.
#include "jobman/util/base64url.hpp"

#include <gtest/gtest.h>
#include <string>

namespace jobman::util {
namespace util_base64url_test {

TEST(Base64Url, RoundTripsEveryLengthWithoutPadding) {
  const std::string bytes("\x00\xff\xfe\x10 jobman?>~", 14);
  ASSERT_EQ(bytes[0], '\0');
  ASSERT_EQ(bytes.back(), '~');
  for (std::size_t n = 0; n <= bytes.size(); ++n) {
    const std::string part = bytes.substr(0, n);
    const std::string encoded = base64url_encode(part);
    EXPECT_EQ(encoded.find('='), std::string::npos);
    EXPECT_EQ(encoded.find('+'), std::string::npos);
    EXPECT_EQ(encoded.find('/'), std::string::npos);
    EXPECT_EQ(base64url_decode(encoded), part) << "length " << n;
  }
  EXPECT_EQ(base64url_encode("\xfb\xff"), "-_8");
}

TEST(Base64Url, EncodesTheRfc4648TestVectors) {
  EXPECT_EQ(base64url_encode(""), "");
  EXPECT_EQ(base64url_encode("f"), "Zg");
  EXPECT_EQ(base64url_encode("fo"), "Zm8");
  EXPECT_EQ(base64url_encode("foo"), "Zm9v");
  EXPECT_EQ(base64url_encode("foob"), "Zm9vYg");
  EXPECT_EQ(base64url_encode("fooba"), "Zm9vYmE");
  EXPECT_EQ(base64url_encode("foobar"), "Zm9vYmFy");
}

TEST(Base64Url, RefusesPaddingForeignCharactersAndImpossibleLengths) {
  EXPECT_FALSE(base64url_decode("YQ=="));
  EXPECT_FALSE(base64url_decode("a+b/"));
  EXPECT_FALSE(base64url_decode("abcde"));
  EXPECT_FALSE(base64url_decode("YR")); // Non-zero leftover bits.
  EXPECT_EQ(base64url_decode("YQ"), "a");
}

} // namespace util_base64url_test
} // namespace jobman::util
