// `jobman reservations` against a real jobman-mock-cloud: the project's reservations listed zone by zone through the
// TPU API's v2alpha1, with their chips, the chips a reserved slice holds and those left free; a zone without one
// lists none; and an endpoint that does not serve v2alpha1 is an error that names it.
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/serving_thread.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace jobman::test {
namespace cli_reservations_test {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kZone = "us-central2-b";
constexpr const char* kOtherZone = "europe-west4-a";

// A jobman home on its own mock: us-central2-b has the v4 reservation of configs/mock-cloud.yaml (64 chips),
// europe-west4-a none.
class ReservationsTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_GT(mock->port(), 0) << mock->first_line();
    client = std::make_unique<httplib::Client>("127.0.0.1", mock->port());
    env = mock_home_environment(*mock, dir / "home", dir / "config");
    env["JOBMAN_ZONE"] = kZone;
    env["NO_COLOR"] = "1";
  }

  RunResult jm(const std::vector<std::string>& args) { return run_jobman(args, RunOptions{env, "", ""}); }

  // `jobman reservations ARGS --json`, which must succeed with nothing on stderr and print a JSON array.
  json listed(std::vector<std::string> args) {
    args.insert(args.begin(), "reservations");
    args.emplace_back("--json");
    const auto r = jm(args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.err, "") << "--json output is not mixed with logging";
    auto document = json::parse(r.out, nullptr, false);
    EXPECT_TRUE(document.is_array()) << r.out;
    return document;
  }

  // The chips the mock says the zone's reservation holds now (reservations.list's usage.total).
  std::string held_in_reservation() {
    const auto answer =
        http_call(*client, "GET", "/v2alpha1/projects/jobman-mock/locations/" + std::string(kZone) + "/reservations",
                  nullptr, {{"Authorization", "Bearer test-token"}});
    if (answer.status != 200 || !answer.body.contains("reservations")) {
      return "HTTP " + std::to_string(answer.status);
    }
    return answer.body["reservations"][0]["standard"]["usage"]["total"].get<std::string>();
  }

  TempDir dir;
  std::unique_ptr<MockCloudProcess> mock =
      start_test_mock(dir, test_world(2, "  us-central2-b:\n    v4:\n      spot: {chips: 256}\n"
                                         "      reserved: {chips: 64, reservation: v4-reservation}\n"
                                         "  europe-west4-a:\n    v4:\n      spot: {chips: 64}\n"));
  std::unique_ptr<httplib::Client> client;
  std::map<std::string, std::string> env;
};

TEST_F(ReservationsTest, ListsTheZonesReservationWithItsChipsInUseAndFree) {
  // A reserved v4-8 (4 chips) in the reservation, through v2alpha1 as jobman asks for one.
  const json body = {{"tpu",
                      {{"nodeSpec",
                        {{{"parent", "projects/jobman-mock/locations/" + std::string(kZone)},
                          {"nodeId", "held"},
                          {"node", {{"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
                     {"provisioningModel", "RESERVATION_BOUND"},
                     {"guaranteed", {{"reserved", true}}}};
  const auto made = http_call(*client, "POST",
                              "/v2alpha1/projects/jobman-mock/locations/" + std::string(kZone) +
                                  "/queuedResources?queuedResourceId=held",
                              body, {{"Authorization", "Bearer test-token"}});
  ASSERT_EQ(made.status, 200) << made.text;
  ASSERT_TRUE(eventually([&] { return held_in_reservation() == "4"; }, std::chrono::seconds(30)))
      << held_in_reservation();

  const auto both = listed({"--zone", kZone, "--zone", kOtherZone});
  ASSERT_EQ(both.size(), 1U) << "europe-west4-a has none: " << both.dump(2);
  EXPECT_EQ(both[0], (json{{"name", "v4-reservation"},
                           {"zone", kZone},
                           {"type", "V4"},
                           {"chips", 64},
                           {"in_use", 4},
                           {"free", 60},
                           {"state", "ACTIVE"}}))
      << both.dump(2);

  // Without --zone: the zones in use, here the settings' zone alone.
  EXPECT_EQ(listed({}), both);

  // For people: a header and one row with the same figures.
  const auto table = jm({"reservations", "--zone", kZone});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  std::istringstream lines(table.out);
  std::string header;
  std::string row;
  std::getline(lines, header);
  std::getline(lines, row);
  for (const char* column : {"NAME", "ZONE", "TYPE", "CHIPS", "IN USE", "FREE", "STATE"}) {
    EXPECT_NE(header.find(column), std::string::npos) << column << " in " << table.out;
  }
  std::istringstream words(row);
  std::vector<std::string> cells{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
  EXPECT_EQ(cells, (std::vector<std::string>{"v4-reservation", kZone, "V4", "64", "4", "60", "ACTIVE"})) << table.out;
}

TEST_F(ReservationsTest, AZoneWithoutReservationsListsNone) {
  EXPECT_EQ(listed({"--zone", kOtherZone}), json::array());
  const auto r = jm({"reservations", "--zone", kOtherZone});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "No reservations in europe-west4-a.\n");
}

TEST_F(ReservationsTest, BadZonesAreUsageErrors) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"reservations", "--zone", "projects/p/locations/us-central2-b"},
        std::vector<std::string>{"reservations", "--zone", kZone, "--all-zones"}}) {
    const auto r = jm(args);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("--zone"), std::string::npos) << r.err;
  }
}

// A cloud whose endpoint serves v2 only: every /v2alpha1/ path is 404, as a front end without the version answers.
TEST(ReservationsEndpoint, AnEndpointWithoutV2alpha1IsAnErrorNamingIt) {
  httplib::Server server;
  server.Get("/computeMetadata/v1/instance/service-accounts/default/token", [](const httplib::Request&,
                                                                               httplib::Response& response) {
    response.set_content(R"({"access_token":"t","expires_in":3600,"token_type":"Bearer"})", "application/json");
  });
  server.Get(".*", [](const httplib::Request&, httplib::Response& response) {
    response.status = 404;
    response.set_content(R"({"error":{"code":404,"status":"NOT_FOUND","message":"Not Found"}})", "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  ServingThread serving(server);
  TempDir dir;
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(port);
  const auto r =
      run_jobman({"reservations", "--zone", kZone}, RunOptions{{{"JOBMAN_HOME", (dir / "home").string()},
                                                                {"XDG_CONFIG_HOME", (dir / "config").string()},
                                                                {"JOBMAN_CLOUD", "mock"},
                                                                {"JOBMAN_PROJECT", ""},
                                                                {"JOBMAN_API_ENDPOINT", endpoint},
                                                                {"JOBMAN_AUTOSTART", "0"},
                                                                {"JOBMAN_MOCK_ADMIN_TOKEN_FILE", ""}},
                                                               "",
                                                               ""});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("reservations.list"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("needs the TPU API's v2alpha1: does " + endpoint + "/v2alpha1/ serve it?"), std::string::npos)
      << r.err;
}

} // namespace cli_reservations_test
} // namespace jobman::test
