// The store's findings of bad hardware: the physical machines a job's attempts found faulty.
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace jobman::store {

class BadHardware : public StoreView {
public:
  using StoreView::StoreView;

  // Remembers a finding (its id and time are set here), with an event on the job.
  void record(const domain::BadHardwareRecord& finding);
  // The findings on any of `hosts` (physical machines) since `since_ms`, newest first.
  [[nodiscard]] std::vector<domain::BadHardwareRecord> on(const std::vector<std::string>& hosts,
                                                          std::int64_t since_ms) const;
  // A job's findings, oldest first.
  [[nodiscard]] std::vector<domain::BadHardwareRecord> of(std::int64_t job_id) const;
};

} // namespace jobman::store
