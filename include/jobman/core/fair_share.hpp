// Fair share of a lab's chips: a share per user and a cap for the lab, each per tier (a TPU generation and a pricing,
// "v4 spot"), kept in the store's settings. The store applies it inside the transactions that hand chips out (see
// store::SharePolicy); `status` and `jobman store limits` explain it. See docs/LAB.md, "Fair share".
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/shares.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jobman::core {

// A tier of chips: a generation as accelerator names begin ("v4", "v5litepod") and a pricing.
struct Tier {
  std::string generation;
  domain::Pricing pricing = domain::Pricing::spot;
  bool operator==(const Tier&) const = default;
  // By generation, then by the pricing's name ("ondemand", "preemptible", "spot"): the order tiers are listed in.
  bool operator<(const Tier& other) const {
    return generation != other.generation ? generation < other.generation
                                          : domain::to_string(pricing) < domain::to_string(other.pricing);
  }
  // "v4 spot", as messages say it.
  [[nodiscard]] std::string label() const { return generation + " " + domain::to_string(pricing); }
  // "v4:spot", as commands and settings write it.
  [[nodiscard]] std::string key() const { return generation + ":" + domain::to_string(pricing); }
};

// "v4:spot", "v5e:ondemand" (aliases of a generation and spellings of a pricing accepted, the tier keeping the names
// jobman gives them): the tier, or nullopt with `why` saying what is wrong.
std::optional<Tier> parse_tier(const std::string& text, std::string* why);
// A number of chips as commands and settings write it: a whole number, 0 or more; nullopt otherwise.
std::optional<int> parse_chips(std::string_view text);
// The tier and chips of a slice of `accelerator` in `pricing`; nullopt for an accelerator jobman does not know.
std::optional<std::pair<Tier, int>> tier_of(const std::string& accelerator, domain::Pricing pricing);

// The limits set in a store.
struct ShareLimits {
  std::map<Tier, int> every_user;                       // A user's share when they have none of their own.
  std::map<std::pair<std::string, Tier>, int> per_user; // (user, tier) -> chips.
  std::map<Tier, int> lab_cap;                          // Chips the whole lab may hold.
  [[nodiscard]] bool empty() const { return every_user.empty() && per_user.empty() && lab_cap.empty(); }
  bool operator==(const ShareLimits&) const = default;
  // `user`'s share of `tier`: their own, else every user's; nullopt when unlimited.
  [[nodiscard]] std::optional<int> share_of(const std::string& user, const Tier& tier) const;
};

// The limits in `store`'s settings (keys "share:<tier>:<user>", "*" for every user, and "cap:<tier>").
ShareLimits read_share_limits(const store::JobStore& store);
// Sets a share (`user` a name, or "*" for every user) or, with `user` empty, the lab's cap; nullopt removes it.
// Returns whether it changed. Throws jobman::Error unless the caller may manage the store.
bool set_share_limit(store::JobStore& store, const std::string& user, const Tier& tier, std::optional<int> chips);

// Chips in flight by user and by tier, from store::Shares::in_flight.
struct ChipsInFlight {
  std::map<std::pair<std::string, Tier>, int> by_user; // A user's jobs' own slices and the workers' their tasks hold.
  std::map<Tier, int> lab;                             // Jobs' and workers' slices: what the lab holds of the cloud.
  explicit ChipsInFlight(const std::vector<store::SliceUse>& in_flight);
  [[nodiscard]] int of(const std::string& user, const Tier& tier) const;
  [[nodiscard]] int of_lab(const Tier& tier) const;
};

// The policy the store applies. A user's jobs and tasks count against their share; a job's or a worker's new slice
// against the lab's cap too (a task borrows chips the lab holds already). Users claim a worker in the order of the
// chips they hold in its tier, fewest first; their own tasks in order of priority, then queue order.
class FairShare : public store::SharePolicy {
public:
  explicit FairShare(ShareLimits limits) : limits_(std::move(limits)) {}
  [[nodiscard]] bool limits_anything() const override { return !limits_.empty(); }
  [[nodiscard]] std::string refusal(const std::vector<store::SliceUse>& in_flight, const std::string& user,
                                    domain::JobKind kind, const std::string& accelerator,
                                    domain::Pricing pricing) const override;
  [[nodiscard]] std::vector<std::string> claim_order(const std::vector<store::SliceUse>& in_flight,
                                                     const std::vector<std::string>& users,
                                                     const std::string& accelerator,
                                                     domain::Pricing pricing) const override;
  // refusal() against chips counted already.
  [[nodiscard]] std::string refusal(const ChipsInFlight& chips, const std::string& user, domain::JobKind kind,
                                    const std::string& accelerator, domain::Pricing pricing) const;
  [[nodiscard]] const ShareLimits& limits() const { return limits_; }

private:
  ShareLimits limits_;
};

// Why the fair share keeps queued `task` off every unfinished worker of `workers` that could run it (the first such
// worker's refusal); "" when one of them would take it, or none could.
std::string share_wait_of_task(const FairShare& share, const ChipsInFlight& chips, const domain::JobRecord& task,
                               const std::vector<domain::JobRecord>& workers);

} // namespace jobman::core
