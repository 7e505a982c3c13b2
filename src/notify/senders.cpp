#include "jobman/notify/senders.hpp"

#include "jobman/util/strings.hpp"

#include <chrono>
#include <cstring>
#include <curl/curl.h>
#include <memory>
#include <nlohmann/json.hpp>

namespace jobman::notify {

namespace {

constexpr std::chrono::milliseconds kTimeout{30'000};

// The first line of an answer's body, shortened, for an error sentence.
std::string brief(const std::string& body) {
  std::string line = body.substr(0, body.find('\n'));
  if (line.size() > 300) {
    line = line.substr(0, 300) + "...";
  }
  return util::escape_controls(line, util::LineBreaks::escape);
}

std::string describe(const cloud::HttpResponse& answer, const std::string& who) {
  if (answer.failure != cloud::TransportFailure::none) {
    return who + ": " + cloud::to_string(answer.failure) + " (" + answer.error + ")";
  }
  return who + " answered " + std::to_string(answer.status) + (answer.body.empty() ? "" : ": " + brief(answer.body));
}

// RFC 5322 date for the Date header.
std::string mail_date() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[64];
  std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S +0000", &tm);
  return text;
}

// The text curl reads as the mail: headers, a blank line, the body with CRLF line ends (and dot-stuffing left to curl).
struct Upload {
  std::string data;
  std::size_t offset = 0;
};

std::size_t read_upload(char* buffer, std::size_t size, std::size_t count, void* user) {
  auto* upload = static_cast<Upload*>(user);
  const std::size_t room = size * count;
  const std::size_t left = upload->data.size() - upload->offset;
  const std::size_t n = std::min(room, left);
  std::memcpy(buffer, upload->data.data() + upload->offset, n);
  upload->offset += n;
  return n;
}

std::string crlf(const std::string& text) {
  std::string out;
  out.reserve(text.size() + text.size() / 40);
  for (const char c : text) {
    if (c == '\n') {
      out += "\r\n";
    } else if (c != '\r') {
      out += c;
    }
  }
  return out;
}

// A header value on one line: control characters (a CR or LF would start a header of its own) become spaces.
std::string header_value(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      c = ' ';
    }
  }
  return out;
}

} // namespace

std::string redact_url(const std::string& url) {
  const auto scheme = url.find("://");
  if (scheme == std::string::npos) {
    return "an address that is not a URL";
  }
  auto host = scheme + 3;
  const auto path = url.find('/', host);
  // A login in the URL (user:password@host) is left out too.
  if (const auto at = url.rfind('@', path); at != std::string::npos && at >= host) {
    host = at + 1;
  }
  const std::string shown =
      url.substr(0, scheme + 3) + url.substr(host, path == std::string::npos ? std::string::npos : path - host);
  return path == std::string::npos ? shown : shown + "/...";
}

std::string send_brevo(cloud::HttpClient& http, const BrevoAccount& account, const std::string& to,
                       const Message& message) {
  cloud::HttpRequest request;
  request.method = "POST";
  request.url = account.endpoint;
  request.timeout = kTimeout;
  request.headers = {
      {"accept", "application/json"}, {"content-type", "application/json"}, {"api-key", account.api_key}};
  request.body = nlohmann::json{
      {"sender", {{"email", account.sender}, {"name", "jobman"}}},
      {"to", nlohmann::json::array({{{"email", to}}})},
      {"subject", message.subject},
      {"textContent",
       message.text}}.dump();
  const auto answer = http.send(request);
  if (answer.failure == cloud::TransportFailure::none && answer.status >= 200 && answer.status < 300) {
    return {};
  }
  return describe(answer, "Brevo (" + redact_url(account.endpoint) + ")");
}

std::string send_webhook(cloud::HttpClient& http, const std::string& url, const Message& message) {
  cloud::HttpRequest request;
  request.method = "POST";
  request.url = url;
  request.timeout = kTimeout;
  request.headers = {{"content-type", "application/json"}};
  request.body = nlohmann::json{{"text", message.subject + "\n" + message.text}}.dump();
  const auto answer = http.send(request);
  if (answer.failure == cloud::TransportFailure::none && answer.status >= 200 && answer.status < 300) {
    return {};
  }
  return describe(answer, "the webhook " + redact_url(url));
}

std::string send_smtp(const SmtpAccount& account, const std::vector<std::string>& to, const Message& message) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) {
    return "libcurl could not start an SMTP session";
  }
  Upload upload;
  std::string headers = "Date: " + mail_date() + "\nFrom: " + header_value(account.from) + "\nTo: ";
  for (std::size_t i = 0; i < to.size(); ++i) {
    headers += (i == 0 ? "" : ", ") + header_value(to[i]);
  }
  headers += "\nSubject: " + header_value(message.subject) +
             "\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n";
  upload.data = crlf(headers + message.text + "\n");
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> recipients(nullptr, &curl_slist_free_all);
  for (const auto& address : to) {
    recipients.reset(curl_slist_append(recipients.release(), ("<" + address + ">").c_str()));
  }
  char error[CURL_ERROR_SIZE] = {0};
  CURL* h = curl.get();
  const std::string from = "<" + account.from + ">";
  curl_easy_setopt(h, CURLOPT_URL, account.url.c_str());
  curl_easy_setopt(h, CURLOPT_MAIL_FROM, from.c_str());
  curl_easy_setopt(h, CURLOPT_MAIL_RCPT, recipients.get());
  curl_easy_setopt(h, CURLOPT_READFUNCTION, read_upload);
  curl_easy_setopt(h, CURLOPT_READDATA, &upload);
  curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10'000L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(kTimeout.count()));
  // STARTTLS when the server offers it on smtp://; smtps:// is TLS from the start.
  curl_easy_setopt(h, CURLOPT_USE_SSL, static_cast<long>(CURLUSESSL_TRY));
  if (!account.username.empty()) {
    curl_easy_setopt(h, CURLOPT_USERNAME, account.username.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, account.password.c_str());
  }
  const CURLcode code = curl_easy_perform(h);
  if (code == CURLE_OK) {
    return {};
  }
  long response = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response);
  std::string why = error[0] != 0 ? std::string(error) : std::string(curl_easy_strerror(code));
  return "SMTP " + redact_url(account.url) + ": " + why + (response > 0 ? " (" + std::to_string(response) + ")" : "");
}

} // namespace jobman::notify
