// What each attempt read from its bucket: at the attempt's end the supervisor reads the metrics of every worker's
// gcsfuse (its --prometheus-port, through the connection it already has) and records the sum per bucket; the report
// and `jobman buckets` price what crossed regions at prices.yaml's data-transfer rates.
#pragma once

#include "jobman/config/prices.hpp"
#include "jobman/remote/gcloud.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/zone_catalogs.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::core {

// What one worker's gcsfuse says it moved since its mount.
struct GcsfuseCounts {
  std::int64_t read_bytes = 0; // gcs_read_bytes_count.
  std::int64_t write_ops = 0;  // fs_ops_count{fs_op="WriteFile"}.
};

// The counts in gcsfuse's Prometheus text; nullopt when it holds no gcs_read_bytes_count (not gcsfuse's metrics).
// Takes the names with an exporter's unit and _total suffixes too (gcs_read_bytes_count_bytes_total).
std::optional<GcsfuseCounts> parse_gcsfuse_metrics(std::string_view text);

// The shell command that prints a worker's gcsfuse metrics served on `port`: from each of the worker's own addresses
// (hostname -I), then its loopback, the first that answers. Exits non-zero when none does.
std::string gcsfuse_metrics_command(int port);

// The runs of gcsfuse_metrics_command on an attempt's workers, summed into what the attempt read from `bucket` (job,
// attempt and zone as given; recorded_ms left 0); nullopt when no worker answered with metrics.
std::optional<store::BucketTransfer> sum_transfers(const std::vector<remote::WorkerRun>& runs, std::int64_t job_id,
                                                   int attempt, const std::string& bucket, const std::string& zone);

// A byte count as people read it: "900 B", "17.0 KiB", "3.25 GiB".
std::string describe_bytes(std::int64_t bytes);

// What `bytes` read from a bucket at `place` in `zone` cost at `rates`: 0 within its region; nullopt when the rates
// have no price for the crossing or the place is unknown.
std::optional<double> transfer_cost(const config::TransferRates& rates, const store::BucketPlace& place,
                                    const std::string& zone, std::int64_t bytes);

} // namespace jobman::core
