// The job driver reading what an attempt read from its bucket: when the attempt ends with its workers still there,
// their gcsfuse metrics are read through the same connection the driver runs everything else over, summed, and kept
// in the store (attempt_transfers) for show, the report and `jobman buckets`.
#include "job_driver.hpp"
#include "jobman/core/bucket_transfers.hpp"
#include "jobman/store/attempts.hpp"

#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

std::optional<JobDriver::TransferProbe> JobDriver::transfer_probe(const Driven& d) {
  const auto* current = d.current();
  if (current == nullptr || !d.config->gcsfuse || d.config->gcsfuse->metrics_port() == 0) {
    return std::nullopt;
  }
  return TransferProbe{d.job.id, d.job.attempt, d.config->gcsfuse->bucket_name, current->zone,
                       d.config->gcsfuse->metrics_port()};
}

std::optional<store::BucketTransfer> JobDriver::read_transfers(WorkerOps& ops, const remote::SliceTarget& target,
                                                               const std::vector<int>& workers,
                                                               const std::optional<TransferProbe>& probe) {
  if (!probe) {
    return std::nullopt;
  }
  try {
    const auto runs = ops.run(target, workers, gcsfuse_metrics_command(probe->port), kRemoteTimeout);
    auto sum = sum_transfers(runs, probe->job_id, probe->attempt, probe->bucket, probe->zone);
    if (!sum) {
      spdlog::info("{}: no worker's gcsfuse served its metrics on port {}: what attempt {} read from gs://{} is not "
                   "known",
                   job_label(probe->job_id), probe->port, probe->attempt, probe->bucket);
    }
    return sum;
  } catch (const std::exception& e) {
    spdlog::warn("{}: reading the workers' gcsfuse metrics: {}", job_label(probe->job_id), e.what());
    return std::nullopt;
  }
}

void JobDriver::record_transfers(const std::optional<store::BucketTransfer>& transfer) {
  if (!transfer) {
    return;
  }
  auto recorded = *transfer;
  recorded.recorded_ms = host_.now_ms();
  try {
    store().attempts().record_transfer(recorded);
  } catch (const std::exception& e) {
    spdlog::warn("{}: recording what attempt {} read: {}", job_label(recorded.job_id), recorded.attempt, e.what());
    return;
  }
  if (Driven* live = host_.find(recorded.job_id)) {
    event(*live, "observation",
          "attempt " + std::to_string(recorded.attempt) + " read " + describe_bytes(recorded.read_bytes) +
              " from gs://" + recorded.bucket + " in " + recorded.zone,
          {{"attempt", recorded.attempt},
           {"bucket", recorded.bucket},
           {"zone", recorded.zone},
           {"read_bytes", recorded.read_bytes},
           {"write_ops", recorded.write_ops},
           {"workers_read", recorded.workers_read},
           {"workers", recorded.workers}});
  }
}

} // namespace jobman::core::supervision
