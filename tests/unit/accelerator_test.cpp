// The accelerator catalog: sizes, chips, hosts and per-chip figures of every TPU generation.
#include "../../src/config/accelerator_shapes.hpp"
#include "jobman/config/accelerator.hpp"

#include <gtest/gtest.h>

namespace jobman::config {
namespace accelerator_test {

AcceleratorType must_find(const std::string& name) {
  std::string why;
  auto found = find_accelerator(name, &why);
  EXPECT_TRUE(found.has_value()) << name << ": " << why;
  return found.value_or(AcceleratorType{});
}

std::string why_not(const std::string& name) {
  std::string why;
  EXPECT_FALSE(find_accelerator(name, &why).has_value()) << name;
  return why;
}

TEST(AcceleratorCatalog, HostCountsMatchGoogle) {
  const std::vector<std::pair<std::string, int>> expected{
      {"v4-8", 1},        {"v4-16", 2},       {"v4-32", 4},       {"v4-128", 16},      {"v5p-8", 1},   {"v5p-16", 2},
      {"v5litepod-1", 1}, {"v5litepod-4", 1}, {"v5litepod-8", 1}, {"v5litepod-16", 4}, {"v6e-1", 1},   {"v6e-8", 1},
      {"v6e-256", 64},    {"v2-8", 1},        {"v3-8", 1},        {"v3-32", 4},        {"v2-512", 64},
  };
  for (const auto& [name, hosts] : expected) {
    EXPECT_EQ(must_find(name).hosts, hosts) << name;
  }
}

TEST(AcceleratorCatalog, SizesCountCoresOrChipsByGeneration) {
  EXPECT_EQ(must_find("v4-8").chips, 4) << "v4 sizes count TensorCores";
  EXPECT_EQ(must_find("v4-128").chips, 64);
  EXPECT_EQ(must_find("v5p-12288").chips, 6144);
  EXPECT_EQ(must_find("v5litepod-16").chips, 16) << "v5e sizes count chips";
  EXPECT_EQ(must_find("v6e-8").chips, 8);
  EXPECT_EQ(must_find("v6e-8").chips_per_host, 8);
  EXPECT_EQ(must_find("v6e-16").chips_per_host, 4);
}

TEST(AcceleratorCatalog, PeakFiguresScaleWithChips) {
  const auto v4 = must_find("v4-32");
  EXPECT_DOUBLE_EQ(v4.peak_bf16_tflops(), 16 * 275.0);
  EXPECT_DOUBLE_EQ(v4.hbm_gib(), 16 * 32.0);
  EXPECT_DOUBLE_EQ(must_find("v2-8").peak_bf16_tflops(), 4 * 45.0);
  EXPECT_DOUBLE_EQ(must_find("v3-8").hbm_gib(), 4 * 32.0);
  EXPECT_DOUBLE_EQ(must_find("v5e-4").peak_bf16_tflops(), 4 * 197.0);
  EXPECT_DOUBLE_EQ(must_find("v5p-8").hbm_gib(), 4 * 95.0);
  EXPECT_DOUBLE_EQ(must_find("v6e-1").peak_bf16_tflops(), 918.0);
  EXPECT_DOUBLE_EQ(AcceleratorType{}.peak_bf16_tflops(), 0.0);
}

// A multislice job's record counts every slice's hosts: the slices are read back from them, a count that is not a
// whole number of slices (or none) being one.
TEST(AcceleratorCatalog, SlicesAreReadFromTheHostsOfAllOfThem) {
  const auto v4 = must_find("v4-16");
  EXPECT_EQ(v4.slices_in(2), 1);
  EXPECT_EQ(v4.slices_in(4), 2);
  EXPECT_EQ(v4.slices_in(128), 64);
  EXPECT_EQ(v4.slices_in(3), 1);
  EXPECT_EQ(v4.slices_in(1), 1);
  EXPECT_EQ(v4.slices_in(0), 1);
  EXPECT_EQ(v4.slices_in(-4), 1);
  EXPECT_EQ(must_find("v6e-8").slices_in(3), 3) << "one host a slice";
  EXPECT_EQ(AcceleratorType{}.slices_in(4), 1);
  EXPECT_EQ(v4.label(1), "v4-16");
  EXPECT_EQ(v4.label(2), "v4-16x2");
}

TEST(AcceleratorCatalog, EverySizeOfEveryGenerationResolvesConsistently) {
  int count = 0;
  for (const auto& generation : tpu_generations()) {
    ASSERT_FALSE(generation.sizes.empty());
    ASSERT_FALSE(generation.runtime_versions.empty());
    ASSERT_FALSE(generation.zones.empty());
    for (const int size : generation.sizes) {
      const std::string name = generation.name + "-" + std::to_string(size);
      const auto a = must_find(name);
      EXPECT_EQ(a.name, name);
      EXPECT_EQ(a.generation, &generation);
      EXPECT_EQ(a.size, size);
      EXPECT_EQ(a.hosts * a.chips_per_host, a.chips) << name;
      EXPECT_GE(a.hosts, 1) << name;
      EXPECT_LE(a.chips_per_host, 8) << name;
      EXPECT_EQ(a.chips * generation.cores_per_chip, size) << name;
      ++count;
    }
  }
  EXPECT_EQ(count, 5 + 8 + 10 + 8 + 12 + 8);
}

TEST(AcceleratorCatalog, GenerationsAreListedOldestFirst) {
  std::vector<std::string> names;
  for (const auto& generation : tpu_generations()) {
    names.push_back(generation.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"v2", "v3", "v4", "v5litepod", "v5p", "v6e"}));
}

TEST(AcceleratorCatalog, V5eIsAnAliasOfV5litepod) {
  const auto a = must_find("v5e-16");
  EXPECT_EQ(a.name, "v5litepod-16");
  EXPECT_EQ(a.generation->name, "v5litepod");
  EXPECT_EQ(a.generation->runtime_versions.front(), "v2-alpha-tpuv5-lite");
}

TEST(AcceleratorCatalog, RuntimeVersionHints) {
  EXPECT_EQ(must_find("v4-8").generation->runtime_versions,
            (std::vector<std::string>{"tpu-ubuntu2204-base", "tpu-vm-base"}));
  EXPECT_EQ(must_find("v5p-8").generation->runtime_versions.front(), "v2-alpha-tpuv5");
  EXPECT_EQ(must_find("v6e-8").generation->runtime_versions.front(), "v2-alpha-tpuv6e");
}

TEST(AcceleratorCatalog, BadSizeListsTheValidOnes) {
  EXPECT_EQ(why_not("v4-7"), "'v4-7' is not a valid v4 size (valid: v4-8, v4-16, v4-32, v4-64, v4-128, v4-256, "
                             "v4-512, v4-1024, v4-2048, v4-4096)");
  EXPECT_EQ(why_not("v5e-2"), "'v5e-2' is not a valid v5litepod size (valid: v5e-1, v5e-4, v5e-8, v5e-16, v5e-32, "
                              "v5e-64, v5e-128, v5e-256)");
  EXPECT_NE(why_not("v5p-16384").find("v5p-8192, v5p-12288)"), std::string::npos);
}

TEST(AcceleratorCatalog, AMultiHostShapeOffTheCatalogResolvesOnlyWhenAsked) {
  // v4-384 is a 4x4x12 topology: 192 chips on 48 hosts of 4.
  EXPECT_FALSE(find_accelerator("v4-384").has_value());
  std::string why;
  bool off_catalog = false;
  const auto v4 = detail::find_accelerator("v4-384", &why, &off_catalog);
  ASSERT_TRUE(v4.has_value()) << why;
  EXPECT_TRUE(off_catalog);
  EXPECT_EQ(v4->chips, 192);
  EXPECT_EQ(v4->hosts, 48);
  EXPECT_EQ(v4->chips_per_host, 4);
  EXPECT_NE(why.find("'v4-384' is not among the v4 sizes jobman knows"), std::string::npos) << why;
  // A listed size is not off the catalog; a part of a host, an odd core count or a size past the largest is no size.
  ASSERT_TRUE(detail::find_accelerator("v4-32", &why, &off_catalog).has_value());
  EXPECT_FALSE(off_catalog);
  for (const char* name : {"v4-7", "v6e-2", "v5p-16384", "v4-12"}) {
    EXPECT_FALSE(detail::find_accelerator(name, &why, &off_catalog).has_value()) << name;
    EXPECT_NE(why.find("is not a valid"), std::string::npos) << why;
  }
}

TEST(AcceleratorCatalog, UnknownGenerationSuggestsAKnownOne) {
  EXPECT_EQ(why_not("v5lite-8"), "unknown TPU generation 'v5lite' in 'v5lite-8' (did you mean 'v5litepod'?)");
  EXPECT_EQ(why_not("V4-8"), "unknown TPU generation 'V4' in 'V4-8' (did you mean 'v4'?)");
  EXPECT_EQ(why_not("tpu-8"), "unknown TPU generation 'tpu' in 'tpu-8' (known: v2, v3, v4, v5litepod, v5e, v5p, v6e)");
}

TEST(AcceleratorCatalog, MalformedNamesAreRejected) {
  for (const auto* name : {"", "v4", "v4-", "-8", "v4-x", "v4-+8", "v4-08", "v4-8.0"}) {
    EXPECT_NE(why_not(name).find("is not an accelerator type"), std::string::npos) << name;
  }
  EXPECT_EQ(why_not("v4--8"), "unknown TPU generation 'v4-' in 'v4--8' (did you mean 'v4'?)");
  EXPECT_FALSE(find_accelerator("v4-7").has_value()) << "why may be omitted";
}

} // namespace accelerator_test
} // namespace jobman::config
