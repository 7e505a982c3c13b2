// The store's notifications: what to tell whom of a job's attempts, sent by whichever supervisor claims them.
#pragma once

#include "jobman/store/job_store.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace jobman::store {

// A notification to send: one event of one attempt of a job, through one channel, to one recipient.
struct Notification {
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  int attempt = 0;
  std::string event;   // "BEGIN", "END", "FAIL".
  std::string channel; // "brevo", "webhook" or "smtp".
  std::string target;  // The address (brevo), the webhook's index in notify.webhooks, "" (smtp: its own list).
  int tries = 0;       // Sends tried so far, this claim's included.
};

class Notifications : public StoreView {
public:
  using StoreView::StoreView;

  // Records notifications to send for `job_id`'s `attempt` and `event`, one per (channel, target); one already recorded
  // is not recorded twice.
  void enqueue(std::int64_t job_id, int attempt, const std::string& event,
               const std::vector<std::pair<std::string, std::string>>& recipients, std::int64_t now_ms);
  // Takes up to `limit` notifications due at `now_ms` for sending: each is moved `retry_ms << tries` into the future
  // first, so that no other supervisor sends it meanwhile (and it is sent again then if this one never reports).
  std::vector<Notification> claim(std::int64_t now_ms, std::int64_t retry_ms, int limit);
  // A claimed notification went out.
  void sent(std::int64_t id, std::int64_t now_ms);
  // A claimed notification failed with `error`; with `give_up`, it is not tried again.
  void failed(std::int64_t id, const std::string& error, bool give_up);
};

} // namespace jobman::store
