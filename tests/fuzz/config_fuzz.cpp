// libFuzzer target: the job-config loader from text (YAML, ${...} interpolation, --set overrides, sweeps).
// Input: leading lines "--set KEY=VALUE" and "--sweep KEY=V1,V2" are command-line overrides; the rest is the
// config. A ConfigError or Error is the loader's answer to a bad config; anything else escaping is a bug.
#include "jobman/config/loader.hpp"
#include "jobman/util/error.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  jobman::config::LoadOptions options;
  options.default_zone = "us-central2-b";
  while (true) {
    const auto end = input.find('\n');
    const std::string_view line = input.substr(0, end);
    if (line.starts_with("--set ")) {
      options.set_overrides.emplace_back(line.substr(6));
    } else if (line.starts_with("--sweep ")) {
      options.sweep_args.emplace_back(line.substr(8));
    } else {
      break;
    }
    input.remove_prefix(end == std::string_view::npos ? input.size() : end + 1);
  }
  try {
    const auto configs = jobman::config::parse_job_configs(std::string(input), "fuzz.yaml", options);
    for (const auto& config : configs) {
      (void)jobman::config::to_json(config);
    }
  } catch (const jobman::Error&) {
    // ConfigError and Error are the loader's documented answers.
  }
  return 0;
}
