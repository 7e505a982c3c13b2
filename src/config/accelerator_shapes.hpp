// Accelerator sizes beyond the catalog, for the config loader.
#pragma once

#include "jobman/config/accelerator.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace jobman::config::detail {

// find_accelerator, and with `off_catalog`: a size of a known generation that the catalog does not list but that
// fills whole hosts of a multi-host slice (v4-384, a 4x4x12 topology) is resolved too; *off_catalog is then true,
// and `why` says it is not in the catalog.
std::optional<AcceleratorType> find_accelerator(std::string_view name, std::string* why, bool* off_catalog);

} // namespace jobman::config::detail
