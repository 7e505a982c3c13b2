// The process's surroundings: environment, user, well-known directories, files, clock, terminal.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace jobman::util {

// The value of an environment variable; nullopt when unset or empty.
std::optional<std::string> getenv_nonempty(const char* name);

// The login name of the current user (USER, then the password database, then the uid).
std::string current_user();

// This machine's host name (gethostname); "" when it cannot be read.
std::string hostname();

// The user's home directory (HOME, then the password database).
std::filesystem::path home_dir();

// Replaces a leading "~" or "~/" with the home directory.
std::filesystem::path expand_user(const std::string& path);

// The directory of the running executable (from /proc/self/exe; the working directory when that cannot be read).
std::filesystem::path executable_dir();

// Creates `dir` and its missing parents with `mode` (e.g. 0700), and takes from an existing `dir` of this user's
// any permission bit `mode` lacks.
void ensure_directory(const std::filesystem::path& dir, unsigned mode);

// Reads a whole file; throws jobman::Error naming the path on failure.
std::string read_file(const std::filesystem::path& path);

// The last `max_bytes` of a file (all of a smaller one), and the file's size; nullopt when it cannot be opened.
struct FileTail {
  std::string text;
  std::uint64_t size = 0;
};
std::optional<FileTail> read_file_tail(const std::filesystem::path& path, std::uint64_t max_bytes);

// Writes a file atomically (temporary, fsync, rename) with the given mode.
void write_file_atomic(const std::filesystem::path& path, const std::string& content, unsigned mode);

// Milliseconds since the Unix epoch (wall clock).
std::int64_t now_ms();

// "2026-11-22T05:00:47Z" (UTC, second precision).
std::string format_utc(std::int64_t epoch_ms);

// Epoch milliseconds from an RFC 3339 UTC time ("2026-11-22T05:00:47Z", or with fractional seconds, which are
// dropped); nullopt when `text` is anything else.
std::optional<std::int64_t> parse_utc(std::string_view text);

// "2026-11-22 05:00:47" in local time, for people.
std::string format_local(std::int64_t epoch_ms);

// True when the file descriptor is a terminal.
bool is_terminal(int fd);

// Colour is used on a terminal unless NO_COLOR is set (any value) or TERM=dumb.
bool color_enabled(int fd);

} // namespace jobman::util
