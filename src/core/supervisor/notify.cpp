// Notifications: recorded in the store when a job, task or worker begins, ends or fails (JobDriver::notify_phase),
// sent from the action threads by whichever supervisor finds them due (SupervisorLoop::send_due_notifications), so that
// sending never holds up the loop; a failure is an error event and is tried again with backoff. Keys, passwords and
// webhook URLs are read from the job's config (its ${oc.env:...} calls expanded), the supervisor's environment or
// the user's files when sending: never the store.
#include "jobman/config/settings.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/notify/senders.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/notifications.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "loop.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

namespace fs = std::filesystem;
using domain::Phase;

namespace {

// Sends tried before a notification is given up: the last one about five hours after the first.
constexpr int kMaxTries = 8;
// The wait before the second try, in the config's seconds (simulated ones on the mock); each further one waits twice
// as long.
constexpr double kRetrySeconds = 60;
// Notifications taken per tick.
constexpr int kPerTick = 8;

// Whom `config` tells of `event`: (channel, target) pairs.
std::vector<std::pair<std::string, std::string>> recipients(const config::JobConfig& config,
                                                            config::NotifyEvent event) {
  std::vector<std::pair<std::string, std::string>> out;
  if (config.email && !config.email->receiver.empty()) {
    out.emplace_back("brevo", config.email->receiver); // The Python jobman mailed when a job began and ended.
  }
  if (config.notify &&
      std::find(config.notify->events.begin(), config.notify->events.end(), event) != config.notify->events.end()) {
    for (const auto& address : config.notify->mail_to) {
      out.emplace_back("brevo", address);
    }
    for (std::size_t i = 0; i < config.notify->webhooks.size(); ++i) {
      out.emplace_back("webhook", std::to_string(i));
    }
    if (config.notify->smtp) {
      out.emplace_back("smtp", "");
    }
  }
  return out;
}

// jobman-lite's Brevo file: {"api_key", "sender_email", "disabled"}.
std::optional<notify::BrevoAccount> brevo_file(const fs::path& path, std::string& why) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return std::nullopt;
  }
  const auto data = nlohmann::json::parse(util::read_file(path), nullptr, false);
  if (!data.is_object()) {
    why = path.string() + " is not a JSON object";
    return std::nullopt;
  }
  if (data.value("disabled", false)) {
    why = path.string() + " turns Brevo mail off (disabled)";
    return std::nullopt;
  }
  notify::BrevoAccount account;
  account.api_key = data.value("api_key", "");
  account.sender = data.value("sender_email", "");
  if (account.api_key.empty() || account.sender.empty()) {
    why = path.string() + " lacks api_key or sender_email";
    return std::nullopt;
  }
  return account;
}

// The Brevo key and sender for `config`: its brevo_email section, the supervisor's BREVO_API_KEY and BREVO_SENDER,
// ${XDG_CONFIG_HOME:-~/.config}/jobman/brevo.json, then the .jobman_brevo.json a task was submitted beside.
std::optional<notify::BrevoAccount> brevo_account(const config::JobConfig& config, std::string& why) {
  if (config.email && !config.email->api_key.empty() && !config.email->sender.empty()) {
    return notify::BrevoAccount{"", config.email->api_key, config.email->sender};
  }
  const char* key = std::getenv("BREVO_API_KEY");
  const char* sender = std::getenv("BREVO_SENDER");
  if (key != nullptr && *key != '\0' && sender != nullptr && *sender != '\0') {
    return notify::BrevoAccount{"", key, sender};
  }
  if (auto account = brevo_file(fs::path(config::settings_path()).parent_path() / "brevo.json", why)) {
    return account;
  }
  if (config.notify && !config.notify->brevo_config.empty()) {
    if (auto account = brevo_file(config.notify->brevo_config, why)) {
      return account;
    }
  }
  if (why.empty()) {
    why = "no Brevo API key and sender: set BREVO_API_KEY and BREVO_SENDER for the supervisor, or write "
          "~/.config/jobman/brevo.json ({\"api_key\": ..., \"sender_email\": ...}, mode 0600)";
  }
  return std::nullopt;
}

// The message for `event` of `job`.
notify::Message message_for(const domain::JobRecord& job, const std::string& event) {
  const std::string what = std::string(domain::to_string(job.kind));
  const std::string id = domain::format_job_id(job.id);
  notify::Message m;
  m.subject = "[jobman] " + event + " " + what + " " + id + " (" + job.name + ")";
  m.text = "event: " + event + "\n" + what + ": " + id + "\nname: " + job.name +
           "\nstatus: " + std::string(domain::to_string(job.phase)) +
           (job.phase_reason.empty() ? "" : "\nreason: " + job.phase_reason) + "\naccelerator: " + job.accelerator +
           "\nzone: " + (job.zone.empty() ? std::string("any") : job.zone) +
           "\nattempt: " + std::to_string(job.attempt) + "\npreemptions: " + std::to_string(job.preemptions) +
           "\nfailures: " + std::to_string(job.failures) + "\ncreated: " + util::format_utc(job.created_ms) +
           (job.finished_ms ? "\nfinished: " + util::format_utc(*job.finished_ms) : "") + "\nmore: jobman show " + id +
           "\n";
  return m;
}

