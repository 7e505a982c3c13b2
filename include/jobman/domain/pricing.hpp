// How a TPU slice is paid for and provisioned (spot, on-demand, preemptible, flex-start, reserved, best-effort): the
// one type, the names jobman writes for it, and the
// one parser of every spelling a config, a task script, a flag or a table accepts.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::domain {

// How the slice is paid for and how it may be taken away. The last three are the provisioning models only the TPU
// API's v2alpha1 asks for: flex-start (Dynamic Workload Scheduler capacity that runs for at most a set duration, then
// ends), reserved (placed in a reservation of the project) and best-effort (spare capacity, preempted first).
enum class Pricing { spot, ondemand, preemptible, flex_start, reserved, best_effort };

// Every pricing, in the order declared.
const std::vector<Pricing>& all_pricings();
// The name jobman writes in its store, its snapshots and its JSON: "spot", "ondemand", "preemptible", "flex-start",
// "reserved", "best-effort".
std::string to_string(Pricing value);
// The name in sentences for people: "spot", "on-demand", "preemptible", "flex-start", "reserved", "best-effort".
std::string display_name(Pricing value);
// Whether a request at this pricing needs the TPU API's v2alpha1 (flex-start, reserved, best-effort).
bool needs_v2alpha1(Pricing value);
// Any accepted spelling back to the value, exactly as written (case counts): the names to_string gives, "on-demand",
// "on_demand" and "standard" (jobman-lite's) for on-demand, and "flex_start" and "best_effort"; nullopt for anything
// else.
std::optional<Pricing> parse_pricing(std::string_view text);
// Every spelling parse_pricing accepts: the names to_string gives first, then the other names of on-demand.
const std::vector<std::string>& pricing_spellings();

} // namespace jobman::domain
