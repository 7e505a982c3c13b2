// The shape of a job config: which keys each section accepts, for validation and suggestions.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace jobman::config::detail {

// Whether a path part is a list index ("0", "12"): digits only, fewer than ten of them.
bool is_list_index(std::string_view text);

// The keys a section accepts: "" for the top level, "tpu", "recovery.backoff", "ssh.identities[]"...
// Empty for sections whose keys are free (vars, tpu.metadata, tpu.labels, sweep) or unknown paths.
std::span<const std::string> known_keys(std::string_view section);

// True for sections whose keys the user chooses: vars, tpu.metadata, tpu.labels, sweep.
bool has_free_keys(std::string_view section);

// A problem with a dotted key path: which component is wrong (0-based) and a did-you-mean hint.
struct KeyPathProblem {
  std::size_t component = 0; // Index of the first unknown component.
  std::string message;       // "unknown key", "unknown section", ...
  std::string hint;          // "did you mean 'zone'?" or empty.
};

// Checks that a dotted path ("tpu.zone", "vars.lr", "tpu.labels.team") names a key jobman knows.
std::optional<KeyPathProblem> check_key_path(std::string_view path);

// A did-you-mean hint for `word` among `candidates`, or a list of the valid ones when nothing is close.
std::string suggestion(std::string_view word, std::span<const std::string> candidates);

// What is wrong with a zone name (message, hint), or nullopt when it has the form region-zone ("us-central2-b").
std::optional<std::pair<std::string, std::string>> zone_problem(const std::string& zone);

// Seconds written exactly and compactly for configs: 30 -> "30s", 5400 -> "1h30m", 0 -> "0s".
std::string exact_duration(long long seconds);

} // namespace jobman::config::detail
