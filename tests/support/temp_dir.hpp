// A fresh temporary directory per test, removed on success and kept (and named) on failure.
#pragma once

#include <filesystem>
#include <string>

namespace jobman::test {

// Creates /tmp/jobman-test-XXXXXX; the destructor removes it unless the current test failed.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // The directory.
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  // A path inside it.
  [[nodiscard]] std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  // Writes `content` to `name` inside the directory; returns the full path.
  std::filesystem::path write(const std::string& name, const std::string& content) const;

private:
  std::filesystem::path path_;
};

// The whole text of a file; "" when it cannot be read (not there yet, say).
std::string file_text(const std::filesystem::path& path);

} // namespace jobman::test
