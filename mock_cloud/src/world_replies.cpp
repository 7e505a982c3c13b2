// Replies: google.rpc errors and their status names, and paged lists with their page tokens.
#include "jobman/util/base64url.hpp"
#include "mock_cloud/world.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <exception>

namespace jobman::mock {

using nlohmann::json;

namespace {

constexpr int kDefaultPageSize = 50;
constexpr int kMaxPageSize = 1000;

std::string encode_page_token(std::size_t offset) {
  return util::base64url_encode("offset:" + std::to_string(offset));
}

// Lenient where util::base64url_decode is strict: bits left over after the last whole byte are ignored, whatever
// their number.
std::optional<std::size_t> decode_page_token(const std::string& token) {
  static const std::string digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string plain;
  unsigned bits = 0;
  int count = 0;
  for (char c : token) {
    auto pos = digits.find(c);
    if (pos == std::string::npos) {
      return std::nullopt;
    }
    bits = (bits << 6) | static_cast<unsigned>(pos);
    count += 6;
    if (count >= 8) {
      count -= 8;
      plain += static_cast<char>((bits >> count) & 255U);
    }
  }
  if (plain.rfind("offset:", 0) != 0) {
    return std::nullopt;
  }
  try {
    std::size_t used = 0;
    auto offset = std::stoull(plain.substr(7), &used);
    if (used != plain.size() - 7) {
      return std::nullopt;
    }
    return static_cast<std::size_t>(offset);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

} // namespace

std::string status_name(int http_status) {
  switch (http_status) {
  case 400: return "INVALID_ARGUMENT";
  case 401: return "UNAUTHENTICATED";
  case 403: return "PERMISSION_DENIED";
  case 404: return "NOT_FOUND";
  case 409: return "ALREADY_EXISTS";
  case 411: return "INVALID_ARGUMENT";
  case 412: return "FAILED_PRECONDITION";
  case 429: return "RESOURCE_EXHAUSTED";
  case 499: return "CANCELLED";
  case 501: return "UNIMPLEMENTED";
  case 503: return "UNAVAILABLE";
  case 504: return "DEADLINE_EXCEEDED";
  default: return http_status >= 500 ? "INTERNAL" : "UNKNOWN";
  }
}

Reply error_reply(int http_status, const std::string& message) {
  // Messages quote the request (ids, zones, projects), which may hold any bytes; a reply is JSON, so UTF-8 only.
  const std::string text =
      json::parse(json(message).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
  return {http_status, {{"error", {{"code", http_status}, {"message", text}, {"status", status_name(http_status)}}}}};
}

namespace world_internal {

Reply page(std::size_t count, const std::function<json(std::size_t)>& render, const char* field, int page_size,
           const std::string& token) {
  std::size_t offset = 0;
  if (!token.empty()) {
    auto decoded = decode_page_token(token);
    if (!decoded || *decoded > count) {
      return error_reply(400, "Invalid page token: '" + token + "'");
    }
    offset = *decoded;
  }
  if (page_size < 0) {
    return error_reply(400, "pageSize must not be negative");
  }
  auto size = static_cast<std::size_t>(page_size == 0 ? kDefaultPageSize : std::min(page_size, kMaxPageSize));
  json out = json::object();
  out[field] = json::array();
  for (std::size_t i = offset; i < count && i < offset + size; ++i) {
    out[field].push_back(render(i));
  }
  if (offset + size < count) {
    out["nextPageToken"] = encode_page_token(offset + size);
  }
  if (out[field].empty()) {
    out.erase(field);
  }
  return {200, out};
}

Reply failed_precondition(const std::string& message) {
  Reply reply = error_reply(400, message);
  reply.body["error"]["status"] = "FAILED_PRECONDITION";
  return reply;
}

} // namespace world_internal

} // namespace jobman::mock
