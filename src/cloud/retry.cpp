#include "jobman/cloud/retry.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <string>

namespace jobman::cloud {

bool is_retryable(int http_status, TransportFailure failure) {
  if (failure == TransportFailure::connect_failed || failure == TransportFailure::timed_out) {
    return true;
  }
  if (failure != TransportFailure::none) {
    return false;
  }
  return http_status == 429 || http_status == 500 || http_status == 502 || http_status == 503 || http_status == 504;
}

RetryDecision decide_retry(const AttemptOutcome& outcome, const RetryPolicy& policy, double jitter) {
  if (!is_retryable(outcome.http_status, outcome.failure) || outcome.attempt >= policy.max_attempts) {
    return {};
  }
  jitter = std::clamp(jitter, 0.0, 1.0);
  const double cap = static_cast<double>(policy.max_backoff.count());
  const double exponent = std::max(0, outcome.attempt - 1);
  const double backoff =
      std::min(cap, static_cast<double>(policy.initial_backoff.count()) * std::pow(policy.multiplier, exponent));
  double wait = policy.jitter == Jitter::full ? backoff * jitter : backoff / 2 + backoff / 2 * jitter;
  if (outcome.retry_after) {
    wait = std::max(wait, std::min(cap, static_cast<double>(outcome.retry_after->count())));
  }
  const auto delay = std::chrono::milliseconds(static_cast<std::int64_t>(wait));
  if (outcome.elapsed + delay > policy.max_total) {
    return {};
  }
  return {true, delay};
}

std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value, std::int64_t now_epoch_ms) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
    value.remove_prefix(1);
  }
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) {
    value.remove_suffix(1);
  }
  if (value.empty()) {
    return std::nullopt;
  }
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (value.size() > 9) {
      return std::chrono::milliseconds(std::int64_t{999'999'999} * 1000);
    }
    return std::chrono::milliseconds(std::stoll(std::string(value)) * 1000);
  }
  // IMF-fixdate, the form RFC 9110 requires senders to use: "Sun, 06 Nov 1994 08:49:37 GMT".
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::string text(value);
  char weekday[4] = {};
  char month[4] = {};
  char zone[4] = {};
  int day = 0;
  int year = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  // NOLINTNEXTLINE(cert-err34-c): every field is range-checked below.
  if (std::sscanf(text.c_str(), "%3s, %2d %3s %4d %2d:%2d:%2d %3s", weekday, &day, month, &year, &hour, &minute,
                  &second, zone) != 8 ||
      std::string(zone) != "GMT") {
    return std::nullopt;
  }
  int month_index = -1;
  for (int i = 0; i < 12; ++i) {
    if (std::string(month) == kMonths[i]) {
      month_index = i;
    }
  }
  if (month_index < 0 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60 || year < 1970) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month_index;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::int64_t at_ms = static_cast<std::int64_t>(timegm(&tm)) * 1000;
  return std::chrono::milliseconds(std::max<std::int64_t>(0, at_ms - now_epoch_ms));
}

} // namespace jobman::cloud
