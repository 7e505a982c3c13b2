// The store's rivals: the slices a first-ready attempt (tpu.strategy: first-ready) requests alongside its own, until
// one comes up first.
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace jobman::store {

class Rivals : public StoreView {
public:
  using StoreView::StoreView;

  // Attempts::begin (with create_pending) on `where`, and `rivals` requested alongside it, in one transaction. Each
  // rival's queued resource and node are named by its Placement::queued_resource.
  domain::AttemptRecord begin_race(std::int64_t job_id, const domain::Placement& where,
                                   const std::vector<domain::Placement>& rivals);
  // The job's rivals (every attempt's, `attempt`'s only when given), by attempt then request.
  [[nodiscard]] std::vector<domain::RivalRecord> of(std::int64_t job_id, std::optional<int> attempt = {}) const;
  // Records that the API accepted the request for rival `name`. Repeating it changes nothing.
  void confirm_created(std::int64_t job_id, const std::string& name);
  // Rival `name` came up first: it becomes attempt `number`'s slice, and the attempt's slice until now becomes a rival
  // (to be deleted) with `outcome`, in one transaction with an event saying `why`.
  void promote(std::int64_t job_id, int number, const std::string& name, domain::RivalOutcome outcome,
               const std::string& why);
  // Sets the outcome of a rival still racing (why it leaves the race: outrun, lost, abandoned).
  void end(std::int64_t job_id, const std::string& name, domain::RivalOutcome outcome);
};

} // namespace jobman::store
