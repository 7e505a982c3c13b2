// The mock's admin token: a random secret in a private file that the /mock/v1 admin and exec routes require.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace jobman::mock {

// The admin token file under a mock state directory: <state-dir>/admin-token.
std::filesystem::path admin_token_file(const std::filesystem::path& state_dir);

// The token in `file` when it is a regular file of this user's with mode 0600 or stricter holding a well-formed
// token; otherwise a fresh one (256 random bits, hex) written there atomically with mode 0600. Throws jobman::Error
// when the file cannot be read or written.
std::string load_or_create_admin_token(const std::filesystem::path& file);

// True when `authorization_header` is "Bearer <token>" with exactly `expected` (compared in constant time);
// an empty `expected` matches nothing.
bool admin_token_matches(std::string_view authorization_header, std::string_view expected);

} // namespace jobman::mock
