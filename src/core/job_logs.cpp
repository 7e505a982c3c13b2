#include "jobman/core/job_logs.hpp"

#include "jobman/core/jobs.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <string_view>
#include <sys/inotify.h>
#include <unistd.h>
#include <utility>

namespace jobman::core {

namespace fs = std::filesystem;

namespace {

// A file descriptor closed when it goes out of scope.
class FileDescriptor {
public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  [[nodiscard]] int get() const { return fd_; }

private:
  int fd_;
};

// Writes `lines` (whole lines, each ending in '\n') with `prefix` in front of each, control characters escaped
// when asked.
void write_lines(std::ostream& out, std::string_view raw, const std::string& prefix, LogControls controls) {
  std::string escaped;
  if (controls == LogControls::escape) {
    escaped = util::escape_controls(raw, util::LineBreaks::keep);
  }
  std::string_view lines = controls == LogControls::escape ? std::string_view(escaped) : raw;
  if (prefix.empty()) {
    out.write(lines.data(), static_cast<std::streamsize>(lines.size()));
    return;
  }
  while (!lines.empty()) {
    const auto end = lines.find('\n');
    const auto line = lines.substr(0, end == std::string_view::npos ? lines.size() : end + 1);
    out << prefix;
    out.write(line.data(), static_cast<std::streamsize>(line.size()));
    lines.remove_prefix(line.size());
  }
}

// Bytes passed on per file before the other files, the job and an interrupt get their turn.
constexpr std::size_t kFollowBudget = 1 << 20;

// How long a follower sleeps at most before it reads the job again.
constexpr int kFollowTickMs = 1000;

// Why DirectoryWatch::wait returned.
enum class Wake { changed, timed_out, interrupted };

// Files written or created in one directory, through an inotify descriptor to wait on.
class DirectoryWatch {
public:
  DirectoryWatch() : inotify_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (inotify_.get() < 0) {
      throw Error(std::string("inotify: ") + std::strerror(errno));
    }
  }

  // Watches `dir` from now on instead of the directory watched so far; while `dir` does not exist, its parent, to
  // wake up when it is created. True when `dir` itself is watched.
  bool watch(const fs::path& dir) {
    if (descriptor_ >= 0 && watched_ == dir) {
      return true;
    }
    for (const auto& candidate : {dir, dir.parent_path()}) {
      const int descriptor = ::inotify_add_watch(inotify_.get(), candidate.c_str(),
                                                 IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
      if (descriptor < 0) {
        continue;
      }
      if (descriptor_ >= 0 && descriptor_ != descriptor) {
        ::inotify_rm_watch(inotify_.get(), descriptor_);
      }
      descriptor_ = descriptor;
      watched_ = candidate;
      return candidate == dir;
    }
    return false;
  }

  // Waits until a file in the directory changes, `interrupt_fd` is readable, or `timeout_ms` passes.
  Wake wait(int timeout_ms, int interrupt_fd) {
    std::array<pollfd, 2> fds{{{inotify_.get(), POLLIN, 0}, {interrupt_fd, POLLIN, 0}}};
    const int ready = ::poll(fds.data(), interrupt_fd >= 0 ? 2 : 1, timeout_ms);
    if (ready < 0 && errno != EINTR) {
      throw Error(std::string("poll: ") + std::strerror(errno));
    }
    if (ready <= 0) {
      return Wake::timed_out;
    }
    if (fds[1].revents != 0) {
      return Wake::interrupted;
    }
    // Only the wake-up matters, not which file: drain the events.
    alignas(inotify_event) char events[4096];
    while (::read(inotify_.get(), events, sizeof events) > 0) {
    }
    return Wake::changed;
  }

private:
  FileDescriptor inotify_;
  fs::path watched_;
  int descriptor_ = -1;
};

// True when `fd` is readable now.
bool readable_now(int fd) {
  if (fd < 0) {
    return false;
  }
  pollfd poll_fd{fd, POLLIN, 0};
  return ::poll(&poll_fd, 1, 0) > 0;
}

std::vector<LogReader> readers_for(const LogSelection& selection) {
  std::vector<LogReader> readers;
  if (selection.attempt < 1) {
    return readers;
  }
  const auto dir = attempt_directory(selection.job_id, selection.attempt);
  const bool prefixed = selection.prefix == WorkerPrefix::always || selection.workers.size() > 1;
  readers.reserve(selection.workers.size());
  for (const int worker : selection.workers) {
    readers.emplace_back(log_path(dir, selection.kind, worker),
                         prefixed ? "[w" + std::to_string(worker) + "] " : std::string(), selection.controls);
  }
  return readers;
}

} // namespace

fs::path log_path(const fs::path& attempt_dir, LogKind kind, int worker) {
  return attempt_dir / ((kind == LogKind::setup ? "setup-" : "worker-") + std::to_string(worker) + ".log");
}

fs::path stacks_path(const fs::path& attempt_dir, int worker) {
  return attempt_dir / ("stacks-" + std::to_string(worker) + ".txt");
}

LogReader::LogReader(fs::path path, std::string prefix, LogControls controls)
    : path_(std::move(path)), prefix_(std::move(prefix)), controls_(controls) {}

LogCopy LogReader::copy_new_lines(std::ostream& out, LogState state, std::size_t budget) {
  const FileDescriptor fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      return {};
    }
    throw Error("cannot read " + path_.string() + ": " + std::strerror(errno));
  }
  LogCopy copy;
  std::string pending; // Bytes read after the last newline.
  std::array<char, 65536> chunk{};
  bool at_end = false;
  while (copy.bytes < budget) {
    const auto offset = static_cast<off_t>(offset_ + copy.bytes + pending.size());
    const ssize_t got = ::pread(fd.get(), chunk.data(), chunk.size(), offset);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0) {
      throw Error("cannot read " + path_.string() + ": " + std::strerror(errno));
    }
    if (got == 0) {
      at_end = true;
      break;
    }
    pending.append(chunk.data(), static_cast<std::size_t>(got));
    const auto last = pending.rfind('\n');
    if (last == std::string::npos) {
      continue;
    }
    write_lines(out, std::string_view(pending).substr(0, last + 1), prefix_, controls_);
    copy.bytes += last + 1;
    pending.erase(0, last + 1);
  }
  if (at_end && state == LogState::final && !pending.empty()) {
    pending += '\n';
    write_lines(out, pending, prefix_, controls_);
    copy.bytes += pending.size() - 1;
  }
  copy.more = !at_end;
  offset_ += copy.bytes;
  return copy;
}

