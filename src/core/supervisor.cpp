// The public face of the supervisor; the loop and the job driver are in src/core/supervisor/.
#include "jobman/core/supervisor.hpp"

#include "supervisor/loop.hpp"

namespace jobman::core {

struct Supervisor::Impl {
  Impl(const CloudAccess& access, std::string store_location, SupervisorOptions options)
      : loop(access, std::move(store_location), std::move(options)) {}
  supervision::SupervisorLoop loop;
};

Supervisor::Supervisor(const CloudAccess& access, std::string store_location, SupervisorOptions options)
    : impl_(std::make_unique<Impl>(access, std::move(store_location), std::move(options))) {}

Supervisor::~Supervisor() = default;

void Supervisor::run(const std::stop_token& stop) {
  impl_->loop.run(stop);
}

bool Supervisor::settled() const {
  return impl_->loop.settled();
}

SupervisorStats Supervisor::stats() const {
  return impl_->loop.stats();
}

} // namespace jobman::core
