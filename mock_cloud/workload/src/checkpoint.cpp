#include "systolic/checkpoint.hpp"

#include "systolic/hashing.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <sstream>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>
#include <utility>

namespace jobman::systolic {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMagic = "SYSTCKPT";
constexpr std::size_t kHeaderSize = 32;    // Magic 8, version 4, reserved 4, step 8, payload size 8.
constexpr std::size_t kTrailerSize = 4;    // CRC-32.
constexpr std::size_t kIdentitySize = 32;  // dim 4, batch 4, seed 8, learning rate 8, momentum 8.
constexpr std::size_t kShiftSize = 16;     // Version 2: data shift 8, rollback step 8.
constexpr std::uint32_t kFirstVersion = 1; // Without the data shift.
constexpr std::string_view kRolledBack = "rolled-back";
constexpr std::string_view kPrefix = "ckpt-";
constexpr std::string_view kSuffix = ".bin";
constexpr std::string_view kTemporaryMarker = ".tmp-";

// Appends little-endian integers and floats to a byte string.
class ByteWriter {
public:
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void f64(double v) { u64(std::bit_cast<std::uint64_t>(v)); }
  void tensor(const Matrix& m) {
    for (const float v : m.values()) {
      u32(std::bit_cast<std::uint32_t>(v));
    }
  }
  std::string& bytes() { return bytes_; }

private:
  void put(std::uint64_t v, int width) {
    for (int i = 0; i < width; ++i) {
      bytes_.push_back(static_cast<char>((v >> (8 * i)) & 0xFFU));
    }
  }
  std::string bytes_;
};

// Reads little-endian integers and floats from a byte string whose length the caller has checked.
class ByteReader {
public:
  explicit ByteReader(std::string_view bytes) : bytes_(bytes) {}
  std::uint32_t u32() { return static_cast<std::uint32_t>(get(4)); }
  std::uint64_t u64() { return get(8); }
  double f64() { return std::bit_cast<double>(u64()); }
  void tensor(Matrix& m) {
    for (float& v : m.values()) {
      v = std::bit_cast<float>(u32());
    }
  }

private:
  std::uint64_t get(int width) {
    std::uint64_t v = 0;
    for (int i = 0; i < width; ++i) {
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes_[offset_ + static_cast<std::size_t>(i)]))
           << (8 * i);
    }
    offset_ += static_cast<std::size_t>(width);
    return v;
  }
  std::string_view bytes_;
  std::size_t offset_ = 0;
};

// The payload size of a model of width `dim` in format `version`: the identity, the data shift (version 2), then
// weights and momentum (8 tensors of binary32).
std::uint64_t payload_size(std::uint64_t dim, std::uint32_t version) {
  return kIdentitySize + (version == kFirstVersion ? 0 : kShiftSize) + std::uint64_t{16} * (dim * dim + dim);
}

void write_tensors(ByteWriter& out, const MlpWeights& w) {
  out.tensor(w.w1);
  out.tensor(w.b1);
  out.tensor(w.w2);
  out.tensor(w.b2);
}

void read_tensors(ByteReader& in, MlpWeights& w) {
  in.tensor(w.w1);
  in.tensor(w.b1);
  in.tensor(w.w2);
  in.tensor(w.b2);
}

// The step in a checkpoint file name, or nothing for other names.
std::optional<std::uint64_t> step_of(std::string_view name) {
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix) || name.size() <= kPrefix.size() + kSuffix.size()) {
    return std::nullopt;
  }
  const std::string_view digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  std::uint64_t step = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return std::nullopt;
  }
  return step;
}

std::string errno_text(int error) {
  return std::generic_category().message(error);
}

// Writes all of `bytes` to `fd`, retrying short writes and interruptions; false with errno set on failure.
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) {
        continue;
      }
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(written));
  }
  return true;
}

// Makes a rename or unlink in `dir` durable. Some file systems (FUSE mounts among them) cannot fsync a
// directory and say so with EINVAL; there the rename is as durable as the file system allows.
void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    throw CheckpointError("cannot open directory " + dir.string() + ": " + errno_text(errno));
  }
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0 && error != EINVAL && error != ENOTSUP) {
    throw CheckpointError("cannot fsync directory " + dir.string() + ": " + errno_text(error));
  }
}

} // namespace

