#include "jobman/core/bucket_transfers.hpp"

#include "jobman/core/data_locality.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <fmt/format.h>

namespace jobman::core {

namespace {

// The value of a sample line whose metric is `name` (with an exporter's _bytes/_total suffixes) and whose labels, if
// any, hold `label` (empty: any); nullopt for any other line.
std::optional<double> sample(std::string_view line, std::string_view name, std::string_view label) {
  if (!line.starts_with(name)) {
    return std::nullopt;
  }
  auto rest = line.substr(name.size());
  for (const std::string_view suffix : {"_bytes", "_total"}) {
    if (rest.starts_with(suffix)) {
      rest.remove_prefix(suffix.size());
    }
  }
  std::string_view labels;
  if (rest.starts_with('{')) {
    const auto close = rest.find('}');
    if (close == std::string_view::npos) {
      return std::nullopt;
    }
    labels = rest.substr(1, close - 1);
    rest.remove_prefix(close + 1);
  }
  if (rest.empty() || rest.front() != ' ' || (!label.empty() && labels.find(label) == std::string_view::npos)) {
    return std::nullopt;
  }
  rest.remove_prefix(1);
  rest = rest.substr(0, rest.find(' ')); // A timestamp may follow.
  double value = 0;
  const auto* end = rest.data() + rest.size();
  if (std::from_chars(rest.data(), end, value).ptr != end || !std::isfinite(value) || value < 0) {
    return std::nullopt;
  }
  return value;
}

} // namespace

std::optional<GcsfuseCounts> parse_gcsfuse_metrics(std::string_view text) {
  GcsfuseCounts counts;
  bool found = false;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    auto line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (line.ends_with('\r')) {
      line.remove_suffix(1);
    }
    if (line.empty() || line.front() == '#') {
      continue;
    }
    if (const auto read = sample(line, "gcs_read_bytes_count", "")) {
      counts.read_bytes += static_cast<std::int64_t>(*read);
      found = true;
    } else if (const auto writes = sample(line, "fs_ops_count", "fs_op=\"WriteFile\"")) {
      counts.write_ops += static_cast<std::int64_t>(*writes);
    }
  }
  if (!found) {
    return std::nullopt;
  }
  return counts;
}

std::string gcsfuse_metrics_command(int port) {
  const auto p = std::to_string(port);
  return "for a in $(hostname -I 2> /dev/null) 127.0.0.1; do curl -fsS --max-time 5 \"http://$a:" + p +
         "/metrics\" 2> /dev/null && exit 0; done; echo \"no gcsfuse metrics on port " + p + "\" >&2; exit 3";
}

std::optional<store::BucketTransfer> sum_transfers(const std::vector<remote::WorkerRun>& runs, std::int64_t job_id,
                                                   int attempt, const std::string& bucket, const std::string& zone) {
  store::BucketTransfer sum;
  sum.job_id = job_id;
  sum.attempt = attempt;
  sum.bucket = bucket;
  sum.zone = zone;
  sum.workers = static_cast<int>(runs.size());
  for (const auto& run : runs) {
    const auto counts = run.exit_code == 0 ? parse_gcsfuse_metrics(run.output) : std::nullopt;
    if (counts) {
      sum.read_bytes += counts->read_bytes;
      sum.write_ops += counts->write_ops;
      ++sum.workers_read;
    }
  }
  if (sum.workers_read == 0) {
    return std::nullopt;
  }
  return sum;
}

std::string describe_bytes(std::int64_t bytes) {
  static constexpr std::array<const char*, 5> kUnits{"B", "KiB", "MiB", "GiB", "TiB"};
  auto value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) {
    return std::to_string(bytes) + " B";
  }
  return fmt::format("{:.{}f} {}", value, value < 10 ? 2 : 1, kUnits[unit]);
}

std::optional<double> transfer_cost(const config::TransferRates& rates, const store::BucketPlace& place,
                                    const std::string& zone, std::int64_t bytes) {
  const auto per_gib = transfer_per_gib(rates, place, zone);
  if (!per_gib) {
    return std::nullopt;
  }
  return *per_gib * static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
}

} // namespace jobman::core
