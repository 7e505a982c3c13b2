// Shared by the server's sources only: how the /v2 routes read their standard query parameters.
#pragma once

#include "mock_cloud/list_query.hpp"

#include <httplib.h>
#include <optional>

namespace jobman::mock::server_internal {

// Reads pageSize (0 when absent); nullopt when it is not a whole number.
std::optional<int> page_size(const httplib::Request& req);

// Reads a list call's pageSize, pageToken, filter and orderBy; nullopt when pageSize is not a whole number.
std::optional<ListQuery> list_query(const httplib::Request& req);

} // namespace jobman::mock::server_internal
