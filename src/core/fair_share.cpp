// Fair share of a lab's chips (see fair_share.hpp).
#include "jobman/core/fair_share.hpp"

#include "jobman/config/accelerator.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/store/settings.hpp"
#include "jobman/store/shares.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"

#include <algorithm>
#include <limits>

namespace jobman::core {

namespace {

constexpr std::string_view kSharePrefix = "share:";
constexpr std::string_view kCapPrefix = "cap:";
constexpr std::string_view kEveryUser = "*";

} // namespace

std::optional<int> parse_chips(std::string_view text) {
  const auto value = util::parse_int(text);
  if (!value || *value < 0 || *value > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  return static_cast<int>(*value);
}

std::optional<Tier> parse_tier(const std::string& text, std::string* why) {
  const auto colon = text.find(':');
  const auto fail = [&](const std::string& message) -> std::optional<Tier> {
    if (why != nullptr) {
      *why = message;
    }
    return std::nullopt;
  };
  if (colon == std::string::npos) {
    return fail("'" + text + "' is not a tier: write GENERATION:PRICING, for example v4:spot or v5e:ondemand");
  }
  const auto generation = text.substr(0, colon);
  const auto written = text.substr(colon + 1);
  const auto pricing = domain::parse_pricing(written);
  if (!pricing) {
    return fail("'" + written + "' is not a pricing: spot, ondemand or preemptible");
  }
  for (const auto& known : config::tpu_generations()) {
    if (known.name == generation ||
        std::find(known.aliases.begin(), known.aliases.end(), generation) != known.aliases.end()) {
      return Tier{known.name, *pricing};
    }
  }
  std::string names;
  for (const auto& known : config::tpu_generations()) {
    names += (names.empty() ? "" : ", ") + known.name;
  }
  return fail("'" + generation + "' is not a TPU generation: " + names);
}

std::optional<std::pair<Tier, int>> tier_of(const std::string& accelerator, domain::Pricing pricing) {
  const auto type = config::find_accelerator(accelerator);
  if (!type || type->generation == nullptr) {
    return std::nullopt;
  }
  return std::make_pair(Tier{type->generation->name, pricing}, type->chips);
}

std::optional<int> ShareLimits::share_of(const std::string& user, const Tier& tier) const {
  if (const auto own = per_user.find({user, tier}); own != per_user.end()) {
    return own->second;
  }
  if (const auto every = every_user.find(tier); every != every_user.end()) {
    return every->second;
  }
  return std::nullopt;
}

ShareLimits read_share_limits(const store::JobStore& store) {
  ShareLimits limits;
  // A setting that does not parse (written by a later jobman, or by hand) limits nothing rather than everything.
  for (const auto& [key, value] : store.settings().with_prefix(std::string(kSharePrefix))) {
    const auto chips = parse_chips(value);
    const auto rest = key.substr(kSharePrefix.size());
    const auto second = rest.find(':', rest.find(':') + 1);
    if (!chips || second == std::string::npos) {
      continue;
    }
    const auto tier = parse_tier(rest.substr(0, second), nullptr);
    const auto user = rest.substr(second + 1);
    if (!tier || user.empty()) {
      continue;
    }
    if (user == kEveryUser) {
      limits.every_user[*tier] = *chips;
    } else {
      limits.per_user[{user, *tier}] = *chips;
    }
  }
  for (const auto& [key, value] : store.settings().with_prefix(std::string(kCapPrefix))) {
    const auto chips = parse_chips(value);
    const auto tier = parse_tier(key.substr(kCapPrefix.size()), nullptr);
    if (chips && tier) {
      limits.lab_cap[*tier] = *chips;
    }
  }
  return limits;
}

bool set_share_limit(store::JobStore& store, const std::string& user, const Tier& tier, std::optional<int> chips) {
  const std::string key =
      user.empty() ? std::string(kCapPrefix) + tier.key() : std::string(kSharePrefix) + tier.key() + ":" + user;
  return store.settings().put(key, chips ? std::optional<std::string>(std::to_string(*chips)) : std::nullopt);
}

ChipsInFlight::ChipsInFlight(const std::vector<store::SliceUse>& in_flight) {
  for (const auto& use : in_flight) {
    const auto tier = tier_of(use.accelerator, use.pricing);
    if (!tier) {
      continue;
    }
    const int chips = tier->second * use.count;
    if (use.kind != domain::JobKind::worker) {
      by_user[{use.user, tier->first}] += chips;
    }
    if (use.kind != domain::JobKind::task) {
      lab[tier->first] += chips;
    }
  }
}

int ChipsInFlight::of(const std::string& user, const Tier& tier) const {
  const auto found = by_user.find({user, tier});
  return found == by_user.end() ? 0 : found->second;
}

int ChipsInFlight::of_lab(const Tier& tier) const {
  const auto found = lab.find(tier);
  return found == lab.end() ? 0 : found->second;
}

std::string FairShare::refusal(const ChipsInFlight& chips, const std::string& user, domain::JobKind kind,
                               const std::string& accelerator, domain::Pricing pricing) const {
  const auto tier = tier_of(accelerator, pricing);
  if (!tier) {
    return {};
  }
  const auto& [which, wanted] = *tier;
  if (kind != domain::JobKind::worker) {
    if (const auto share = limits_.share_of(user, which)) {
      const int held = chips.of(user, which);
      if (wanted > *share) {
        return user + " may hold " + std::to_string(*share) + " " + which.label() + " chips, and " + accelerator +
               " has " + std::to_string(wanted);
      }
      if (held + wanted > *share) {
        return user + " holds " + std::to_string(held) + " of their " + std::to_string(*share) + " " + which.label() +
               " chips";
      }
    }
  }
  if (kind != domain::JobKind::task) {
    if (const auto cap = limits_.lab_cap.find(which); cap != limits_.lab_cap.end()) {
      const int held = chips.of_lab(which);
      if (held + wanted > cap->second) {
        return "the lab holds " + std::to_string(held) + " of its " + std::to_string(cap->second) + " " +
               which.label() + " chips";
      }
    }
  }
  return {};
}

std::string FairShare::refusal(const std::vector<store::SliceUse>& in_flight, const std::string& user,
                               domain::JobKind kind, const std::string& accelerator, domain::Pricing pricing) const {
  return refusal(ChipsInFlight(in_flight), user, kind, accelerator, pricing);
}

std::vector<std::string> FairShare::claim_order(const std::vector<store::SliceUse>& in_flight,
                                                const std::vector<std::string>& users, const std::string& accelerator,
                                                domain::Pricing pricing) const {
  const ChipsInFlight chips(in_flight);
  const auto tier = tier_of(accelerator, pricing);
  std::vector<std::pair<int, std::string>> ranked;
  for (const auto& user : users) {
    if (refusal(chips, user, domain::JobKind::task, accelerator, pricing).empty()) {
      ranked.emplace_back(tier ? chips.of(user, tier->first) : 0, user);
    }
  }
  // Fewest chips first; among equals, the order `users` came in (whose first task was queued first).
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  out.reserve(ranked.size());
  for (auto& [held, user] : ranked) {
    out.push_back(std::move(user));
  }
  return out;
}

std::string share_wait_of_task(const FairShare& share, const ChipsInFlight& chips, const domain::JobRecord& task,
                               const std::vector<domain::JobRecord>& workers) {
  std::string first;
  for (const auto& worker : workers) {
    // A worker's record always names its pricing, as its offer to the queue does; only a task's may name none.
    const auto pricing = worker.pricing.value_or(domain::Pricing::spot);
    if (worker.kind != domain::JobKind::worker || domain::is_terminal(worker.phase) ||
        worker.accelerator != task.accelerator || (!task.zone.empty() && task.zone != worker.zone) ||
        (task.pricing && *task.pricing != pricing)) {
      continue;
    }
    auto why = share.refusal(chips, task.user, domain::JobKind::task, worker.accelerator, pricing);
    if (why.empty()) {
      return {};
    }
    if (first.empty()) {
      first = std::move(why);
    }
  }
  return first;
}

} // namespace jobman::core
