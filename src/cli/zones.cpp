// The zones that the commands listing the cloud zone by zone (sync, reservations) look in, and their listings, a few
// zones at once.
#include "commands.hpp"
#include "jobman/core/orphans.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"

#include <algorithm>
#include <thread>

namespace jobman::cli {

namespace {

// How many zones are listed at once.
constexpr std::size_t kParallelListings = 8;

} // namespace

void check_zone_arguments(const std::vector<std::string>& zones, bool all_zones) {
  for (const auto& zone : zones) {
    if (zone.empty() || zone.find('/') != std::string::npos) {
      throw UsageError("--zone: '" + zone + "' is not a zone name (us-central2-b)");
    }
  }
  if (all_zones && !zones.empty()) {
    throw UsageError("--all-zones and --zone: give one or the other");
  }
}

std::vector<std::string> zones_to_look_in(Context& ctx, const core::CloudAccess& access,
                                          const std::vector<std::string>& given, bool all_zones, bool quiet) {
  std::vector<std::string> zones = given;
  if (zones.empty() && !all_zones) {
    zones = core::zones_in_use(ctx.store(), access.settings.zone);
  }
  if (zones.empty()) {
    // No store to go by (it was lost, or never named a zone): every zone where the project can have TPUs.
    zones = access.client->list_locations(access.project);
    if (zones.empty()) {
      throw Error("the TPU API lists no zone for project " + access.project + ": no zone to look in");
    }
    if (!quiet && !all_zones) {
      *ctx.err << "jobman: the store names no zone; looking in all " << zones.size() << " zones of project "
               << access.project << " (--zone narrows the search)\n";
    }
  }
  std::sort(zones.begin(), zones.end());
  zones.erase(std::unique(zones.begin(), zones.end()), zones.end());
  return zones;
}

void list_each_zone(const std::vector<std::string>& zones, const std::function<void(std::size_t)>& list) {
  std::vector<std::string> errors(zones.size());
  for (std::size_t begin = 0; begin < zones.size(); begin += kParallelListings) {
    std::vector<std::jthread> listers;
    for (std::size_t i = begin; i < std::min(zones.size(), begin + kParallelListings); ++i) {
      listers.emplace_back([&, i] {
        try {
          list(i);
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    }
  }
  for (const auto& error : errors) {
    if (!error.empty()) {
      throw Error(error);
    }
  }
}

} // namespace jobman::cli
