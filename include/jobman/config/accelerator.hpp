// The catalog of Cloud TPU accelerator types: valid sizes, chips, hosts and per-chip figures.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::config {

// Facts about one TPU generation.
struct TpuGeneration {
  std::string name;                          // API prefix: "v2", "v3", "v4", "v5litepod", "v5p", "v6e".
  std::vector<std::string> aliases;          // Other names people write, e.g. "v5e" for "v5litepod".
  int cores_per_chip = 1;                    // The size suffix counts TensorCores (v2-v4, v5p) or chips (v5e, v6e).
  int max_chips_per_host = 4;                // Chips attached to one worker host of a multi-host slice.
  int max_single_host_chips = 4;             // Largest slice that still runs on one host.
  std::vector<int> sizes;                    // Valid size suffixes, ascending.
  double peak_bf16_tflops_per_chip = 0;      // Peak dense bf16 TFLOP/s of one chip.
  double hbm_gib_per_chip = 0;               // High-bandwidth memory of one chip, GiB.
  std::vector<std::string> runtime_versions; // Runtime versions that fit, the usual one first.
  std::vector<std::string> zones;            // Zones where Google offers this generation (advisory).
};

// A concrete accelerator type such as "v4-32", resolved against the catalog.
struct AcceleratorType {
  std::string name; // Canonical API name, e.g. "v5litepod-16" (also for input "v5e-16").
  const TpuGeneration* generation = nullptr;
  int size = 0;  // The number after the dash.
  int chips = 0; // TPU chips in the slice.
  int hosts = 0; // Worker hosts (TPU VMs) in the slice.
  int chips_per_host = 0;
  // Peak dense bf16 TFLOP/s of the whole slice.
  [[nodiscard]] double peak_bf16_tflops() const;
  // HBM of the whole slice, GiB.
  [[nodiscard]] double hbm_gib() const;
  // How many slices of this type `total_hosts` worker hosts are (a multislice job's or attempt's record counts every
  // slice's hosts): total_hosts / hosts when that is a whole number of at least two, else 1.
  [[nodiscard]] int slices_in(int total_hosts) const;
  // "v4-16", or "v4-16x2" for two slices of it.
  [[nodiscard]] std::string label(int slices) const;
};

// Every generation jobman knows, oldest first.
std::span<const TpuGeneration> tpu_generations();

// Resolves "v4-32", "v5e-16", "v6e-1"...; on failure, nullopt and `why` says what is wrong
// (unknown generation with a suggestion, or the valid sizes of a known one).
std::optional<AcceleratorType> find_accelerator(std::string_view name, std::string* why = nullptr);

} // namespace jobman::config
