#include "jobman/config/accelerator.hpp"

#include "accelerator_shapes.hpp"
#include "jobman/util/strings.hpp"

#include <algorithm>
#include <unordered_map>

namespace jobman::config {

namespace {

std::vector<int> powers_of_two(int from, int to) {
  std::vector<int> out;
  for (int size = from; size <= to; size *= 2) {
    out.push_back(size);
  }
  return out;
}

std::vector<TpuGeneration> build_catalog() {
  std::vector<TpuGeneration> out;
  // v2, v3, v4 and v5p sizes count TensorCores (two per chip); v5litepod and v6e sizes count chips.
  out.push_back(TpuGeneration{"v2",
                              {},
                              2,
                              4,
                              4,
                              {8, 32, 128, 256, 512},
                              45,
                              16,
                              {"tpu-ubuntu2204-base", "tpu-vm-base"},
                              {"us-central1-b", "us-central1-c", "us-central1-f", "europe-west4-a", "asia-east1-c"}});
  out.push_back(TpuGeneration{"v3",
                              {},
                              2,
                              4,
                              4,
                              {8, 32, 64, 128, 256, 512, 1024, 2048},
                              123,
                              32,
                              {"tpu-ubuntu2204-base", "tpu-vm-base"},
                              {"us-central1-a", "us-central1-b", "us-central1-f", "europe-west4-a"}});
  out.push_back(TpuGeneration{
      "v4", {}, 2, 4, 4, powers_of_two(8, 4096), 275, 32, {"tpu-ubuntu2204-base", "tpu-vm-base"}, {"us-central2-b"}});
  out.push_back(TpuGeneration{"v5litepod",
                              {"v5e"},
                              1,
                              4,
                              8,
                              {1, 4, 8, 16, 32, 64, 128, 256},
                              197,
                              16,
                              {"v2-alpha-tpuv5-lite"},
                              {"us-central1-a", "us-west1-c", "us-west4-a", "us-east1-c", "us-east5-a", "us-east5-b",
                               "us-south1-a", "europe-west4-a", "europe-west4-b", "asia-southeast1-b"}});
  std::vector<int> v5p_sizes = powers_of_two(8, 8192);
  v5p_sizes.push_back(12288);
  out.push_back(TpuGeneration{
      "v5p", {}, 2, 4, 4, v5p_sizes, 459, 95, {"v2-alpha-tpuv5"}, {"us-central1-a", "us-east5-a", "europe-west4-b"}});
  out.push_back(TpuGeneration{"v6e",
                              {},
                              1,
                              4,
                              8,
                              {1, 4, 8, 16, 32, 64, 128, 256},
                              918,
                              32,
                              {"v2-alpha-tpuv6e"},
                              {"us-central2-b", "us-east1-d", "us-east5-a", "us-east5-b", "us-south1-a",
                               "europe-west4-a", "asia-northeast1-b", "southamerica-west1-a"}});
  return out;
}

const std::vector<TpuGeneration>& catalog() {
  static const std::vector<TpuGeneration> generations = build_catalog();
  return generations;
}

void set_why(std::string* why, std::string text) {
  if (why != nullptr) {
    *why = std::move(text);
  }
}

} // namespace

double AcceleratorType::peak_bf16_tflops() const {
  return generation == nullptr ? 0.0 : generation->peak_bf16_tflops_per_chip * chips;
}

double AcceleratorType::hbm_gib() const {
  return generation == nullptr ? 0.0 : generation->hbm_gib_per_chip * chips;
}

int AcceleratorType::slices_in(int total_hosts) const {
  return hosts > 0 && total_hosts >= 2 * hosts && total_hosts % hosts == 0 ? total_hosts / hosts : 1;
}

std::string AcceleratorType::label(int slices) const {
  return slices > 1 ? name + "x" + std::to_string(slices) : name;
}

std::span<const TpuGeneration> tpu_generations() {
  return catalog();
}

namespace detail {

std::optional<AcceleratorType> find_accelerator(std::string_view name, std::string* why, bool* off_catalog) {
  if (off_catalog != nullptr) {
    *off_catalog = false;
  }
  const std::string quoted = "'" + std::string(name) + "'";
  const auto dash = name.rfind('-');
  const auto size = dash == std::string_view::npos ? std::nullopt : util::parse_int(name.substr(dash + 1));
  if (dash == std::string_view::npos || dash == 0 || !size || name[dash + 1] == '+' || name[dash + 1] == '-' ||
      name[dash + 1] == '0') {
    set_why(why, quoted + " is not an accelerator type (expected <generation>-<size>, e.g. v4-8 or v6e-1)");
    return std::nullopt;
  }
  const std::string_view prefix = name.substr(0, dash);
  const TpuGeneration* generation = nullptr;
  std::vector<std::string> names;
  for (const auto& candidate : catalog()) {
    names.push_back(candidate.name);
    names.insert(names.end(), candidate.aliases.begin(), candidate.aliases.end());
    if (candidate.name == prefix ||
        std::find(candidate.aliases.begin(), candidate.aliases.end(), prefix) != candidate.aliases.end()) {
      generation = &candidate;
    }
  }
  if (generation == nullptr) {
    const auto close = util::closest_match(prefix, names);
    set_why(why, "unknown TPU generation '" + std::string(prefix) + "' in " + quoted +
                     (close ? " (did you mean '" + *close + "'?)" : " (known: " + util::join(names, ", ") + ")"));
    return std::nullopt;
  }
  if (std::find(generation->sizes.begin(), generation->sizes.end(), *size) == generation->sizes.end()) {
    std::vector<std::string> valid;
    for (const int s : generation->sizes) {
      valid.push_back(std::string(prefix) + "-" + std::to_string(s));
    }
    // Multi-host slices come in more shapes than the catalog lists (v4's AxBxC topologies); whole hosts of one.
    const long long chips = *size / generation->cores_per_chip;
    if (off_catalog != nullptr && *size % generation->cores_per_chip == 0 &&
        chips > generation->max_single_host_chips && chips % generation->max_chips_per_host == 0 &&
        *size <= generation->sizes.back()) {
      *off_catalog = true;
      set_why(why, quoted + " is not among the " + generation->name + " sizes jobman knows (" +
                       util::join(valid, ", ") + ")");
    } else {
      set_why(why, quoted + " is not a valid " + generation->name + " size (valid: " + util::join(valid, ", ") + ")");
      return std::nullopt;
    }
  }
  AcceleratorType out;
  out.name = generation->name + "-" + std::to_string(*size);
  out.generation = generation;
  out.size = static_cast<int>(*size);
  out.chips = out.size / generation->cores_per_chip;
  if (out.chips <= generation->max_single_host_chips) {
    out.hosts = 1;
    out.chips_per_host = out.chips;
  } else {
    out.hosts = out.chips / generation->max_chips_per_host;
    out.chips_per_host = generation->max_chips_per_host;
  }
  return out;
}

} // namespace detail

std::optional<AcceleratorType> find_accelerator(std::string_view name, std::string* why) {
  if (why != nullptr) {
    return detail::find_accelerator(name, why, nullptr);
  }
  // Reports and fair share resolve the same few names for every job and attempt of a store: once each, per thread.
  thread_local std::unordered_map<std::string, std::optional<AcceleratorType>> resolved;
  const auto found = resolved.find(std::string(name));
  if (found != resolved.end()) {
    return found->second;
  }
  constexpr std::size_t kMaxRemembered = 256; // Names come from records; a store of odd ones cannot grow this.
  auto type = detail::find_accelerator(name, nullptr, nullptr);
  if (resolved.size() < kMaxRemembered) {
    resolved.emplace(std::string(name), type);
  }
  return type;
}

} // namespace jobman::config
