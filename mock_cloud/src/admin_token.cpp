#include "mock_cloud/admin_token.hpp"

#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

namespace jobman::mock {

namespace {

constexpr std::size_t kTokenBytes = 32;

bool well_formed(std::string_view token) {
  return token.size() == 2 * kTokenBytes && token.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// The file's token when the file is private and ours; empty otherwise (including when it does not exist).
std::string read_private_token(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ELOOP) {
      return {};
    }
    throw Error("cannot read the admin token file " + file.string() + ": " + std::strerror(errno));
  }
  struct stat info {};
  std::string text;
  if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_uid == ::geteuid() && (info.st_mode & 077) == 0 &&
      info.st_size < 4096) {
    std::array<char, 4096> buffer{};
    const auto n = ::read(fd, buffer.data(), buffer.size());
    if (n > 0) {
      text.assign(buffer.data(), static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  const auto token = util::trim(text);
  return well_formed(token) ? std::string(token) : std::string();
}

} // namespace

std::filesystem::path admin_token_file(const std::filesystem::path& state_dir) {
  return state_dir / "admin-token";
}

std::string load_or_create_admin_token(const std::filesystem::path& file) {
  if (auto token = read_private_token(file); !token.empty()) {
    return token;
  }
  std::array<unsigned char, kTokenBytes> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    throw Error("cannot make an admin token: the random generator failed");
  }
  static constexpr const char* kHex = "0123456789abcdef";
  std::string token;
  for (const unsigned char byte : bytes) {
    token += kHex[byte >> 4];
    token += kHex[byte & 15];
  }
  // A new file replaces one that was not private (its token may have been read) or not ours. It is made with
  // O_EXCL, so a file someone else put in its place first is never written to.
  const auto tmp = file.string() + ".new." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error("cannot write the admin token file " + file.string() + ": " + std::strerror(errno));
  }
  const std::string text = token + "\n";
  const bool written = ::fchmod(fd, 0600) == 0 &&
                       ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int saved = errno;
  if (::close(fd) != 0 || !written || ::rename(tmp.c_str(), file.c_str()) != 0) {
    const int reason = written ? errno : saved;
    ::unlink(tmp.c_str());
    throw Error("cannot write the admin token file " + file.string() + ": " + std::strerror(reason));
  }
  return token;
}

bool admin_token_matches(std::string_view authorization_header, std::string_view expected) {
  constexpr std::string_view prefix = "Bearer ";
  if (expected.empty() || !authorization_header.starts_with(prefix)) {
    return false;
  }
  const auto token = util::trim(authorization_header.substr(prefix.size()));
  return token.size() == expected.size() && CRYPTO_memcmp(token.data(), expected.data(), expected.size()) == 0;
}

} // namespace jobman::mock
