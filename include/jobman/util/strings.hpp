// Small string helpers that know nothing about jobs.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::util {

// Splits on every occurrence of `sep`; empty fields are kept.
std::vector<std::string> split(std::string_view text, char sep);

// Joins with `sep` between items.
std::string join(std::span<const std::string> items, std::string_view sep);

// Removes ASCII whitespace at both ends.
std::string_view trim(std::string_view text);

// A copy with the ASCII letters A-Z lower-cased; every other byte is kept (UTF-8 text stays valid).
std::string to_lower(std::string_view text);
// A copy with the ASCII letters a-z upper-cased; every other byte is kept.
std::string to_upper(std::string_view text);

// Edit distance (insert, delete, substitute, transpose), for suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is close enough to be a likely typo.
std::optional<std::string> closest_match(std::string_view word, std::span<const std::string> candidates);

// Shell-style glob: `*`, `?` and `[...]` classes; whole-string match.
bool glob_match(std::string_view pattern, std::string_view text);

// Parses a whole decimal integer (optional sign); nullopt on anything else or overflow.
std::optional<long long> parse_int(std::string_view text);

// Parses "90", "90s", "5m", "2h", "1d", "1h30m" into seconds; nullopt when malformed.
std::optional<long long> parse_duration_seconds(std::string_view text);

// Formats seconds compactly: "45s", "3m", "2h05m", "3d04h".
std::string format_duration(long long seconds);

// What escape_controls does with newlines and tabs.
enum class LineBreaks { keep, escape };

// Text that cannot drive a terminal: C0 controls (ESC, CR, BEL, ...) and DEL become "\xNN", C1 controls (U+0080 to
// U+009F) and bidirectional overrides "\uNNNN", bytes that are not UTF-8 "\xNN"; valid UTF-8 text is kept, and so
// are '\n' and '\t' with LineBreaks::keep.
std::string escape_controls(std::string_view text, LineBreaks breaks);

// True for a store location that names a PostgreSQL server ("postgresql://..." or "postgres://...").
bool is_postgres_url(std::string_view location);

// A connection URL without its password (from the user part or a password= parameter), for messages and listings.
std::string without_password(std::string_view url);

} // namespace jobman::util