void print_logs(const LogSelection& selection, LogState state, std::ostream& out) {
  for (auto& reader : readers_for(selection)) {
    reader.copy_new_lines(out, state);
  }
  out.flush();
}

FollowEnd follow_logs(const store::JobStore& store, LogSelection selection, std::ostream& out, std::ostream& notice,
                      int interrupt_fd) {
  DirectoryWatch watch;
  auto readers = readers_for(selection);
  while (true) {
    // The job is read before the files: lines written before it ended are then read below.
    const auto job = store.jobs().get(selection.job_id);
    const bool attempt_over = job.attempt > selection.attempt;
    const bool job_over = domain::is_terminal(job.phase);
    if (selection.attempt >= 1) {
      // Until the attempt's directory exists, its creation wakes the follower (or the one-second tick does).
      watch.watch(attempt_directory(selection.job_id, selection.attempt));
    }
    LogCopy copied;
    for (auto& reader : readers) {
      const auto copy = reader.copy_new_lines(out, LogState::growing, kFollowBudget);
      copied.bytes += copy.bytes;
      copied.more = copied.more || copy.more;
    }
    out.flush();
    if (!out) {
      // Standard output went away (a closed pipe with SIGPIPE ignored): nobody is reading any more.
      throw Error("cannot write the logs: the output is closed");
    }
    if (readable_now(interrupt_fd)) {
      return FollowEnd::interrupted;
    }
    if (copied.more) {
      continue;
    }
    if (attempt_over || job_over) {
      if (copied.bytes > 0) {
        // Lines may still be arriving from the last moments of the attempt: read once more before moving on.
        continue;
      }
      for (auto& reader : readers) {
        reader.copy_new_lines(out, LogState::final);
      }
      out.flush();
      if (!attempt_over) {
        return FollowEnd::finished;
      }
      ++selection.attempt;
      readers = readers_for(selection);
      notice << "jobman: attempt " << selection.attempt << " started" << std::endl;
      continue;
    }
    if (watch.wait(kFollowTickMs, interrupt_fd) == Wake::interrupted) {
      return FollowEnd::interrupted;
    }
  }
}

} // namespace jobman::core
