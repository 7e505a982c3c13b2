// When to retry a cloud request and how long to wait first: a pure function of the attempt's outcome.
#pragma once

#include "jobman/cloud/http.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace jobman::cloud {

// How the backoff is randomised.
enum class Jitter {
  full,  // Uniform in [0, backoff).
  equal, // backoff/2 plus uniform in [0, backoff/2).
};

// Truncated exponential backoff with a bounded number of attempts and total time.
struct RetryPolicy {
  int max_attempts = 6;                           // Attempts in all, the first included.
  std::chrono::milliseconds initial_backoff{500}; // The backoff before jitter after the first attempt.
  double multiplier = 2.0;                        // Growth per attempt.
  std::chrono::milliseconds max_backoff{32'000};  // The cap on one wait, Retry-After included.
  std::chrono::milliseconds max_total{120'000};   // No retry whose wait would end past this since the first attempt.
  Jitter jitter = Jitter::full;                   // How the wait is randomised.
};

// What happened to one attempt.
struct AttemptOutcome {
  int attempt = 1;                                      // 1 for the first attempt.
  int http_status = 0;                                  // The HTTP status; 0 on a transport failure.
  TransportFailure failure = TransportFailure::none;    // Why there was no status.
  std::optional<std::chrono::milliseconds> retry_after; // The server's Retry-After, already parsed.
  std::chrono::milliseconds elapsed{0};                 // Time since the first attempt began.
};

// Whether to try again, and after how long.
struct RetryDecision {
  bool retry = false;                 // True to send the request again.
  std::chrono::milliseconds delay{0}; // How long to wait before it.
};

// True for the outcomes worth another attempt: 429, 500, 502, 503, 504, connection failures and timeouts.
bool is_retryable(int http_status, TransportFailure failure);

// Decides from the outcome, the policy and `jitter` (a random value in [0, 1)); no clock, no sleeping.
RetryDecision decide_retry(const AttemptOutcome& outcome, const RetryPolicy& policy, double jitter);

// Parses a Retry-After value: delta seconds ("120") or an HTTP date, relative to `now_epoch_ms`; a date in the past
// gives zero. nullopt when malformed.
std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value, std::int64_t now_epoch_ms);

} // namespace jobman::cloud
