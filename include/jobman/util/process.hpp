// Child processes: one description of a child (its program and arguments, environment, working directory, standard
// streams, process group, descriptors kept across exec) and the ways to start it: spawn (a child this process waits
// for), spawn_detached (a child re-parented to init) and exec (this process becomes it).
//
// Between fork and exec, a child of a multi-threaded process may only make async-signal-safe calls: another thread
// may have held a lock (malloc's, the environment's) at the fork, and the child would wait for it forever. So the
// argument and environment arrays and every path are made before fork, and the child only opens, duplicates and
// closes descriptors, changes directory and execs. spawn() starts the children it can with posix_spawn instead, which
// does not copy this process's page tables (see spawn_quickly in process.cpp).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace jobman::util {

namespace detail {
struct ProcessPlan;
} // namespace detail

// How a file given as a standard stream is opened for writing.
enum class FileMode {
  append,   // Created when missing, written at its end.
  truncate, // Created when missing, emptied.
};

// Where one of a child's standard streams goes.
class Stream {
public:
  enum class Kind { inherit, null, pipe, file, descriptor, output };

  // This process's own stream (the default).
  static Stream inherit() { return Stream(Kind::inherit); }
  // /dev/null.
  static Stream null() { return Stream(Kind::null); }
  // A pipe; this process gets the other end (Child::in_fd, out_fd or err_fd). Not for detached children or exec.
  static Stream pipe() { return Stream(Kind::pipe); }
  // A file, opened by the child (so that it is opened, created or emptied only by a child that started): for
  // reading as stdin, otherwise for writing with `mode`, created with `permissions`.
  static Stream file(const std::filesystem::path& path, FileMode mode = FileMode::append, unsigned permissions = 0600);
  // A descriptor of this process, duplicated onto the stream (this process keeps its own).
  static Stream descriptor(int fd);
  // For stderr only: wherever stdout goes (one pipe, file or terminal for both, interleaved as written).
  static Stream output() { return Stream(Kind::output); }

  [[nodiscard]] Kind kind() const { return kind_; }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] FileMode mode() const { return mode_; }
  [[nodiscard]] unsigned permissions() const { return permissions_; }
  [[nodiscard]] int fd() const { return fd_; }

private:
  explicit Stream(Kind kind) : kind_(kind) {}

  Kind kind_;
  std::string path_;
  FileMode mode_ = FileMode::append;
  unsigned permissions_ = 0600;
  int fd_ = -1;
};

// Which process group and session a child is in.
enum class ProcessGroup {
  inherit,     // This process's (the default).
  own,         // A process group of its own, led by the child (its pid is the group's id): signalling the group
               // reaches the child and everything it starts, and nothing of this process.
  new_session, // A session of its own (setsid): also no controlling terminal, unless controlling_terminal().
};

// A started child: its pid and this process's ends of its pipes (-1 for a stream that is not a pipe). Plain data:
// the caller closes the descriptors (close_fd) and waits for the child (wait_exit).
struct Child {
  pid_t pid = -1;
  int in_fd = -1;  // The write end of its stdin.
  int out_fd = -1; // The read end of its stdout (also its stderr with Stream::output()).
  int err_fd = -1; // The read end of its stderr.
  // The errno of what kept the child from running its program (a file it could not open, a directory it could not
  // enter, the program not found or not executable), 0 once it runs it. The child has then exited (with 127 when
  // the exec failed) and still has to be waited for.
  int exec_error = 0;
  // A held child (ProcessBuilder::held()): the gate it waits on and the report of its exec; see release().
  int gate_fd = -1;
  int report_fd = -1;
};

// What a child, or this process once it has become the program, is to be.
class ProcessBuilder {
public:
  // The program `argv[0]` (a path, or a name looked up on the child's PATH) with `argv` as its arguments, argv[0]
  // included. `argv` must not be empty.
  explicit ProcessBuilder(std::vector<std::string> argv);

  // Runs the file `program` (a path, or a name looked up on PATH) instead of argv[0], which stays what the program
  // sees as its name.
  ProcessBuilder& program(std::string program);
  // Adds arguments.
  ProcessBuilder& args(const std::vector<std::string>& more);

  // Sets a variable on top of the environment it starts from; of two settings of one name, the later counts.
  ProcessBuilder& env(const std::string& name, const std::string& value);
  ProcessBuilder& env(const std::vector<std::pair<std::string, std::string>>& variables);
  ProcessBuilder& env(const std::map<std::string, std::string>& variables);
  // Removes a variable from the environment it starts from.
  ProcessBuilder& unset_env(const std::string& name);
  // Starts from an empty environment rather than this process's: the child gets only what env() sets.
  ProcessBuilder& clear_env();