std::string encode_checkpoint(const Checkpoint& checkpoint) {
  const ModelConfig& config = checkpoint.config;
  ByteWriter payload;
  payload.u32(config.dim);
  payload.u32(config.batch);
  payload.u64(config.seed);
  payload.f64(config.learning_rate);
  payload.f64(config.momentum);
  payload.u64(checkpoint.state.data_shift);
  payload.u64(checkpoint.state.rollback_step);
  write_tensors(payload, checkpoint.state.weights);
  write_tensors(payload, checkpoint.state.velocity);

  ByteWriter file;
  file.bytes().append(kMagic);
  file.u32(kCheckpointVersion);
  file.u32(0);
  file.u64(checkpoint.state.step);
  file.u64(payload.bytes().size());
  file.bytes() += payload.bytes();
  file.u32(crc32(file.bytes()));
  return std::move(file.bytes());
}

DecodedCheckpoint decode_checkpoint(std::string_view bytes) {
  DecodedCheckpoint result;
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) {
    result.defect = bytes.size() < kMagic.size()
                        ? "too short to be a checkpoint (" + std::to_string(bytes.size()) + " bytes)"
                        : "not a checkpoint (bad magic)";
    return result;
  }
  if (bytes.size() < kHeaderSize + kTrailerSize) {
    result.defect = "truncated: " + std::to_string(bytes.size()) + " bytes, shorter than a header";
    return result;
  }
  ByteReader header(bytes.substr(kMagic.size()));
  const std::uint32_t version = header.u32();
  header.u32(); // Reserved.
  const std::uint64_t step = header.u64();
  const std::uint64_t size = header.u64();
  if (version != kCheckpointVersion && version != kFirstVersion) {
    result.defect = "unsupported format version " + std::to_string(version);
    return result;
  }
  const std::uint64_t available = bytes.size() - kHeaderSize - kTrailerSize;
  if (size > available) {
    result.defect = "truncated: " + std::to_string(bytes.size()) + " bytes, the header promises " +
                    std::to_string(size + kHeaderSize + kTrailerSize);
    return result;
  }
  if (size < available) {
    result.defect = std::to_string(available - size) + " unexpected bytes after the payload";
    return result;
  }
  const std::string_view covered = bytes.substr(0, kHeaderSize + size);
  ByteReader trailer(bytes.substr(kHeaderSize + size));
  const std::uint32_t stored = trailer.u32();
  const std::uint32_t computed = crc32(covered);
  if (stored != computed) {
    std::ostringstream text;
    text << std::hex << "checksum mismatch (stored crc32 " << stored << ", computed " << computed << ")";
    result.defect = text.str();
    return result;
  }
  if (size < kIdentitySize) {
    result.defect = "payload of " + std::to_string(size) + " bytes is too small";
    return result;
  }
  ByteReader payload(bytes.substr(kHeaderSize, size));
  Checkpoint checkpoint;
  checkpoint.config.dim = payload.u32();
  checkpoint.config.batch = payload.u32();
  checkpoint.config.seed = payload.u64();
  checkpoint.config.learning_rate = payload.f64();
  checkpoint.config.momentum = payload.f64();
  if (checkpoint.config.dim == 0 || checkpoint.config.batch == 0 ||
      size != payload_size(checkpoint.config.dim, version)) {
    result.defect = "payload of " + std::to_string(size) + " bytes does not fit a model of width " +
                    std::to_string(checkpoint.config.dim);
    return result;
  }
  checkpoint.state.step = step;
  if (version != kFirstVersion) {
    checkpoint.state.data_shift = payload.u64();
    checkpoint.state.rollback_step = payload.u64();
  }
  checkpoint.state.weights = MlpWeights::zeros(checkpoint.config.dim);
  checkpoint.state.velocity = MlpWeights::zeros(checkpoint.config.dim);
  read_tensors(payload, checkpoint.state.weights);
  read_tensors(payload, checkpoint.state.velocity);
  result.checkpoint = std::move(checkpoint);
  return result;
}

CheckpointDirectory::CheckpointDirectory(std::filesystem::path dir) : dir_(std::move(dir)) {}

std::string CheckpointDirectory::file_name(std::uint64_t step) {
  std::string digits = std::to_string(step);
  if (digits.size() < 12) {
    digits.insert(0, 12 - digits.size(), '0');
  }
  return std::string(kPrefix) + digits + std::string(kSuffix);
}

