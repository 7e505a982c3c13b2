// The mock's worker hosts as real SSH hosts: Debian's OpenSSH client (/usr/bin/ssh, scp) against the sshd each host
// runs, on loopback addresses only; keys from the metadata, host keys from the guest attributes, accounts made as
// Google's guest agent makes them, and connections closed when the slice goes.
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <arpa/inet.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <set>
#include <unistd.h>

namespace host_ssh_test {

using jobman::test::eventually;
using jobman::test::MockCloudProcess;
using jobman::test::RunResult;
using nlohmann::json;
namespace fs = std::filesystem;

const std::string kZone = "us-central2-b";
const std::string kLoc = "projects/p/locations/" + kZone;
const httplib::Headers kAuth = {{"Authorization", "Bearer test-token"}};
const std::string kWorld = jobman::test::test_world(1, R"(  us-central2-b:
    v4:
      spot: {chips: 64}
)");

// True for an IPv4 address in 127.0.0.0/8.
bool loopback(const std::string& address) {
  in_addr parsed{};
  return ::inet_pton(AF_INET, address.c_str(), &parsed) == 1 && (ntohl(parsed.s_addr) >> 24) == 127;
}

class HostSshTest : public ::testing::Test {
protected:
  jobman::test::TempDir dir;
  std::unique_ptr<MockCloudProcess> server;
  std::unique_ptr<httplib::Client> client;
  std::string public_key; // The test's key, as an authorized_keys line.

  void SetUp() override {
    if (!fs::exists("/usr/sbin/sshd") || !fs::exists("/usr/bin/ssh")) {
      GTEST_SKIP() << "OpenSSH's server and client are needed (scripts/test installs openssh-server)";
    }
    server = jobman::test::start_test_mock(dir, kWorld, 1);
    ASSERT_GT(server->port(), 0) << server->first_line();
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    const auto made = jobman::test::run_program(
        {"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", (dir / "key").string()});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    public_key = std::string(jobman::util::trim(jobman::util::read_file(dir / "key.pub")));
  }

  jobman::test::HttpAnswer api(const std::string& method, const std::string& path, const json& body = nullptr,
                               const httplib::Headers& headers = kAuth) {
    return jobman::test::http_call(*client, method, path, body, headers);
  }

  // Creates node `id` (`accelerator`, spot) whose metadata's ssh-keys are `keys`, and waits until it is READY and
  // every worker publishes its host key.
  json create_node(const std::string& id, const std::string& accelerator, const std::string& keys) {
    json body = {{"acceleratorType", accelerator},
                 {"runtimeVersion", "tpu-ubuntu2204-base"},
                 {"schedulingConfig", {{"spot", true}}},
                 {"metadata", {{"ssh-keys", keys}}}};
    auto created = api("POST", "/v2/" + kLoc + "/nodes?nodeId=" + id, body);
    EXPECT_EQ(created.status, 200) << created.text;
    json node;
    EXPECT_TRUE(eventually([&] {
      node = api("GET", "/v2/" + kLoc + "/nodes/" + id).body;
      return node.value("state", "") == "READY";
    }));
    EXPECT_TRUE(eventually([&] {
      const auto keys_published = api("POST", "/v2/" + kLoc + "/nodes/" + id + ":getGuestAttributes",
                                      json{{"queryPath", "hostkeys/ssh-ed25519"}});
      int published = 0;
      for (const auto& worker : keys_published.body.value("guestAttributes", json::array())) {
        published += worker["queryValue"].contains("items") ? 1 : 0;
      }
      return published == static_cast<int>(node["networkEndpoints"].size());
    }));
    write_known_hosts(id, node);
    return node;
  }

  // Writes known_hosts from the node's guest attributes: each worker's key for both its addresses.
  void write_known_hosts(const std::string& id, const json& node) {
    const auto attributes =
        api("POST", "/v2/" + kLoc + "/nodes/" + id + ":getGuestAttributes", json{{"queryPath", "hostkeys/"}});
    std::string known;
    const auto& endpoints = node["networkEndpoints"];
    for (std::size_t w = 0; w < endpoints.size(); ++w) {
      for (const auto& item : attributes.body["guestAttributes"][w]["queryValue"]["items"]) {
        known += endpoints[w]["ipAddress"].get<std::string>() + "," +
                 endpoints[w]["accessConfig"]["externalIp"].get<std::string>() + " " +
                 item["value"].get<std::string>() + "\n";
      }
    }
    std::ofstream(dir / "known_hosts", std::ios::app) << known;
  }

