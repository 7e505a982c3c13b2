// The retry decision: which outcomes are retried, the backoff with jitter, Retry-After, and the bounds.
#include "jobman/cloud/retry.hpp"

#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace jobman::cloud {
namespace cloud_retry_test {

using std::chrono::milliseconds;

RetryPolicy policy(Jitter jitter = Jitter::full) {
  RetryPolicy p;
  p.max_attempts = 5;
  p.initial_backoff = milliseconds(1000);
  p.multiplier = 2.0;
  p.max_backoff = milliseconds(5000);
  p.max_total = milliseconds(60'000);
  p.jitter = jitter;
  return p;
}

AttemptOutcome status(int attempt, int http_status) {
  AttemptOutcome outcome;
  outcome.attempt = attempt;
  outcome.http_status = http_status;
  return outcome;
}

TEST(CloudRetryDecision, RetriesOnlyThrottlingServerErrorsAndConnectionTrouble) {
  struct Row {
    int http_status;
    TransportFailure failure;
    bool retry;
  };
  const std::vector<Row> rows = {
      {429, TransportFailure::none, true},         {500, TransportFailure::none, true},
      {502, TransportFailure::none, true},         {503, TransportFailure::none, true},
      {504, TransportFailure::none, true},         {200, TransportFailure::none, false},
      {400, TransportFailure::none, false},        {401, TransportFailure::none, false},
      {403, TransportFailure::none, false},        {404, TransportFailure::none, false},
      {409, TransportFailure::none, false},        {501, TransportFailure::none, false},
      {0, TransportFailure::connect_failed, true}, {0, TransportFailure::timed_out, true},
      {0, TransportFailure::other, false},
  };
  for (const auto& row : rows) {
    AttemptOutcome outcome = status(1, row.http_status);
    outcome.failure = row.failure;
    EXPECT_EQ(decide_retry(outcome, policy(), 0.5).retry, row.retry)
        << row.http_status << " " << to_string(row.failure);
    EXPECT_EQ(is_retryable(row.http_status, row.failure), row.retry) << row.http_status;
  }
}

TEST(CloudRetryDecision, BackoffGrowsExponentiallyUpToTheCapWithFullOrEqualJitter) {
  struct Row {
    Jitter jitter;
    int attempt;
    double random;
    long long delay_ms;
  };
  const std::vector<Row> rows = {
      {Jitter::full, 1, 0.0, 0},       {Jitter::full, 1, 0.5, 500},   {Jitter::full, 1, 0.999, 999},
      {Jitter::full, 2, 0.5, 1000},    {Jitter::full, 3, 0.5, 2000},  {Jitter::full, 4, 0.5, 2500},
      {Jitter::full, 4, 0.999, 4995},  {Jitter::equal, 1, 0.0, 500},  {Jitter::equal, 1, 0.5, 750},
      {Jitter::equal, 2, 0.0, 1000},   {Jitter::equal, 3, 0.5, 3000}, {Jitter::equal, 4, 0.0, 2500},
      {Jitter::equal, 4, 0.999, 4997},
  };
  for (const auto& row : rows) {
    const auto decision = decide_retry(status(row.attempt, 503), policy(row.jitter), row.random);
    ASSERT_TRUE(decision.retry);
    EXPECT_EQ(decision.delay.count(), row.delay_ms)
        << (row.jitter == Jitter::full ? "full" : "equal") << " attempt " << row.attempt << " jitter " << row.random;
  }
}

TEST(CloudRetryDecision, StopsAfterTheLastAttempt) {
  EXPECT_TRUE(decide_retry(status(4, 429), policy(), 0.5).retry);
  EXPECT_FALSE(decide_retry(status(5, 429), policy(), 0.5).retry);
  EXPECT_FALSE(decide_retry(status(9, 429), policy(), 0.5).retry);
}

TEST(CloudRetryDecision, StopsWhenTheWaitWouldEndPastTheTotalTime) {
  AttemptOutcome outcome = status(2, 503);
  outcome.elapsed = milliseconds(58'999);
  EXPECT_TRUE(decide_retry(outcome, policy(), 0.5).retry); // 1000 ms more: exactly at the limit.
  outcome.elapsed = milliseconds(59'001);
  EXPECT_FALSE(decide_retry(outcome, policy(), 0.5).retry);
}

TEST(CloudRetryDecision, HonoursRetryAfterUpToTheCap) {
  AttemptOutcome outcome = status(1, 429);
  outcome.retry_after = milliseconds(3000);
  EXPECT_EQ(decide_retry(outcome, policy(), 0.1).delay.count(), 3000);
  outcome.retry_after = milliseconds(120'000);
  EXPECT_EQ(decide_retry(outcome, policy(), 0.1).delay.count(), 5000);
  // A Retry-After shorter than the backoff does not shorten it.
  outcome = status(3, 503);
  outcome.retry_after = milliseconds(0);
  EXPECT_EQ(decide_retry(outcome, policy(Jitter::equal), 0.0).delay.count(), 2000);
  // A Retry-After does not make a refused outcome retryable.
  outcome = status(1, 400);
  outcome.retry_after = milliseconds(1000);
  EXPECT_FALSE(decide_retry(outcome, policy(), 0.5).retry);
}

TEST(CloudRetryAfter, ParsesSecondsAndHttpDates) {
  // Sun, 06 Nov 1994 08:49:37 GMT is 784111777 seconds after the epoch.
  const std::int64_t date_ms = 784111777LL * 1000;
  struct Row {
    std::string value;
    std::int64_t now_ms;
    std::optional<long long> expect_ms;
  };
  const std::vector<Row> rows = {
      {"0", 0, 0},
      {"120", 0, 120'000},
      {" 7 ", 0, 7000},
      {"Sun, 06 Nov 1994 08:49:37 GMT", date_ms - 30'000, 30'000},
      {"Sun, 06 Nov 1994 08:49:37 GMT", date_ms + 5000, 0},
      {"", 0, std::nullopt},
      {"-5", 0, std::nullopt},
      {"1.5", 0, std::nullopt},
      {"soon", 0, std::nullopt},
      {"Sun, 06 Nov 1994 08:49:37 PST", 0, std::nullopt},
      {"Sun, 06 Foo 1994 08:49:37 GMT", 0, std::nullopt},
  };
  for (const auto& row : rows) {
    const auto parsed = parse_retry_after(row.value, row.now_ms);
    ASSERT_EQ(parsed.has_value(), row.expect_ms.has_value()) << "'" << row.value << "'";
    if (parsed) {
      EXPECT_EQ(parsed->count(), *row.expect_ms) << "'" << row.value << "'";
    }
  }
}

} // namespace cloud_retry_test
} // namespace jobman::cloud
