// Checkpoint files of systolic-train: exact round trips, damage detection, and the newest-valid-first fallback.
#include "support/temp_dir.hpp"
#include "systolic/checkpoint.hpp"
#include "systolic/hashing.hpp"
#include "systolic/model.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

namespace systolic_checkpoint_test {

namespace fs = std::filesystem;
using jobman::systolic::Checkpoint;
using jobman::systolic::CheckpointDirectory;
using jobman::systolic::decode_checkpoint;
using jobman::systolic::encode_checkpoint;
using jobman::systolic::ModelConfig;
using jobman::systolic::SkippedCheckpoint;
using jobman::systolic::SystolicArray;
using jobman::systolic::TeacherStudentTask;

// A small run's checkpoint after `steps` real training steps (so the momentum buffers are not zero).
Checkpoint trained_checkpoint(std::uint64_t steps) {
  ModelConfig config;
  config.dim = 6;
  config.batch = 3;
  config.seed = 42;
  TeacherStudentTask task(config);
  SystolicArray array(4);
  Checkpoint checkpoint{config, task.initial_state()};
  for (std::uint64_t i = 0; i < steps; ++i) {
    task.train_step(checkpoint.state, array);
  }
  return checkpoint;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::vector<std::string> file_names(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(SystolicCheckpoint, HashesMatchTheirPublishedCheckValues) {
  EXPECT_EQ(jobman::systolic::crc32("123456789"), 0xCBF43926U);
  EXPECT_EQ(jobman::systolic::fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(jobman::systolic::fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(jobman::systolic::hex64(0x00ab0000000000cdULL), "00ab0000000000cd");
}

TEST(SystolicCheckpoint, EncodingRoundTripsEveryBit) {
  const Checkpoint original = trained_checkpoint(5);
  const auto decoded = decode_checkpoint(encode_checkpoint(original));
  ASSERT_TRUE(decoded.checkpoint) << decoded.defect;
  EXPECT_EQ(decoded.checkpoint->config, original.config);
  EXPECT_EQ(decoded.checkpoint->state.step, 5U);
  EXPECT_TRUE(decoded.checkpoint->state.weights.bitwise_equal(original.state.weights));
  EXPECT_TRUE(decoded.checkpoint->state.velocity.bitwise_equal(original.state.velocity));
  EXPECT_EQ(encode_checkpoint(*decoded.checkpoint), encode_checkpoint(original));
}

TEST(SystolicCheckpoint, NegativeZeroNanAndExtremesSurviveTheRoundTrip) {
  Checkpoint checkpoint = trained_checkpoint(0);
  checkpoint.state.weights.w1.values()[0] = -0.0F;
  checkpoint.state.weights.w1.values()[1] = std::numeric_limits<float>::denorm_min();
  checkpoint.state.velocity.b2.values()[0] = std::numeric_limits<float>::max();
  checkpoint.config.learning_rate = 0.1 + 1e-17;
  const auto decoded = decode_checkpoint(encode_checkpoint(checkpoint));
  ASSERT_TRUE(decoded.checkpoint) << decoded.defect;
  EXPECT_TRUE(decoded.checkpoint->state.weights.bitwise_equal(checkpoint.state.weights));
  EXPECT_TRUE(decoded.checkpoint->state.velocity.bitwise_equal(checkpoint.state.velocity));
  EXPECT_EQ(decoded.checkpoint->config.learning_rate, checkpoint.config.learning_rate);
}

TEST(SystolicCheckpoint, EveryTruncationIsDetected) {
  const std::string bytes = encode_checkpoint(trained_checkpoint(2));
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    const auto decoded = decode_checkpoint(std::string_view(bytes).substr(0, length));
    EXPECT_FALSE(decoded.checkpoint) << "accepted the first " << length << " of " << bytes.size() << " bytes";
    EXPECT_FALSE(decoded.defect.empty());
  }
}

// Every byte is covered, the reserved header word and the CRC itself included.
TEST(SystolicCheckpoint, EverySingleBitFlipIsDetected) {
  const std::string bytes = encode_checkpoint(trained_checkpoint(2));
  for (std::size_t byte = 0; byte < bytes.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = bytes;
      damaged[byte] = static_cast<char>(damaged[byte] ^ (1 << bit));
      EXPECT_FALSE(decode_checkpoint(damaged).checkpoint) << "byte " << byte << " bit " << bit;
    }
  }
}

TEST(SystolicCheckpoint, DefectsAreNamed) {
  const std::string bytes = encode_checkpoint(trained_checkpoint(1));
  EXPECT_NE(decode_checkpoint(bytes.substr(0, bytes.size() - 1)).defect.find("truncated"), std::string::npos);
  EXPECT_NE(decode_checkpoint(bytes + "x").defect.find("unexpected bytes"), std::string::npos);
  std::string corrupted = bytes;
  corrupted[100] = static_cast<char>(corrupted[100] ^ 0x40);
  EXPECT_NE(decode_checkpoint(corrupted).defect.find("checksum mismatch"), std::string::npos);
  EXPECT_NE(decode_checkpoint("PK\x03\x04 not a checkpoint at all, but long enough").defect.find("bad magic"),
            std::string::npos);
  std::string future = bytes;
  future[8] = 3;
  EXPECT_NE(decode_checkpoint(future).defect.find("version 3"), std::string::npos);
}

TEST(SystolicCheckpoint, TheDataShiftAndTheRollbackItIncludesRoundTrip) {
  Checkpoint checkpoint = trained_checkpoint(4);
  checkpoint.state.data_shift = 7;
  checkpoint.state.rollback_step = 450;
  const std::string bytes = encode_checkpoint(checkpoint);
  EXPECT_EQ(bytes[8], 2) << "format version 2";
  const auto decoded = decode_checkpoint(bytes);
  ASSERT_TRUE(decoded.checkpoint) << decoded.defect;
  EXPECT_EQ(decoded.checkpoint->state.data_shift, 7U);
  EXPECT_EQ(decoded.checkpoint->state.rollback_step, 450U);
  EXPECT_TRUE(decoded.checkpoint->state.weights.bitwise_equal(checkpoint.state.weights));
}

// Version 1, written before the data shift existed: the same bytes without the shift's 16 (after the identity).
TEST(SystolicCheckpoint, AVersionOneCheckpointIsReadWithNoDataShift) {
  const Checkpoint checkpoint = trained_checkpoint(3);
  std::string bytes = encode_checkpoint(checkpoint);
  constexpr std::size_t kShiftOffset = 32 + 32; // Header, then the identity.
  ASSERT_EQ(bytes.substr(kShiftOffset, 16), std::string(16, '\0'));
  bytes.erase(kShiftOffset, 16);
  bytes.resize(bytes.size() - 4); // The CRC, recomputed below.
  bytes[8] = 1;
  const std::uint64_t payload = bytes.size() - 32;
  for (std::size_t i = 0; i < 8; ++i) {
    bytes[24 + i] = static_cast<char>((payload >> (8 * i)) & 0xFFU);
  }
  const std::uint32_t crc = jobman::systolic::crc32(bytes);
  for (std::size_t i = 0; i < 4; ++i) {
    bytes.push_back(static_cast<char>((crc >> (8 * i)) & 0xFFU));
  }
  const auto decoded = decode_checkpoint(bytes);
  ASSERT_TRUE(decoded.checkpoint) << decoded.defect;
  EXPECT_EQ(decoded.checkpoint->config, checkpoint.config);
  EXPECT_EQ(decoded.checkpoint->state.step, 3U);
  EXPECT_EQ(decoded.checkpoint->state.data_shift, 0U);
  EXPECT_EQ(decoded.checkpoint->state.rollback_step, 0U);
  EXPECT_TRUE(decoded.checkpoint->state.weights.bitwise_equal(checkpoint.state.weights));
  EXPECT_TRUE(decoded.checkpoint->state.velocity.bitwise_equal(checkpoint.state.velocity));
  // Written again, it is version 2, the shift included.
  EXPECT_EQ(encode_checkpoint(*decoded.checkpoint), encode_checkpoint(checkpoint));
}

TEST(SystolicCheckpoint, SaveWritesTheFinalNameOnlyAndLeavesNoTemporaries) {
  jobman::test::TempDir dir;
  CheckpointDirectory checkpoints(dir / "run" / "ckpt");
  const Checkpoint checkpoint = trained_checkpoint(3);
  const fs::path path = checkpoints.save(checkpoint);
  EXPECT_EQ(path, dir / "run" / "ckpt" / "ckpt-000000000003.bin");
  EXPECT_EQ(file_names(checkpoints.path()), std::vector<std::string>{"ckpt-000000000003.bin"});
  EXPECT_EQ(read_file(path), encode_checkpoint(checkpoint));
}

TEST(SystolicCheckpoint, NewestValidCheckpointIsLoaded) {
  jobman::test::TempDir dir;
  CheckpointDirectory checkpoints(dir.path());
  for (const std::uint64_t step : {1, 2, 3}) {
    checkpoints.save(trained_checkpoint(step));
  }
  std::vector<SkippedCheckpoint> skipped;
  const auto loaded = checkpoints.load_newest_valid([&](const SkippedCheckpoint& s) { skipped.push_back(s); });
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->checkpoint.state.step, 3U);
  EXPECT_EQ(loaded->path, dir / "ckpt-000000000003.bin");
  EXPECT_TRUE(loaded->checkpoint.state.weights.bitwise_equal(trained_checkpoint(3).state.weights));
  EXPECT_TRUE(skipped.empty());
}

TEST(SystolicCheckpoint, StepsSortNumericallyNotByName) {
  jobman::test::TempDir dir;
  CheckpointDirectory checkpoints(dir.path());
  checkpoints.save(trained_checkpoint(2));
  // A file written with a shorter name for a later step (e.g. by hand) is still the newest.
  fs::copy_file(checkpoints.save(trained_checkpoint(10)), dir / "ckpt-10.bin");
  fs::remove(dir / "ckpt-000000000010.bin");
  const auto files = checkpoints.list();
  ASSERT_EQ(files.size(), 2U);
  EXPECT_EQ(files[0].step, 10U);
  EXPECT_EQ(files[1].step, 2U);
}

// The newest checkpoint damaged three ways; each time the previous one must be chosen and the damage reported.
class SystolicCheckpointDamage : public ::testing::TestWithParam<std::string> {};

TEST_P(SystolicCheckpointDamage, DamagedNewestCheckpointIsSkippedForThePreviousOne) {
  jobman::test::TempDir dir;
  CheckpointDirectory checkpoints(dir.path());
  checkpoints.save(trained_checkpoint(4));
  const fs::path newest = checkpoints.save(trained_checkpoint(8));
  std::string bytes = read_file(newest);
  const std::string& damage = GetParam();
  if (damage == "torn") {
    // A write that stopped part-way: the first half of the new bytes over an otherwise zero-filled file.
    std::string torn(bytes.size(), '\0');
    torn.replace(0, bytes.size() / 2, bytes.substr(0, bytes.size() / 2));
    bytes = torn;
  } else if (damage == "truncated") {
    bytes.resize(bytes.size() - 17);
  } else if (damage == "corrupted") {
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
  } else if (damage == "empty") {
    bytes.clear();
  } else if (damage == "renamed") {
    // Intact, but its name claims a step it does not hold.
    fs::rename(newest, dir / "ckpt-000000000009.bin");
  }
  if (damage != "renamed") {
    write_file(newest, bytes);
  }
  std::vector<SkippedCheckpoint> skipped;
  const auto loaded = checkpoints.load_newest_valid([&](const SkippedCheckpoint& s) { skipped.push_back(s); });
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->checkpoint.state.step, 4U);
  EXPECT_TRUE(loaded->checkpoint.state.weights.bitwise_equal(trained_checkpoint(4).state.weights));
  ASSERT_EQ(skipped.size(), 1U);
  EXPECT_FALSE(skipped[0].reason.empty());
}

INSTANTIATE_TEST_SUITE_P(Systolic, SystolicCheckpointDamage,
                         ::testing::Values("torn", "truncated", "corrupted", "empty", "renamed"),
                         [](const ::testing::TestParamInfo<std::string>& param) { return param.param; });

TEST(SystolicCheckpoint, CheckpointsTheCallerRefusesArePassedOverWithoutAWarning) {
  jobman::test::TempDir dir;
  CheckpointDirectory checkpoints(dir.path());
  for (const std::uint64_t step : {2, 4, 6, 8}) {
    checkpoints.save(trained_checkpoint(step));
  }
  std::vector<std::uint64_t> offered;
  const auto loaded = checkpoints.load_newest_valid(
      [](const SkippedCheckpoint& skipped) { ADD_FAILURE() << skipped.path << ": " << skipped.reason; },
      [&](const jobman::systolic::LoadedCheckpoint& candidate) {
        offered.push_back(candidate.checkpoint.state.step);
        return candidate.checkpoint.state.step < 5;
      });
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->checkpoint.state.step, 4U);
  EXPECT_EQ(offered, (std::vector<std::uint64_t>{8, 6, 4}));
}