  // The working directory the program starts in; the child fails (exec_error) when it cannot enter it.
  ProcessBuilder& directory(std::filesystem::path dir);

  // Its standard streams; each is inherited unless set.
  ProcessBuilder& input(Stream stream);
  ProcessBuilder& output(Stream stream);
  ProcessBuilder& error(Stream stream);

  // Its process group or session.
  ProcessBuilder& group(ProcessGroup group);
  // With ProcessGroup::new_session: its stdin (a terminal) becomes the session's controlling terminal.
  ProcessBuilder& controlling_terminal();
  // Leaves `fd`, a descriptor of this process, open in the program (every other descriptor jobman opens is closed
  // on exec). The program learns its number from its arguments.
  ProcessBuilder& keep_open(int fd);
  // The child gets `signal` when this process (the thread that started it) ends; a child whose parent ended before
  // this took effect fails without running the program.
  ProcessBuilder& parent_death_signal(int signal);
  // The program starts with the default disposition of each of `signals` (rather than this process's ignored ones).
  // Whatever this is, every program starts with no signal blocked.
  ProcessBuilder& default_signals(std::vector<int> signals);
  // The exit status of a child that fails before it tries to exec (a file it cannot open, a directory it cannot
  // enter, a parent gone): 127 unless set. A failed exec always exits with 127.
  ProcessBuilder& setup_failure_status(int status);
  // spawn() returns at once with the child waiting, before anything but its process group, until release(): time to
  // record it (its pid is known) before its program runs. Not for detached children or exec.
  ProcessBuilder& held();

  // Starts the child and returns once it runs its program or has failed to (Child::exec_error); a held child
  // returns at once. Throws jobman::Error when a pipe or the fork fails.
  [[nodiscard]] Child spawn() const;

  // Starts the program detached from this process: a first child starts a new session and, in it, the program as
  // its own child, then exits, so that the program is re-parented to init (nobody's zombie, outside this process's
  // group, and not the session's leader, so it never gets a controlling terminal). Returns the program's pid, or -1
  // when the second fork failed; the program has not necessarily started running yet. The group and parent-death
  // settings are ignored; streams may not be pipes. Throws jobman::Error when the pipe or the first fork fails.
  pid_t spawn_detached() const;

  // Replaces this process with the program (with the streams, group, directory and environment set up in this
  // process first). Returns only when that failed, with the errno of what failed; this process's environment is
  // then as it was. Streams may not be pipes.
  int exec() const;

private:
  friend struct detail::ProcessPlan;

  std::string program_;
  std::vector<std::string> argv_;
  std::vector<std::pair<std::string, std::string>> env_;
  std::vector<std::string> unset_;
  bool clear_env_ = false;
  std::filesystem::path directory_;
  Stream input_ = Stream::inherit();
  Stream output_ = Stream::inherit();
  Stream error_ = Stream::inherit();
  ProcessGroup group_ = ProcessGroup::inherit;
  bool controlling_terminal_ = false;
  std::vector<int> keep_open_;
  int parent_death_signal_ = 0;
  std::vector<int> default_signals_;
  bool reset_signals_ = false;
  int setup_failure_status_ = 127;
  bool held_ = false;
};

// Lets a held child go on to run its program. Returns once it runs it (0) or has failed to (the errno, also put in
// Child::exec_error); closes the child's gate and report. Closing the gate instead (close_fd(child.gate_fd)) makes
// the child exit without running anything.
int release(Child& child);

// How a child ended.
struct ExitStatus {
  int code = -1;         // Its exit status, or 128 + the signal that ended it; -1 when it could not be waited for.
  bool signaled = false; // A signal ended it.
};

// Waits for child `pid` to end (retrying on EINTR).
ExitStatus wait_child(pid_t pid);

// Waits for child `pid` and returns its exit status, 128 + the signal when a signal ended it, -1 when it could not
// be waited for.
int wait_exit(pid_t pid);

// Closes `fd` if open and sets it to -1.
void close_fd(int& fd);

// The first executable regular file named `program` in the directories of `path` (a PATH value, where an empty entry
// is the current directory), as execvp looks a program up; empty when there is none.
std::string find_in_path(const std::string& program, std::string_view path);

} // namespace jobman::util
