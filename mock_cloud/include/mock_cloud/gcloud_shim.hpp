// The mock cloud's stand-in for `gcloud`: the TPU VM ssh and scp commands, auth and config, against the mock.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::mock {

// The workers a `--worker` value selects among `count`: "all", "3", "1,3", "1-3", or a mix ("0,2-3"), in order
// and without repeats. Returns nullopt with `error` set when the value is malformed or names a worker out of range.
std::optional<std::vector<int>> parse_worker_selection(std::string_view spec, int count, std::string* error);

// A `[USER@]NODE:PATH` scp operand split into its parts; nullopt for a local path.
struct RemotePath {
  std::string user; // Empty when not given.
  std::string node; // The TPU name.
  std::string path; // Relative to the remote HOME unless absolute.
};

// Splits an scp operand; a local path (no colon before the first slash) gives nullopt.
std::optional<RemotePath> parse_remote_path(std::string_view operand);

// Runs the gcloud command line `args` (without argv[0]); returns the process exit status.
int run_gcloud(const std::vector<std::string>& args);

} // namespace jobman::mock
