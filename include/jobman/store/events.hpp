// The store's events: each job's history, oldest first.
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace jobman::store {

class Events : public StoreView {
public:
  using StoreView::StoreView;

  // Appends an event.
  void append(std::int64_t job_id, std::string_view kind, std::string_view message, std::string_view data_json = {});
  // Appends an event as one of the writes that drive the job (JobStore::drive_as): not at all, throwing
  // LeaseLostError, when the job's lease names another supervisor.
  void append_as_driver(std::int64_t job_id, std::string_view kind, std::string_view message,
                        std::string_view data_json = {});
  // Records what a listing said of the job's slice (JobRecord::slice_state) with an `observation` event.
  void record_observation(std::int64_t job_id, std::string_view state, std::string_view message,
                          std::string_view data_json);
  // The job's events, oldest first.
  [[nodiscard]] std::vector<domain::EventRecord> of(std::int64_t job_id) const;
  // Calls `fn` with every phase change of the jobs whose ids are in [first, last], by job, oldest first (one range
  // scan of a partial index), without its message.
  void for_each_phase_change(std::int64_t first, std::int64_t last,
                             const std::function<void(const domain::EventRecord&)>& fn) const;
};

} // namespace jobman::store
