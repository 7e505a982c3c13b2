// The logs a job's workers left on this machine: printed once, or followed as they grow and from attempt to attempt.
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace jobman::core {

// Which of an attempt's logs: the command's output (worker-<w>.log) or the setup's (setup-<w>.log).
enum class LogKind { worker, setup };

// <attempt_dir>/worker-<w>.log or <attempt_dir>/setup-<w>.log.
std::filesystem::path log_path(const std::filesystem::path& attempt_dir, LogKind kind, int worker);

// The file beside an attempt's logs that keeps what a stalled attempt's processes were doing on one worker
// (remote::stacks): <attempt_dir>/stacks-<w>.txt.
std::filesystem::path stacks_path(const std::filesystem::path& attempt_dir, int worker);

// Whether a log may still grow. A growing log's last line without its newline is still being written; a final
// log's is the end of its output.
enum class LogState { growing, final };

// What one LogReader::copy_new_lines call did.
struct LogCopy {
  std::size_t bytes = 0; // Bytes of the file passed on.
  bool more = false;     // It stopped at its byte budget before the end of the file.
};

// Reads one log file from where the last read stopped and passes on whole lines only, bytes as they are. A file
// that does not exist (yet) has no lines.
// Whether a log's bytes go out as the workers wrote them, or with terminal controls made visible (for a terminal:
// worker output must not move the cursor, retitle the window or clear the screen).
enum class LogControls { pass, escape };

class LogReader {
public:
  // Reads `path`; every line written gets `prefix` ("[w1] ") in front of it, its control characters escaped or not.
  LogReader(std::filesystem::path path, std::string prefix, LogControls controls = LogControls::pass);

  // Writes to `out` the complete lines added since the last call, stopping at the end of the read (64 KiB at most)
  // that brings them to `budget` bytes. When the whole rest was read, a final log's last line without its newline is
  // written too, with a newline added. Throws jobman::Error when the file exists but cannot be read.
  LogCopy copy_new_lines(std::ostream& out, LogState state, std::size_t budget = SIZE_MAX);

  // The file.
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
  std::string prefix_;
  LogControls controls_;
  std::uint64_t offset_ = 0; // The byte after the last line passed on.
};

// When the lines of a selection start with their worker's "[w<N>] ".
enum class WorkerPrefix {
  when_several, // Only when several workers are selected.
  always,       // Always, one worker too (`--worker all` of a one-host job).
};

// Which logs to print: one kind, for some workers, starting at one attempt.
struct LogSelection {
  std::int64_t job_id = 0;
  int attempt = 1; // 1, 2, ...; 0 (following only) waits for the job's first attempt.
  LogKind kind = LogKind::worker;
  std::vector<int> workers; // In the order printed; each line is prefixed "[w<N>] " as `prefix` says.
  WorkerPrefix prefix = WorkerPrefix::when_several;
  LogControls controls = LogControls::pass; // What happens to terminal control characters in the lines.
};

// Prints the selected logs of the attempt as they are now: whole lines only while the attempt may still write
// (`state` growing), everything when it is over.
void print_logs(const LogSelection& selection, LogState state, std::ostream& out);

// How following ended.
enum class FollowEnd { finished, interrupted };

// Prints the selected logs, then the lines appended to them as they come, until the job is in a terminal phase and
// its logs have stopped growing. When the job starts a newer attempt, the current one is printed to its end and the
// newer one's logs follow, announced on `notice` ("jobman: attempt 3 started"). Wakes up when a file in the attempt's
// directory is written (inotify), and at least once a second to read the job again from `store`. Ends early,
// returning FollowEnd::interrupted, when `interrupt_fd` becomes readable. Throws domain::NoSuchJobError when the job is
// removed meanwhile, and jobman::Error when `out` can no longer be written.
FollowEnd follow_logs(const store::JobStore& store, LogSelection selection, std::ostream& out, std::ostream& notice,
                      int interrupt_fd);

} // namespace jobman::core
