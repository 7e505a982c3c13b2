// How a TPU slice is paid for (spot, on-demand, preemptible): the one type, the names jobman writes for it, and the
// one parser of every spelling a config, a task script, a flag or a table accepts.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::domain {

// How the slice is paid for and how it may be taken away.
enum class Pricing { spot, ondemand, preemptible };

// Every pricing, in the order declared: spot, ondemand, preemptible.
const std::vector<Pricing>& all_pricings();
// The name jobman writes in its store, its snapshots and its JSON: "spot", "ondemand", "preemptible".
std::string to_string(Pricing value);
// The name in sentences for people: "spot", "on-demand", "preemptible".
std::string display_name(Pricing value);
// Any accepted spelling back to the value, exactly as written (case counts): the names to_string gives, and
// "on-demand", "on_demand" and "standard" (jobman-lite's) for on-demand; nullopt for anything else.
std::optional<Pricing> parse_pricing(std::string_view text);
// Every spelling parse_pricing accepts: the names to_string gives first, then the other names of on-demand.
const std::vector<std::string>& pricing_spellings();

} // namespace jobman::domain
