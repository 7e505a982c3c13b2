#include "jobman/cloud/http.hpp"

#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"

#include <cctype>
#include <curl/curl.h>
#include <functional>
#include <memory>
#include <mutex>
#include <spdlog/spdlog.h>
#include <vector>

namespace jobman::cloud {
namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw Error("cannot initialise libcurl");
    }
  });
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(user);
  const std::string line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    headers->clear(); // A new response (after a redirect or a 100 Continue).
    return size * count;
  }
  const auto colon = line.find(':');
  if (colon != std::string::npos) {
    auto value = line.substr(colon + 1);
    const auto begin = value.find_first_not_of(" \t");
    const auto end = value.find_last_not_of(" \t\r\n");
    value = begin == std::string::npos ? std::string() : value.substr(begin, end - begin + 1);
    (*headers)[util::to_lower(line.substr(0, colon))] = value;
  }
  return size * count;
}

TransportFailure classify(CURLcode code) {
  switch (code) {
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY:
  case CURLE_COULDNT_CONNECT:
  case CURLE_SEND_ERROR:
  case CURLE_RECV_ERROR:
  case CURLE_GOT_NOTHING: return TransportFailure::connect_failed;
  case CURLE_OPERATION_TIMEDOUT: return TransportFailure::timed_out;
  default: return TransportFailure::other;
  }
}

} // namespace

const char* to_string(TransportFailure failure) {
  switch (failure) {
  case TransportFailure::none: return "none";
  case TransportFailure::connect_failed: return "connect failed";
  case TransportFailure::timed_out: return "timed out";
  case TransportFailure::other: return "other";
  }
  return "other";
}

std::optional<std::string> HttpResponse::header(const std::string& name) const {
  auto it = headers.find(util::to_lower(name));
  if (it == headers.end()) {
    return std::nullopt;
  }
  return it->second;
}

struct HttpClient::Impl {
  HttpOptions options;
  std::mutex mutex;
  std::vector<CURL*> idle; // Handles no request is using, each with its kept-alive connections.

  // An idle handle, or a new one when every handle is in use: a slow request never holds up another.
  CURL* take() {
    {
      const std::lock_guard lock(mutex);
      if (!idle.empty()) {
        CURL* curl = idle.back();
        idle.pop_back();
        return curl;
      }
    }
    CURL* curl = curl_easy_init();
    if (curl == nullptr) {
      throw Error("cannot create a libcurl handle");
    }
    return curl;
  }

  void give_back(CURL* curl) {
    const std::lock_guard lock(mutex);
    idle.push_back(curl);
  }
};

HttpClient::HttpClient(HttpOptions options) : impl_(std::make_unique<Impl>()) {
  global_init();
  impl_->options = std::move(options);
  impl_->give_back(impl_->take());
}

HttpClient::~HttpClient() {
  for (CURL* curl : impl_->idle) {
    curl_easy_cleanup(curl);
  }
}

HttpResponse HttpClient::send(const HttpRequest& request) {
  CURL* curl = impl_->take();
  // Back to the idle handles however this ends.
  const std::unique_ptr<CURL, std::function<void(CURL*)>> taken(curl, [this](CURL* used) { impl_->give_back(used); });
  curl_easy_reset(curl); // Keeps the connection cache, clears the previous request's options.

  HttpResponse response;
  char error_buffer[CURL_ERROR_SIZE] = {};
  curl_slist* headers = nullptr;
  for (const auto& [name, value] : request.headers) {
    std::string line = name;
    line.append(": ").append(value);
    headers = curl_slist_append(headers, line.c_str());
  }
  // libcurl sends "Expect: 100-continue" on large POSTs; Google does not need the extra round trip.
  headers = curl_slist_append(headers, "Expect:");

  const auto timeout = request.timeout.value_or(impl_->options.request_timeout);
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(impl_->options.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(curl, CURLOPT_USERAGENT, impl_->options.user_agent.c_str());
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response.headers);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");

  if (request.method == "GET") {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  } else if (request.method == "POST" || request.method == "PUT" || request.method == "PATCH") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    if (request.method != "POST") {
      curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
  } else {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  const CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    response.failure = classify(code);
    response.error = error_buffer[0] != '\0' ? std::string(error_buffer) : std::string(curl_easy_strerror(code));
    response.status = 0;
    spdlog::debug("HTTP {} {}: {} ({})", request.method, request.url, response.error, to_string(response.failure));
    return response;
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  response.status = static_cast<int>(status);
  spdlog::debug("HTTP {} {}: {}", request.method, request.url, response.status);
  return response;
}

std::string url_encode(const std::string& text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const unsigned char c : text) {
    if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

} // namespace jobman::cloud
