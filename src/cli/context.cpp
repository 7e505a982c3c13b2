#include "context.hpp"

#include "jobman/core/jobs.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"

namespace jobman::cli {

store::JobStore& Context::store() {
  if (!opened_) {
    opened_.emplace(core::open_store());
  }
  return *opened_;
}

std::int64_t parse_job_id_argument(const std::string& text) {
  if (auto id = domain::parse_job_id(text)) {
    return *id;
  }
  throw UsageError("'" + text + "' is not a job id (job ids are numbers such as 000042)");
}

} // namespace jobman::cli