TEST(SystolicCheckpoint, RollBackMovesACheckpointWhereNoResumeLooks) {
  jobman::test::TempDir dir;
  CheckpointDirectory checkpoints(dir.path());
  checkpoints.save(trained_checkpoint(1));
  const fs::path later = checkpoints.save(trained_checkpoint(2));
  const std::string bytes = read_file(later);
  const auto moved = checkpoints.roll_back(later);
  ASSERT_TRUE(moved);
  EXPECT_EQ(*moved, dir / "rolled-back" / "ckpt-000000000002.bin");
  EXPECT_EQ(read_file(*moved), bytes) << "moved, not rewritten";
  ASSERT_EQ(checkpoints.list().size(), 1U);
  EXPECT_EQ(checkpoints.list().front().step, 1U);
  EXPECT_FALSE(checkpoints.roll_back(dir / "ckpt-000000000009.bin")) << "no such file";
}

TEST(SystolicCheckpoint, NoValidCheckpointGivesNothing) {
  jobman::test::TempDir dir;
  CheckpointDirectory missing(dir / "absent");
  EXPECT_FALSE(missing.load_newest_valid([](const SkippedCheckpoint&) {}));
  CheckpointDirectory checkpoints(dir.path());
  dir.write("ckpt-000000000001.bin", "garbage");
  dir.write("notes.txt", "not a checkpoint name");
  int skipped = 0;
  EXPECT_FALSE(checkpoints.load_newest_valid([&](const SkippedCheckpoint&) { ++skipped; }));
  EXPECT_EQ(skipped, 1);
}