std::vector<CheckpointFile> CheckpointDirectory::list() const {
  std::vector<CheckpointFile> files;
  std::error_code ec;
  fs::directory_iterator it(dir_, ec);
  if (ec == std::errc::no_such_file_or_directory) {
    return files;
  }
  if (ec) {
    throw CheckpointError("cannot list " + dir_.string() + ": " + ec.message());
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (const auto step = step_of(it->path().filename().string())) {
      files.push_back({*step, it->path()});
    }
  }
  if (ec) {
    throw CheckpointError("cannot list " + dir_.string() + ": " + ec.message());
  }
  std::sort(files.begin(), files.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    return a.step != b.step ? a.step > b.step : a.path > b.path;
  });
  return files;
}

std::optional<LoadedCheckpoint>
CheckpointDirectory::load_newest_valid(const std::function<void(const SkippedCheckpoint&)>& on_skip,
                                       const std::function<bool(const LoadedCheckpoint&)>& usable) const {
  for (const CheckpointFile& file : list()) {
    std::ifstream in(file.path, std::ios::binary);
    if (!in.is_open()) {
      on_skip({file.path, "cannot be opened: " + errno_text(errno)});
      continue;
    }
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (in.bad()) {
      on_skip({file.path, "cannot be read"});
      continue;
    }
    DecodedCheckpoint decoded = decode_checkpoint(bytes);
    if (!decoded.checkpoint) {
      on_skip({file.path, decoded.defect});
      continue;
    }
    if (decoded.checkpoint->state.step != file.step) {
      on_skip({file.path, "holds step " + std::to_string(decoded.checkpoint->state.step) + " but is named for step " +
                              std::to_string(file.step)});
      continue;
    }
    LoadedCheckpoint loaded{std::move(*decoded.checkpoint), file.path};
    if (usable && !usable(loaded)) {
      continue;
    }
    return loaded;
  }
  return std::nullopt;
}

fs::path CheckpointDirectory::save(const Checkpoint& checkpoint) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    throw CheckpointError("cannot create " + dir_.string() + ": " + ec.message());
  }
  fs::path final_path = dir_ / file_name(checkpoint.state.step);
  std::string temporary = final_path.string() + std::string(kTemporaryMarker) + "XXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) {
    throw CheckpointError("cannot create a temporary file in " + dir_.string() + ": " + errno_text(errno));
  }
  const std::string bytes = encode_checkpoint(checkpoint);
  // mkostemp creates the file 0600; readers on this host may be other users. Mounts without permissions ignore it.
  static_cast<void>(::fchmod(fd, 0644));
  const bool written = write_all(fd, bytes) && ::fsync(fd) == 0;
  const int write_error = errno;
  if (::close(fd) != 0 || !written) {
    const int error = written ? errno : write_error;
    ::unlink(temporary.c_str());
    throw CheckpointError("cannot write " + temporary + ": " + errno_text(error));
  }
  if (::rename(temporary.c_str(), final_path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    throw CheckpointError("cannot rename " + temporary + " to " + final_path.string() + ": " + errno_text(error));
  }
  sync_directory(dir_);
  return final_path;
}

std::vector<fs::path> CheckpointDirectory::prune(std::size_t keep, std::uint64_t newest_step) {
  std::vector<fs::path> deleted;
  std::size_t kept = 0;
  for (const CheckpointFile& file : list()) {
    if (file.step > newest_step) {
      continue;
    }
    if (kept < keep) {
      ++kept;
      continue;
    }
    std::error_code ec;
    if (fs::remove(file.path, ec)) {
      deleted.push_back(file.path);
    }
  }
  if (!deleted.empty()) {
    sync_directory(dir_);
  }
  return deleted;
}

std::vector<fs::path> CheckpointDirectory::remove_temporaries() {
  std::vector<fs::path> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(kPrefix) && name.find(kTemporaryMarker) != std::string::npos) {
      found.push_back(it->path());
    }
  }
  std::vector<fs::path> removed;
  for (const fs::path& file : found) {
    std::error_code remove_error;
    if (fs::remove(file, remove_error)) {
      removed.push_back(file);
    }
  }
  return removed;
}

std::optional<fs::path> CheckpointDirectory::set_aside(const fs::path& file) {
  fs::path target = file;
  target += ".invalid";
  std::error_code ec;
  fs::rename(file, target, ec);
  if (ec) {
    return std::nullopt;
  }
  return target;
}

std::optional<fs::path> CheckpointDirectory::roll_back(const fs::path& file) {
  const fs::path dir = dir_ / kRolledBack;
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path target = dir / file.filename();
  if (!ec) {
    fs::rename(file, target, ec);
  }
  if (ec) {
    return std::nullopt;
  }
  return target;
}

} // namespace jobman::systolic