  // The OpenSSH client options every connection uses: the test's key, known_hosts from the guest attributes and
  // host key checking on, no agent, no prompts.
  [[nodiscard]] std::vector<std::string> ssh_options() const {
    return {"-F", "/dev/null",
            "-i", (dir / "key").string(),
            "-o", "UserKnownHostsFile=" + (dir / "known_hosts").string(),
            "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes",
            "-o", "IdentitiesOnly=yes",
            "-o", "ConnectTimeout=10",
            "-o", "LogLevel=ERROR"};
  }

  // `ssh USER@ADDRESS COMMAND`.
  RunResult ssh(const std::string& user, const std::string& address, const std::string& command) {
    std::vector<std::string> argv = {"/usr/bin/ssh"};
    const auto options = ssh_options();
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {user + "@" + address, command});
    return jobman::test::run_program(argv);
  }
};

TEST_F(HostSshTest, EveryHostAnswersOnItsOwnLoopbackAddressesAsItsOwnMachine) {
  const auto node = create_node("pod", "v4-32", "root:" + public_key + " root");
  const auto& endpoints = node["networkEndpoints"];
  ASSERT_EQ(endpoints.size(), 4U) << node;
  std::set<std::string> addresses;
  const std::regex hostname("t1v-n-[0-9a-f]{8}-w-([0-9]+)");
  for (std::size_t w = 0; w < endpoints.size(); ++w) {
    const auto internal = endpoints[w]["ipAddress"].get<std::string>();
    const auto external = endpoints[w]["accessConfig"]["externalIp"].get<std::string>();
    // The safety rule: real ssh connects wherever the API says, so nothing may lead off this machine.
    EXPECT_TRUE(loopback(internal)) << internal;
    EXPECT_TRUE(loopback(external)) << external;
    EXPECT_NE(internal, external);
    addresses.insert(internal);
    addresses.insert(external);
    for (const auto& address : {internal, external}) {
      const auto answer = ssh("root", address, "hostname; echo \"$HOME\"; pwd; printenv MOCK_TPU_HOST");
      ASSERT_EQ(answer.exit_code, 0) << address << ": " << answer.err;
      const auto lines = jobman::util::split(answer.out, '\n');
      ASSERT_GE(lines.size(), 4U) << answer.out;
      std::smatch match;
      ASSERT_TRUE(std::regex_match(lines[0], match, hostname)) << lines[0];
      EXPECT_EQ(match[1].str(), std::to_string(w));
      EXPECT_EQ(lines[1], "/home/root");
      EXPECT_EQ(lines[2], "/home/root");
      EXPECT_NE(lines[3].find("/" + std::to_string(w)), std::string::npos) << "the host's marker: " << lines[3];
    }
  }
  EXPECT_EQ(addresses.size(), 8U) << "every address is a host's own";

  // A file copied to one host is on that host only, and stays across sessions.
  const auto local = dir.write("payload.txt", "from the test\n");
  std::vector<std::string> scp = {"/usr/bin/scp"};
  const auto options = ssh_options();
  scp.insert(scp.end(), options.begin(), options.end());
  scp.insert(scp.end(), {local.string(), "root@" + endpoints[1]["ipAddress"].get<std::string>() + ":/mnt/payload"});
  const auto copied = jobman::test::run_program(scp);
  ASSERT_EQ(copied.exit_code, 0) << copied.err;
  EXPECT_EQ(ssh("root", endpoints[1]["accessConfig"]["externalIp"], "cat /mnt/payload").out, "from the test\n");
  EXPECT_NE(ssh("root", endpoints[0]["ipAddress"], "cat /mnt/payload").exit_code, 0);
}

TEST_F(HostSshTest, KeysInTheMetadataOpenAccountsAndARemovedKeyStopsWorking) {
  const auto node = create_node("keys", "v4-8", "tester:" + public_key + " tester");
  const auto address = node["networkEndpoints"][0]["ipAddress"].get<std::string>();
  // The key opens tester's account, made for it with a home of its own; root's stays shut.
  const auto tester = ssh("tester", address, "id -un; echo \"$HOME\"; touch ~/mine; stat -c %U ~/mine");
  ASSERT_EQ(tester.exit_code, 0) << tester.err;
  EXPECT_EQ(tester.out, "tester\n/home/tester\ntester\n");
  EXPECT_EQ(ssh("root", address, "true").exit_code, 255);

  // nodes.patch moves the key to root: within moments tester is shut out and root gets in.
  const auto patched = api("PATCH", "/v2/" + kLoc + "/nodes/keys?updateMask=metadata",
                           json{{"metadata", {{"ssh-keys", "root:" + public_key + " root"}}}});
  ASSERT_EQ(patched.status, 200) << patched.text;
  EXPECT_TRUE(eventually([&] { return ssh("root", address, "true").exit_code == 0; }));
  EXPECT_EQ(ssh("tester", address, "true").exit_code, 255);
  // Accounts stay, as the guest agent leaves them: tester's home is still there.
  EXPECT_EQ(ssh("root", address, "stat -c %U /home/tester/mine").out, "tester\n");
}