TEST(SystolicCheckpoint, PruneKeepsTheNewestAndIgnoresLaterSteps) {
  jobman::test::TempDir dir;
  CheckpointDirectory checkpoints(dir.path());
  for (const std::uint64_t step : {1, 2, 3, 4, 5}) {
    checkpoints.save(trained_checkpoint(step));
  }
  const auto deleted = checkpoints.prune(2, 4);
  EXPECT_EQ(deleted.size(), 2U);
  EXPECT_EQ(file_names(dir.path()),
            (std::vector<std::string>{"ckpt-000000000003.bin", "ckpt-000000000004.bin", "ckpt-000000000005.bin"}));
}

TEST(SystolicCheckpoint, TemporariesOfADeadWriterAreRemoved) {
  jobman::test::TempDir dir;
  CheckpointDirectory checkpoints(dir.path());
  checkpoints.save(trained_checkpoint(1));
  dir.write("ckpt-000000000002.bin.tmp-Ab12Cd", "half a checkpoint");
  dir.write("other.tmp-keep", "not ours");
  const auto removed = checkpoints.remove_temporaries();
  ASSERT_EQ(removed.size(), 1U);
  EXPECT_EQ(file_names(dir.path()), (std::vector<std::string>{"ckpt-000000000001.bin", "other.tmp-keep"}));
}

TEST(SystolicCheckpoint, SetAsideMovesADamagedFileOutOfTheWay) {
  jobman::test::TempDir dir;
  CheckpointDirectory checkpoints(dir.path());
  const fs::path bad = dir.write("ckpt-000000000007.bin", "damaged");
  const auto moved = checkpoints.set_aside(bad);
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->filename(), "ckpt-000000000007.bin.invalid");
  EXPECT_TRUE(checkpoints.list().empty());
}

} // namespace systolic_checkpoint_test