// How a notification is named in events and logs: "END mail to a@b.c", "END webhook https://hooks.slack.com/...".
std::string label(const store::Notification& n, const config::JobConfig* config) {
  if (n.channel == "brevo") {
    return n.event + " mail to " + n.target;
  }
  if (n.channel == "smtp") {
    return n.event + " mail by SMTP" +
           (config != nullptr && config->notify && config->notify->smtp
                ? " to " + util::join(config->notify->smtp->to, ", ")
                : std::string());
  }
  std::string url;
  if (config != nullptr && config->notify) {
    const auto index = util::parse_int(n.target);
    if (index && *index >= 0 && static_cast<std::size_t>(*index) < config->notify->webhooks.size()) {
      url = " " + notify::redact_url(config->notify->webhooks[static_cast<std::size_t>(*index)]);
    }
  }
  return n.event + " webhook" + url;
}

} // namespace

void JobDriver::notify_phase(Driven& d, Phase from, Phase to) {
  if (!d.config || from == to) {
    return;
  }
  std::optional<config::NotifyEvent> event;
  const bool worker = d.job.kind == domain::JobKind::worker;
  if (to == Phase::running && d.job.attempt == 1 && !worker) {
    event = config::NotifyEvent::begin;
  } else if (to == Phase::succeeded && !worker) {
    event = config::NotifyEvent::end;
  } else if (to == Phase::failed) {
    event = config::NotifyEvent::fail;
  }
  if (!event) {
    return;
  }
  const auto who = recipients(*d.config, *event);
  if (!who.empty()) {
    store().notifications().enqueue(d.job.id, d.job.attempt, config::to_string(*event), who, host_.now_ms());
    host_.notifications_due();
  }
}

void SupervisorLoop::send_due_notifications() {
  std::vector<store::Notification> due;
  const std::int64_t retry_ms = scaled(kRetrySeconds).count();
  try {
    due = job_store->notifications().claim(now_ms(), retry_ms, kPerTick);
  } catch (const std::exception& e) {
    spdlog::warn("reading the notifications: {}", e.what());
    return;
  }
  for (const auto& n : due) {
    std::optional<domain::JobRecord> job;
    std::optional<config::JobConfig> config;
    std::string problem;
    try {
      job = job_store->jobs().find(n.job_id, true);
      if (job) {
        config = recorded_config(*job);
        if (const auto missing = expand_recorded_environment(job->id, *config); !missing.empty()) {
          problem = "the environment variable " + missing.front() + " its config reads is not set";
        }
      }
    } catch (const std::exception& e) {
      problem = std::string("its config cannot be read: ") + e.what();
    }
    if (!job) {
      continue; // Cleaned meanwhile: its notifications went with it.
    }
    const auto what = label(n, config ? &*config : nullptr);
    std::function<std::string()> send;
    if (problem.empty()) {
      const auto message = message_for(*job, n.event);
      if (n.channel == "brevo") {
        std::string why;
        if (auto account = brevo_account(*config, why)) {
          account->endpoint = access->settings.brevo_endpoint;
          send = [http = notify_http, account = *account, to = n.target, message] {
            return notify::send_brevo(*http, account, to, message);
          };
        } else {
          problem = why;
        }
      } else if (n.channel == "webhook") {
        const auto index = util::parse_int(n.target);
        if (config->notify && index && *index >= 0 &&
            static_cast<std::size_t>(*index) < config->notify->webhooks.size()) {
          send = [http = notify_http, url = config->notify->webhooks[static_cast<std::size_t>(*index)], message] {
            return notify::send_webhook(*http, url, message);
          };
        } else {
          problem = "its config no longer has that webhook";
        }
      } else if (n.channel == "smtp" && config->notify && config->notify->smtp) {
        const auto& smtp = *config->notify->smtp;
        send = [account = notify::SmtpAccount{smtp.url, smtp.username, smtp.password, smtp.from}, to = smtp.to,
                message] { return notify::send_smtp(account, to, message); };
      } else {
        problem = "its config no longer says how to send it";
      }
    }
    const auto id = n.job_id;
    const auto record = [this, n, what, retry_ms](const std::string& error, bool final) {
      try {
        if (error.empty()) {
          job_store->notifications().sent(n.id, now_ms());
          job_store->events().append(n.job_id, "action", "sent the " + what);
          spdlog::info("{}: sent the {}", job_label(n.job_id), what);
          return;
        }
        const bool give_up = final || n.tries >= kMaxTries;
        job_store->notifications().failed(n.id, error, give_up);
        std::string message =
            "the " + what + " failed (try " + std::to_string(n.tries) + " of " + std::to_string(kMaxTries) + "): ";
        message += error;
        message += give_up
                       ? std::string("; given up")
                       : "; trying again in " + util::format_duration((retry_ms << std::min(n.tries - 1, 10)) / 1000);
        job_store->events().append(n.job_id, "error", message);
        spdlog::warn("{}: {}", job_label(n.job_id), message);
      } catch (const domain::NoSuchJobError&) {
        // Cleaned while it was being sent.
      }
    };
    if (!send) {
      record(problem, true); // Nothing to try again with until the config or the environment changes.
      continue;
    }
    dispatch_detached([send = std::move(send), inbox = inbox, record, id] {
      std::string error;
      try {
        error = send();
      } catch (const std::exception& e) {
        error = e.what();
      }
      inbox->post({id, [record, error] { record(error, false); }});
    });
  }
}

} // namespace jobman::core::supervision
