// Notifications: the notify section of a config, the store's queue of notifications, and the Brevo and webhook senders
// against a local HTTP server standing in for them.
#include "jobman/config/loader.hpp"
#include "jobman/notify/senders.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/notifications.hpp"
#include "jobman/util/error.hpp"
#include "support/sample_job.hpp"
#include "support/serving_thread.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <mutex>
#include <nlohmann/json.hpp>

namespace jobman {
namespace notify_test {

const std::string kBase = "job:\n  name: n\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\ncommand:\n  cmd: run\n";

config::JobConfig load(const std::string& text) {
  return config::parse_job_configs(text, "notify.yaml").front();
}

std::vector<std::string> messages_of(const std::string& text) {
  try {
    load(text);
  } catch (const ConfigError& e) {
    std::vector<std::string> out;
    for (const auto& d : e.diagnostics()) {
      out.push_back(d.format());
    }
    return out;
  }
  return {};
}

TEST(NotifyConfig, EventsRecipientsWebhooksAndAnSmtpServerAreRead) {
  const auto c =
      load(kBase + "notify:\n  events: [begin, FAIL]\n  mail_to: [me@lab.org]\n"
                   "  webhooks: ['https://hooks.example.com/services/T0/B0/x']\n"
                   "  smtp:\n    url: smtp://127.0.0.1:2525\n    from: bot@lab.org\n    to: [a@lab.org, b@lab.org]\n");
  ASSERT_TRUE(c.notify.has_value());
  EXPECT_EQ(c.notify->events,
            (std::vector<config::NotifyEvent>{config::NotifyEvent::begin, config::NotifyEvent::fail}));
  EXPECT_EQ(c.notify->mail_to, std::vector<std::string>{"me@lab.org"});
  ASSERT_EQ(c.notify->webhooks.size(), 1U);
  ASSERT_TRUE(c.notify->smtp.has_value());
  EXPECT_EQ(c.notify->smtp->to, (std::vector<std::string>{"a@lab.org", "b@lab.org"}));
  // Without events: END and FAIL; ALL is all three; NONE is none.
  EXPECT_EQ(load(kBase + "notify:\n  mail_to: [me@lab.org]\n").notify->events,
            (std::vector<config::NotifyEvent>{config::NotifyEvent::end, config::NotifyEvent::fail}));
  EXPECT_EQ(load(kBase + "notify:\n  events: [all]\n").notify->events.size(), 3U);
  EXPECT_TRUE(load(kBase + "notify:\n  events: [NONE]\n").notify->events.empty());
}

TEST(NotifyConfig, BadValuesAreErrorsAtTheirLine) {
  EXPECT_EQ(messages_of(kBase + "notify:\n  events: [begin, later]\n"),
            std::vector<std::string>{
                "notify.yaml:9:11: notify.events: unknown event 'later' (expected BEGIN, END, FAIL, ALL or NONE)"});
  EXPECT_EQ(messages_of(kBase + "notify:\n  mail_to: [me-at-lab]\n"),
            std::vector<std::string>{"notify.yaml:9:12: notify.mail_to: 'me-at-lab' is not an e-mail address"});
  const auto hook = messages_of(kBase + "notify:\n  webhooks: [hooks.example.com/x]\n");
  ASSERT_EQ(hook.size(), 1U);
  EXPECT_NE(hook[0].find("notify.webhooks: a webhook is an http:// or https:// URL"), std::string::npos) << hook[0];
  const auto smtp = messages_of(kBase + "notify:\n  smtp:\n    url: mail.lab.org\n    to: [a@lab.org]\n");
  ASSERT_EQ(smtp.size(), 2U);
  // In the order of their columns on the line: the missing key is reported at the mapping's start.
  EXPECT_NE(smtp[0].find("notify.smtp.from: required key is missing"), std::string::npos) << smtp[0];
  EXPECT_NE(smtp[1].find("notify.smtp.url: expected smtp://host:port or smtps://host:port"), std::string::npos)
      << smtp[1];
  EXPECT_FALSE(messages_of(kBase + "notify:\n  smpt: {}\n").empty()) << "an unknown key";
}

TEST(NotifyConfig, ASecretWebhookOrPasswordStaysACallInTheSnapshotAndComesBackWhenExpanded) {
  ::setenv("JOBMAN_TEST_HOOK", "https://hooks.example.com/services/T0/B0/very-secret", 1);
  ::setenv("JOBMAN_TEST_SMTP_PASSWORD", "hunter2-secret", 1);
  const auto c = load(kBase + "notify:\n  webhooks: ['${oc.env:JOBMAN_TEST_HOOK}']\n"
                              "  smtp:\n    url: smtps://mail.lab.org:465\n    from: bot@lab.org\n    to: [a@lab.org]\n"
                              "    username: bot\n    password: ${oc.env:JOBMAN_TEST_SMTP_PASSWORD}\n");
  EXPECT_EQ(c.notify->webhooks.front(), "https://hooks.example.com/services/T0/B0/very-secret");
  EXPECT_EQ(c.resolved_yaml.find("very-secret"), std::string::npos) << c.resolved_yaml;
  EXPECT_EQ(c.resolved_yaml.find("hunter2"), std::string::npos) << c.resolved_yaml;
  EXPECT_NE(c.resolved_yaml.find("${oc.env:JOBMAN_TEST_HOOK}"), std::string::npos) << c.resolved_yaml;
  EXPECT_EQ(c.environment.at("JOBMAN_TEST_SMTP_PASSWORD"), "hunter2-secret");
  // The --json view never shows the password.
  EXPECT_EQ(config::to_json(c).find("hunter2"), std::string::npos);

  config::LoadOptions recorded;
  recorded.recorded = true;
  auto again = config::parse_job_configs(c.resolved_yaml, "snapshot", recorded).front();
  ::unsetenv("JOBMAN_TEST_HOOK");
  const auto missing = config::expand_environment(again, [&](const std::string& name) -> std::optional<std::string> {
    const auto found = c.environment.find(name);
    return found == c.environment.end() ? std::nullopt : std::optional(found->second);
  });
  EXPECT_TRUE(missing.empty());
  EXPECT_EQ(again.notify->webhooks.front(), "https://hooks.example.com/services/T0/B0/very-secret");
  EXPECT_EQ(again.notify->smtp->password, "hunter2-secret");
  ::unsetenv("JOBMAN_TEST_SMTP_PASSWORD");
}

TEST(NotificationQueue, RecordedOnceClaimedByOneSenderAndRetriedWithBackoffUntilSentOrGivenUp) {
  auto store = store::JobStore::open_in_memory();
  const auto id = store.jobs().create({test::make_job("a")}).front();
  const std::vector<std::pair<std::string, std::string>> who = {{"brevo", "me@lab.org"}, {"webhook", "0"}};
  store.notifications().enqueue(id, 1, "END", who, 1000);
  store.notifications().enqueue(id, 1, "END", who, 1001); // A supervisor that records the same phase change again.
  auto claimed = store.notifications().claim(1000, 60'000, 8);
  ASSERT_EQ(claimed.size(), 2U);
  EXPECT_EQ(claimed[0].tries, 1);
  EXPECT_TRUE(store.notifications().claim(1000, 60'000, 8).empty()) << "claimed: not due again before the backoff";
  store.notifications().sent(claimed[0].id, 1500);
  store.notifications().failed(claimed[1].id, "the webhook https://hooks.example.com/... answered 500", false);
  claimed = store.notifications().claim(61'000, 60'000, 8);
  ASSERT_EQ(claimed.size(), 1U) << "the sent one is done; the failed one is due after 60 s";
  EXPECT_EQ(claimed[0].channel, "webhook");
  EXPECT_EQ(claimed[0].tries, 2);
  EXPECT_TRUE(store.notifications().claim(61'000 + 119'000, 60'000, 8).empty()) << "the second wait is twice as long";
  store.notifications().failed(claimed[0].id, "still failing", true);
  EXPECT_TRUE(store.notifications().claim(10'000'000, 60'000, 8).empty()) << "given up";
  store.jobs().remove(id); // Its notifications go with it.
  EXPECT_TRUE(store.notifications().claim(10'000'000, 60'000, 8).empty());
}

// A local server standing in for Brevo's endpoint and for a webhook: it records what it is sent and answers
// `status` (200 unless told otherwise).
class Receiver {
public:
  Receiver() {
    const auto take = [this](const httplib::Request& req, httplib::Response& res) {
      const std::lock_guard lock(mutex_);
      requests_.push_back(req);
      res.status = status_;
      res.set_content(status_ < 300 ? R"({"messageId":"<1@x>"})" : R"({"code":"unauthorized"})", "application/json");
    };
    server_.Post(".*", take);
    port_ = server_.bind_to_any_port("127.0.0.1");
    serving_ = std::make_unique<test::ServingThread>(server_);
  }
  [[nodiscard]] std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  void answer(int status) { status_ = status; }
  std::vector<httplib::Request> requests() {
    const std::lock_guard lock(mutex_);
    return requests_;
  }

private:
  httplib::Server server_;
  int port_ = 0;
  std::atomic<int> status_{200};
  std::mutex mutex_;
  std::vector<httplib::Request> requests_;
  std::unique_ptr<test::ServingThread> serving_;
};

TEST(NotifySenders, BrevoGetsTheTransactionalMailWithItsKeyInAHeaderAndAFailureNamesNoSecret) {
  Receiver brevo;
  cloud::HttpClient http;
  notify::BrevoAccount account{brevo.url("/v3/smtp/email"), "xkeysib-secret-123", "bot@lab.org"};
  const notify::Message message{"[jobman] END task 000042 (train)", "event: END\ntask: 000042\n"};
  EXPECT_EQ(notify::send_brevo(http, account, "me@lab.org", message), "");
  const auto got = brevo.requests();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].path, "/v3/smtp/email");
  EXPECT_EQ(got[0].get_header_value("api-key"), "xkeysib-secret-123");
  const auto body = nlohmann::json::parse(got[0].body);
  EXPECT_EQ(body["sender"]["email"], "bot@lab.org");
  EXPECT_EQ(body["to"][0]["email"], "me@lab.org");
  EXPECT_EQ(body["subject"], message.subject);
  EXPECT_EQ(body["textContent"], message.text);

  brevo.answer(401);
  const auto error = notify::send_brevo(http, account, "me@lab.org", message);
  EXPECT_NE(error.find("401"), std::string::npos) << error;
  EXPECT_EQ(error.find("xkeysib"), std::string::npos) << error;
}

TEST(NotifySenders, AWebhookGetsSlackJsonAndAFailureNamesItsHostOnly) {
  Receiver hook;
  cloud::HttpClient http;
  const auto url = hook.url("/services/T0/B0/secret-path");
  EXPECT_EQ(notify::send_webhook(http, url, {"subject", "body"}), "");
  ASSERT_EQ(hook.requests().size(), 1U);
  EXPECT_EQ(nlohmann::json::parse(hook.requests()[0].body)["text"], "subject\nbody");
  hook.answer(500);
  const auto error = notify::send_webhook(http, url, {"subject", "body"});
  EXPECT_NE(error.find("answered 500"), std::string::npos) << error;
  EXPECT_EQ(error.find("secret-path"), std::string::npos) << error;
  EXPECT_EQ(notify::redact_url("https://hooks.slack.com/services/T0/B0/x"), "https://hooks.slack.com/...");
  EXPECT_EQ(notify::redact_url("smtps://user:pw@mail.lab.org:465"), "smtps://mail.lab.org:465");
}

} // namespace notify_test
} // namespace jobman
