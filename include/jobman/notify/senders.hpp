// Sending notifications: Brevo's transactional e-mail API (what the Python jobman and jobman-lite use),
// Slack-compatible webhooks, and plain SMTP through libcurl. Each sender takes what it needs as values and answers with
// an error sentence or nothing; none logs, and no message it returns holds a key, a password or a webhook's secret
// path.
#pragma once

#include "jobman/cloud/http.hpp"

#include <string>
#include <vector>

namespace jobman::notify {

// One notification: a subject line and a text body.
struct Message {
  std::string subject;
  std::string text;
};

// A Brevo account: where its API answers, the key, and the verified sender address.
struct BrevoAccount {
  std::string endpoint = "https://api.brevo.com/v3/smtp/email";
  std::string api_key;
  std::string sender;
};

// Sends `message` to `to` through Brevo. Empty on success (any 2xx), else why not ("Brevo answered 401: ...").
std::string send_brevo(cloud::HttpClient& http, const BrevoAccount& account, const std::string& to,
                       const Message& message);

// Posts `message` to a Slack-compatible webhook as {"text": "<subject>\n<text>"}. Empty on success, else why not,
// naming the webhook by its scheme and host only (its path is the secret).
std::string send_webhook(cloud::HttpClient& http, const std::string& url, const Message& message);

// An SMTP server: smtp://host:port (STARTTLS when the server offers it) or smtps://host:port, its login (both empty
// for none), and the envelope sender.
struct SmtpAccount {
  std::string url;
  std::string username;
  std::string password;
  std::string from;
};

// Sends `message` to every address of `to` in one SMTP session. Empty on success, else curl's or the server's reason.
std::string send_smtp(const SmtpAccount& account, const std::vector<std::string>& to, const Message& message);

// "https://hooks.slack.com/..." for "https://hooks.slack.com/services/T0/B0/secret": a URL for messages.
std::string redact_url(const std::string& url);

} // namespace jobman::notify