TEST_F(HostSshTest, TheProjectsKeysOpenEveryNodeThatDoesNotBlockThem) {
  const auto open = create_node("open", "v4-8", "");
  const auto closed = create_node("closed", "v4-8", "");
  auto patched = api("PATCH", "/v2/" + kLoc + "/nodes/closed?updateMask=metadata",
                     json{{"metadata", {{"block-project-ssh-keys", "TRUE"}}}});
  ASSERT_EQ(patched.status, 200) << patched.text;
  const auto open_address = open["networkEndpoints"][0]["ipAddress"].get<std::string>();
  const auto closed_address = closed["networkEndpoints"][0]["ipAddress"].get<std::string>();
  EXPECT_EQ(ssh("root", open_address, "true").exit_code, 255);

  // setCommonInstanceMetadata, with the fingerprint projects.get gave, as gcloud sends it.
  const auto project = api("GET", "/compute/v1/projects/p");
  ASSERT_EQ(project.status, 200) << project.text;
  const auto fingerprint = project.body["commonInstanceMetadata"].value("fingerprint", "");
  const auto set =
      api("POST", "/compute/v1/projects/p/setCommonInstanceMetadata",
          json{{"fingerprint", fingerprint},
               {"items", json::array({{{"key", "ssh-keys"}, {"value", "root:" + public_key + " root"}}})}});
  ASSERT_EQ(set.status, 200) << set.text;
  EXPECT_TRUE(eventually([&] { return ssh("root", open_address, "true").exit_code == 0; }));
  EXPECT_EQ(ssh("root", closed_address, "true").exit_code, 255);
}

TEST_F(HostSshTest, WithOsLoginTheHostsLetInTheKeysOsLoginHoldsAsTheirAccounts) {
  // The metadata's key stops counting once OS Login is on for the node; OS Login's keys open its POSIX account.
  const auto node = create_node("login", "v4-8", "tester:" + public_key + " tester");
  const auto address = node["networkEndpoints"][0]["ipAddress"].get<std::string>();
  ASSERT_EQ(ssh("tester", address, "true").exit_code, 0);
  const auto patched =
      api("PATCH", "/v2/" + kLoc + "/nodes/login?updateMask=metadata",
          json{{"metadata", {{"ssh-keys", "tester:" + public_key + " tester"}, {"enable-oslogin", "TRUE"}}}});
  ASSERT_EQ(patched.status, 200) << patched.text;
  EXPECT_TRUE(eventually([&] { return ssh("tester", address, "true").exit_code == 255; }));

  const auto imported =
      api("POST", "/oslogin/v1/users/ada@example.com:importSshPublicKey?projectId=p", json{{"key", public_key}});
  ASSERT_EQ(imported.status, 200) << imported.text;
  const auto user = imported.body["loginProfile"]["posixAccounts"][0]["username"].get<std::string>();
  EXPECT_EQ(user, "ada_example_com");
  RunResult in;
  EXPECT_TRUE(eventually([&] {
    in = ssh(user, address, "id -un; echo \"$HOME\"");
    return in.exit_code == 0;
  })) << in.err;
  EXPECT_EQ(in.out, user + "\n/home/" + user + "\n");
  // A key imported for another project opens nothing here.
  const auto other = api("POST", "/oslogin/v1/users/bob@example.com:importSshPublicKey?projectId=elsewhere",
                         json{{"key", public_key}});
  ASSERT_EQ(other.status, 200) << other.text;
  EXPECT_EQ(ssh("bob_example_com", address, "true").exit_code, 255);
}

TEST_F(HostSshTest, APreemptedSliceClosesItsConnectionsAndRefusesNewOnes) {
  const auto node = create_node("gone", "v4-8", "root:" + public_key + " root");
  const auto address = node["networkEndpoints"][0]["ipAddress"].get<std::string>();
  std::vector<std::string> argv = {"/usr/bin/ssh"};
  const auto options = ssh_options();
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"root@" + address, "echo up; exec sleep 600"});
  jobman::test::LineReadingProcess session(argv, {}, dir / "session.err");
  ASSERT_EQ(session.next_line(), "up");
  const auto preempted =
      api("POST", "/mock/v1/" + kLoc + "/nodes/gone:preempt", json::object(), server->admin_headers());
  ASSERT_EQ(preempted.status, 200) << preempted.text;
  // ssh's own status when the connection drops: 255, as jobman reads a host that went away.
  EXPECT_EQ(session.finish(), 255);
  EXPECT_EQ(ssh("root", address, "true").exit_code, 255);
}

} // namespace host_ssh_test
