// Shared by the server's sources only: how the routes read their standard query parameters and send their replies.
#pragma once

#include "mock_cloud/list_query.hpp"
#include "mock_cloud/world.hpp"

#include <httplib.h>
#include <optional>

namespace jobman::mock::server_internal {

// Reads pageSize (0 when absent); nullopt when it is not a whole number.
std::optional<int> page_size(const httplib::Request& req);

// Reads a list call's pageSize, pageToken, filter and orderBy; nullopt when pageSize is not a whole number.
std::optional<ListQuery> list_query(const httplib::Request& req);

// Sends `reply` as JSON (indented when `pretty`).
void send_reply(httplib::Response& res, const Reply& reply, bool pretty = true);

// False when the request asks for a compact body: prettyPrint=false (or 0).
bool pretty_printed(const httplib::Request& req);

// Google's partial response: keeps of a successful reply only what the `fields` parameter selects; a 400 when it is
// not well-formed. Does nothing without the parameter.
void select_requested_fields(const httplib::Request& req, Reply& reply);

} // namespace jobman::mock::server_internal
