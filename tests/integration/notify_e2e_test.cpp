// Notifications end to end: a worker on the mock cloud runs a #JOBMAN script that asks for mail (Brevo's API, served by
// a local stand-in reached through the brevo_endpoint setting) and a config that fails and tells a webhook and a real
// SMTP server (aiosmtpd). The first webhook call fails and is retried; no key reaches the store or the logs.
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/serving_thread.hpp"
#include "support/temp_dir.hpp"

#include <atomic>
#include <gtest/gtest.h>
#include <mutex>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <unistd.h>

namespace jobman::test {
namespace notify_e2e_test {

namespace fs = std::filesystem;
using domain::Phase;
using nlohmann::json;

constexpr std::chrono::seconds kPatience{120};
constexpr const char* kBrevoKey = "xkeysib-notify-test-4242";
constexpr const char* kHookSecret = "T0000/B0000/hook-secret-9191";

// A port nobody listens on now.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

// Brevo's endpoint and a webhook, on one local server: it records each request; the first `fail_hooks` webhook
// calls get a 500.
class Receiver {
public:
  explicit Receiver(int fail_hooks) : fail_hooks_(fail_hooks) {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      const std::lock_guard lock(mutex_);
      requests_.push_back(req);
      if (req.path.find("/services/") != std::string::npos && fail_hooks_ > 0) {
        --fail_hooks_;
        res.status = 500;
        return;
      }
      res.set_content(R"({"messageId":"<1@test>"})", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    serving_ = std::make_unique<ServingThread>(server_);
  }
  [[nodiscard]] std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  // The requests whose path contains `part`.
  std::vector<httplib::Request> to(const std::string& part) {
    const std::lock_guard lock(mutex_);
    std::vector<httplib::Request> out;
    for (const auto& r : requests_) {
      if (r.path.find(part) != std::string::npos) {
        out.push_back(r);
      }
    }
    return out;
  }

private:
  httplib::Server server_;
  int port_ = 0;
  int fail_hooks_;
  std::mutex mutex_;
  std::vector<httplib::Request> requests_;
  std::unique_ptr<ServingThread> serving_;
};

// Every file under `root` whose bytes contain `secret`.
std::vector<std::string> files_holding(const fs::path& root, const std::string& secret) {
  std::vector<std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied)) {
    if (entry.is_regular_file() && file_text(entry.path()).find(secret) != std::string::npos) {
      found.push_back(entry.path().string());
    }
  }
  return found;
}

TEST(NotifyTest, MailWebhooksAndSmtpGoOutForBeginEndAndFailAndAFailedSendIsRetried) {
  TempDir dir;
  const fs::path home = dir / "home";
  auto mock = start_test_mock(dir, test_world(2, "  us-central2-b:\n    v4:\n      spot: {chips: 32}\n"));
  ASSERT_GT(mock->port(), 0) << mock->first_line();
  Receiver receiver(1);
  const int smtp_port = free_port();
  const auto mails = dir / "mails";
  LineReadingProcess smtp({"/usr/bin/python3", std::string(JOBMAN_SOURCE_DIR) + "/tests/support/smtp_sink.py",
                           std::to_string(smtp_port), mails.string()},
                          {}, dir / "smtp.log");
  ASSERT_TRUE(smtp.read_until("listening")) << file_text(dir / "smtp.log");

  auto env = mock_home_environment(*mock, home, dir / "config");
  env["JOBMAN_BREVO_ENDPOINT"] = receiver.url("/v3/smtp/email");
  env["BREVO_API_KEY"] = kBrevoKey;
  env["BREVO_SENDER"] = "bot@lab.org";
  env["HOOK"] = receiver.url(std::string("/services/") + kHookSecret);
  const auto jm = [&](const std::vector<std::string>& args) { return run_jobman(args, RunOptions{env, "", ""}); };
  LineReadingProcess daemon({jobman_binary(), "daemon", "--tick", "50ms", "--lease-ttl", "2s"}, env,
                            dir / "daemon.log");
  const auto worker = dir.write("worker.yaml", "job:\n  name: mailer\ntpu:\n  accelerator: v4-8\n"
                                               "  zone: us-central2-b\ncommand:\n  cmd: '# a worker'\n");
  ASSERT_EQ(jm({"worker", "start", "--config", worker.string()}).exit_code, 0);

  // A jobman-lite script asking for every mail.
  const auto script = dir.write("hello.sh", "#!/bin/bash\n#JOBMAN --accelerator=v4-8\n#JOBMAN --name=hello\n"
                                            "#JOBMAN --mail-user=me@lab.org\n#JOBMAN --mail-type=ALL\necho hello\n");
  const auto hello = jm({"task", "submit", script.string(), "--json"});
  ASSERT_EQ(hello.exit_code, 0) << hello.err;
  const auto hello_id = json::parse(hello.out)[0]["id"].get<std::int64_t>();
  // A config that fails at once and tells a webhook (a secret URL, read from the environment) and an SMTP server.
  const auto failing =
      dir.write("failing.yaml", "job:\n  name: failing\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                                "command:\n  cmd: exit 3\nrecovery:\n  max_failures: 0\n"
                                "notify:\n  events: [FAIL]\n  webhooks: ['${oc.env:HOOK}']\n"
                                "  smtp:\n    url: smtp://127.0.0.1:" +
                                    std::to_string(smtp_port) + "\n    from: bot@lab.org\n    to: [team@lab.org]\n");
  const auto failed = jm({"task", "submit", failing.string(), "--json"});
  ASSERT_EQ(failed.exit_code, 0) << failed.err;
  const auto failed_id = json::parse(failed.out)[0]["id"].get<std::int64_t>();

  auto store = store::JobStore::open(home / "jobman.db");
  ASSERT_TRUE(eventually([&] { return store.jobs().get(hello_id).phase == Phase::succeeded; }, kPatience));
  ASSERT_TRUE(eventually([&] { return store.jobs().get(failed_id).phase == Phase::failed; }, kPatience));

  // BEGIN and END for hello through Brevo, with the key in its header.
  ASSERT_TRUE(eventually([&] { return receiver.to("/v3/smtp/email").size() == 2; }, kPatience));
  const auto brevo = receiver.to("/v3/smtp/email");
  std::vector<std::string> subjects;
  for (const auto& r : brevo) {
    EXPECT_EQ(r.get_header_value("api-key"), kBrevoKey);
    const auto body = json::parse(r.body);
    EXPECT_EQ(body["to"][0]["email"], "me@lab.org");
    EXPECT_EQ(body["sender"]["email"], "bot@lab.org");
    subjects.push_back(body["subject"].get<std::string>());
  }
  std::sort(subjects.begin(), subjects.end());
  ASSERT_EQ(subjects.size(), 2U);
  EXPECT_TRUE(subjects[0].starts_with("[jobman] BEGIN task")) << subjects[0];
  EXPECT_TRUE(subjects[1].starts_with("[jobman] END task")) << subjects[1];

  // FAIL for the failing task: the webhook's first call failed (an error event), the second got through.
  ASSERT_TRUE(eventually([&] { return receiver.to("/services/").size() == 2; }, kPatience));
  EXPECT_NE(json::parse(receiver.to("/services/").back().body)["text"].get<std::string>().find("FAIL task"),
            std::string::npos);
  bool error_event = false;
  for (const auto& e : store.events().of(failed_id)) {
    if (e.kind == "error" && e.message.find("webhook") != std::string::npos &&
        e.message.find("answered 500") != std::string::npos) {
      error_event = true;
      EXPECT_EQ(e.message.find(kHookSecret), std::string::npos) << e.message;
    }
  }
  EXPECT_TRUE(error_event);
  EXPECT_TRUE(eventually(
      [&] {
        for (const auto& e : store.events().of(failed_id)) {
          if (e.kind == "action" && e.message.find("sent the FAIL webhook") != std::string::npos) {
            return true;
          }
        }
        return false;
      },
      kPatience));
  // And by SMTP, to the team.
  ASSERT_TRUE(eventually([&] { return fs::exists(mails / "1.eml"); }, kPatience)) << file_text(dir / "smtp.log");
  const auto mail = file_text(mails / "1.eml");
  EXPECT_NE(mail.find("X-Envelope-To: team@lab.org"), std::string::npos) << mail;
  EXPECT_NE(mail.find("Subject: [jobman] FAIL task"), std::string::npos) << mail;
  EXPECT_NE(mail.find("status: FAILED"), std::string::npos) << mail;

  // No key or hook secret in the store, the logs or any file of the home but the task's 0600 environment file.
  EXPECT_TRUE(files_holding(home, kBrevoKey).empty());
  EXPECT_EQ(file_text(dir / "daemon.log").find(kBrevoKey), std::string::npos);
  EXPECT_EQ(file_text(dir / "daemon.log").find(kHookSecret), std::string::npos);
  for (const auto& path : files_holding(home, kHookSecret)) {
    EXPECT_TRUE(path.ends_with("/environment")) << path;
  }
  EXPECT_EQ(jm({"worker", "delete", "--all"}).exit_code, 0);
}

} // namespace notify_e2e_test
} // namespace jobman::test
