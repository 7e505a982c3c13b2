// The mock's reaper: a small process of its own that outlives jobman-mock-cloud however it ends (SIGKILL included)
// and then ends every process the mock's worker hosts still run, so that no workload outlives its slice.
#pragma once

#include <filesystem>
#include <string>

namespace jobman::mock {

// The option that makes jobman-mock-cloud the reaper: `jobman-mock-cloud --reap-workloads PREFIX [SCRATCH_DIR]`.
inline constexpr const char* kReapWorkloadsOption = "--reap-workloads";

// Starts the reaper for the hosts whose markers begin with `marker_prefix` (and, when not empty, the scratch
// directory to remove after them): this very program run with kReapWorkloadsOption, in a session of its own, its
// stdin a pipe whose only writer is this process. Returns that writer, close-on-exec, for this process to hold
// until it exits; throws jobman::Error when the reaper cannot be started.
int start_workload_reaper(const std::string& marker_prefix, const std::filesystem::path& scratch_dir);

// The reaper's body: ignores SIGINT, SIGTERM and SIGHUP, waits for end of file on stdin (the mock is gone), then
// sends SIGKILL to every process whose marker begins with `marker_prefix` until none is left (at most ten seconds)
// and removes `scratch_dir` when it is not empty. Returns the exit status, 0.
int reap_workloads(const std::string& marker_prefix, const std::filesystem::path& scratch_dir);

} // namespace jobman::mock
