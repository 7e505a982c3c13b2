// A small HTTP client over libcurl whose answers are plain data: status, headers, body, or a transport failure.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace jobman::cloud {

// Why a request got no HTTP answer.
enum class TransportFailure {
  none,           // An HTTP answer arrived (whatever its status).
  connect_failed, // The host could not be resolved or reached.
  timed_out,      // The connection or the whole request took too long.
  other,          // Anything else (TLS, a malformed URL, a broken reply).
};

// The failure kind as a word, for messages: "none", "connect failed", "timed out", "other".
const char* to_string(TransportFailure failure);

// One request. Header values are sent as given and never logged.
struct HttpRequest {
  std::string method = "GET";                               // GET, POST, PUT, PATCH or DELETE.
  std::string url;                                          // Absolute URL with its query string.
  std::vector<std::pair<std::string, std::string>> headers; // Name and value, in order.
  std::string body;                                         // Sent for POST, PUT and PATCH (may be empty).
  std::optional<std::chrono::milliseconds> timeout;         // Whole-request limit; the client's default when unset.
};

// One answer: an HTTP status, or a transport failure with curl's explanation.
struct HttpResponse {
  int status = 0;                                    // HTTP status; 0 when `failure` is not none.
  TransportFailure failure = TransportFailure::none; // Why there is no status.
  std::string error;                                 // curl's message when `failure` is not none.
  std::map<std::string, std::string> headers;        // Response headers, names in lower case (last value wins).
  std::string body;                                  // The body as received.
  // A response header by case-insensitive name.
  [[nodiscard]] std::optional<std::string> header(const std::string& name) const;
};

// Limits applied to every request of one client.
struct HttpOptions {
  std::chrono::milliseconds connect_timeout{10'000}; // Connecting, including DNS and TLS.
  std::chrono::milliseconds request_timeout{60'000}; // A whole request, unless the request sets its own.
  std::string user_agent = "jobman";                 // The User-Agent header.
};

// Reusable libcurl easy handles (kept-alive connections, TCP_NODELAY). Thread-safe: requests run side by side,
// each on a handle of its own, so one slow request never holds up another.
class HttpClient {
public:
  // Sets up the handle; throws jobman::Error if libcurl cannot be initialised.
  explicit HttpClient(HttpOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `request` and waits for the answer; never throws for network failures.
  HttpResponse send(const HttpRequest& request);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Percent-encodes `text` for a query string or a form body (RFC 3986 unreserved characters kept).
std::string url_encode(const std::string& text);

} // namespace jobman::cloud
