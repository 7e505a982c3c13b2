// Checkpoint files: the exact training state in a self-checking binary format, written atomically into a
// directory (typically a bucket mounted on every worker) and read back newest valid first.
#pragma once

#include "systolic/model.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::systolic {

// What a checkpoint holds: the run it belongs to and the state to continue from.
struct Checkpoint {
  ModelConfig config;  // The run's identity; a resumed run must have the same.
  TrainingState state; // Step, weights and momentum buffers, bit for bit.
};

// The file format's version this code writes. It also reads version 1, which has no data shift (0 is read).
inline constexpr std::uint32_t kCheckpointVersion = 2;

// The bytes of a checkpoint file: magic, version, step, payload size, payload, CRC-32 (see docs/SYSTOLIC.md).
std::string encode_checkpoint(const Checkpoint& checkpoint);

// A checkpoint read from bytes, or why those bytes are not one.
struct DecodedCheckpoint {
  std::optional<Checkpoint> checkpoint; // Set when the bytes are a complete, intact checkpoint.
  std::string defect;                   // Otherwise what is wrong (truncated, checksum mismatch, ...).
};

// Parses and verifies `bytes`; never throws for malformed input.
DecodedCheckpoint decode_checkpoint(std::string_view bytes);

// A failure to write or list checkpoints (I/O errors); the message names the file.
class CheckpointError : public std::runtime_error {
public:
  // An error with `message`.
  explicit CheckpointError(const std::string& message) : std::runtime_error(message) {}
};

// A file in the directory named like a checkpoint.
struct CheckpointFile {
  std::uint64_t step = 0;     // The step in its name.
  std::filesystem::path path; // Where it is.
};

// A checkpoint that was read and verified.
struct LoadedCheckpoint {
  Checkpoint checkpoint;      // Its content.
  std::filesystem::path path; // The file it came from.
};

// A checkpoint file that could not be used.
struct SkippedCheckpoint {
  std::filesystem::path path; // The file.
  std::string reason;         // Why it was skipped.
};

// The checkpoints of one run: files ckpt-<step>.bin in one directory (files in its subdirectories are not).
class CheckpointDirectory {
public:
  // The directory `dir` (it need not exist yet).
  explicit CheckpointDirectory(std::filesystem::path dir);

  // The directory.
  [[nodiscard]] const std::filesystem::path& path() const { return dir_; }
  // The file name of the checkpoint of `step` (zero-padded so names sort by step).
  static std::string file_name(std::uint64_t step);
  // Files named like checkpoints, newest (highest step) first; empty when the directory does not exist. Throws
  // CheckpointError when it exists but cannot be read.
  [[nodiscard]] std::vector<CheckpointFile> list() const;
  // Reads checkpoints newest first and returns the first intact one whose step matches its name and that `usable`
  // (when given) accepts; every damaged file passed over is reported to `on_skip` (what `usable` refuses is not).
  // Nothing when there is none.
  [[nodiscard]] std::optional<LoadedCheckpoint>
  load_newest_valid(const std::function<void(const SkippedCheckpoint&)>& on_skip,
                    const std::function<bool(const LoadedCheckpoint&)>& usable = nullptr) const;
  // Writes `checkpoint` atomically: a temporary file in the directory, fsync, rename over the final name, fsync of
  // the directory. Creates the directory when needed. Returns the final path; throws CheckpointError.
  std::filesystem::path save(const Checkpoint& checkpoint);
  // Deletes the oldest checkpoint files until at most `keep` with a step up to `newest_step` remain; files of
  // later steps are left alone. Returns the deleted paths.
  std::vector<std::filesystem::path> prune(std::size_t keep, std::uint64_t newest_step);
  // Deletes temporary files left by a writer that died mid-write; returns them.
  std::vector<std::filesystem::path> remove_temporaries();
  // Renames a bad checkpoint file to <name>.invalid so that it no longer shadows older ones; returns the new path,
  // or nothing when the rename failed.
  std::optional<std::filesystem::path> set_aside(const std::filesystem::path& file);
  // Moves a checkpoint a rollback discards into the subdirectory rolled-back/ (made when needed; a file of the same
  // name there from an earlier rollback is replaced), where no resume looks; returns the new path, or nothing when
  // the move failed.
  std::optional<std::filesystem::path> roll_back(const std::filesystem::path& file);

private:
  std::filesystem::path dir_; // The directory.
};

} // namespace jobman::systolic
