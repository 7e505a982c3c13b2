// The mock cloud's read-only catalog: locations, accelerator types, runtime versions and the service identity, with
// filter, orderBy and paging, driven in-process.
#include "mock_cloud/list_query.hpp"
#include "mock_cloud/world.hpp"

#include <gtest/gtest.h>
#include <set>

namespace world_catalog_test {

using jobman::mock::ListQuery;
using jobman::mock::MockConfig;
using jobman::mock::PoolConfig;
using jobman::mock::Tier;
using jobman::mock::World;
using nlohmann::json;

// Two zones: us-central2-b has v4 (both tiers), europe-west4-a has v5litepod and v6e spot.
MockConfig catalog_config() {
  MockConfig config;
  jobman::mock::ZoneConfig central;
  central.name = "us-central2-b";
  central.pools["v4"][Tier::spot] = PoolConfig{64, 64, {}};
  central.pools["v4"][Tier::on_demand] = PoolConfig{32, 32, {}};
  jobman::mock::ZoneConfig europe;
  europe.name = "europe-west4-a";
  europe.pools["v5litepod"][Tier::spot] = PoolConfig{64, 64, {}};
  europe.pools["v6e"][Tier::spot] = PoolConfig{64, 64, {}};
  config.zones = {central, europe};
  return config;
}

ListQuery query(const std::string& filter = "", const std::string& order_by = "", int page_size = 0,
                const std::string& token = "") {
  return ListQuery{page_size, token, filter, order_by};
}

std::vector<std::string> names_of(const json& items, const char* field) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    out.push_back(item[field].get<std::string>());
  }
  return out;
}

void expect_status(const jobman::mock::Reply& reply, int code, const std::string& status) {
  EXPECT_EQ(reply.status, code) << reply.body.dump();
  EXPECT_EQ(reply.body["error"]["code"], code) << reply.body.dump();
  EXPECT_EQ(reply.body["error"]["status"], status) << reply.body.dump();
}

TEST(MockCatalog, LocationsAreTheConfiguredZones) {
  World world(catalog_config(), 1, 1);
  auto list = world.list_locations("p", query());
  ASSERT_TRUE(list.ok()) << list.body.dump();
  EXPECT_EQ(names_of(list.body["locations"], "locationId"),
            (std::vector<std::string>{"europe-west4-a", "us-central2-b"}));
  auto location = world.get_location("p", "us-central2-b");
  ASSERT_TRUE(location.ok());
  EXPECT_EQ(location.body["name"], "projects/p/locations/us-central2-b");
  EXPECT_EQ(location.body["locationId"], "us-central2-b");
  EXPECT_EQ(location.body["displayName"], "Oklahoma");
  EXPECT_EQ(location.body["labels"]["cloud.googleapis.com/region"], "us-central2");
  EXPECT_EQ(list.body["locations"][1], location.body);
  expect_status(world.get_location("p", "mars-north1-a"), 404, "NOT_FOUND");

  auto filtered = world.list_locations("p", query("displayName=Netherlands"));
  EXPECT_EQ(names_of(filtered.body["locations"], "locationId"), (std::vector<std::string>{"europe-west4-a"}));
  auto first = world.list_locations("p", query("", "", 1));
  ASSERT_EQ(first.body["locations"].size(), 1U);
  auto second = world.list_locations("p", query("", "", 1, first.body["nextPageToken"]));
  EXPECT_EQ(names_of(second.body["locations"], "locationId"), (std::vector<std::string>{"us-central2-b"}));
  EXPECT_FALSE(second.body.contains("nextPageToken"));
}

TEST(MockCatalog, AcceleratorTypesAreEverySizeOfTheZonesGenerations) {
  World world(catalog_config(), 1, 1);
  auto list = world.list_accelerator_types("p", "us-central2-b", query("", "", 1000));
  ASSERT_TRUE(list.ok()) << list.body.dump();
  const auto types = names_of(list.body["acceleratorTypes"], "type");
  EXPECT_EQ(types.front(), "v4-8");
  EXPECT_EQ(types.back(), "v4-4096");
  EXPECT_EQ(types.size(), 10U); // v4-8 ... v4-4096, powers of two.
  auto v4_32 = world.get_accelerator_type("p", "us-central2-b", "v4-32");
  ASSERT_TRUE(v4_32.ok()) << v4_32.body.dump();
  EXPECT_EQ(v4_32.body["name"], "projects/p/locations/us-central2-b/acceleratorTypes/v4-32");
  EXPECT_EQ(v4_32.body["type"], "v4-32");
  EXPECT_EQ(v4_32.body["acceleratorConfigs"], json::array({{{"type", "V4"}, {"topology", "2x2x4"}}}));
  EXPECT_EQ(world.get_accelerator_type("p", "us-central2-b", "v4-8").body["acceleratorConfigs"][0]["topology"],
            "2x2x1");

  auto europe = world.list_accelerator_types("p", "europe-west4-a", query("", "", 1000));
  std::set<std::string> europe_types;
  for (const auto& item : europe.body["acceleratorTypes"]) {
    europe_types.insert(item["type"].get<std::string>());
  }
  EXPECT_TRUE(europe_types.count("v5litepod-16") == 1 && europe_types.count("v6e-256") == 1);
  EXPECT_EQ(europe_types.count("v4-8"), 0U);
  const auto v5e = world.get_accelerator_type("p", "europe-west4-a", "v5litepod-16").body["acceleratorConfigs"][0];
  EXPECT_EQ(v5e, json({{"type", "V5LITE_POD"}, {"topology", "4x4"}}));
  EXPECT_EQ(world.get_accelerator_type("p", "europe-west4-a", "v6e-8").body["acceleratorConfigs"][0],
            json({{"type", "V6E"}, {"topology", "2x4"}}));
  expect_status(world.get_accelerator_type("p", "europe-west4-a", "v4-8"), 404, "NOT_FOUND");
  expect_status(world.get_accelerator_type("p", "us-central2-b", "v4-12"), 404, "NOT_FOUND");
  expect_status(world.list_accelerator_types("p", "nowhere-1-a", query()), 404, "NOT_FOUND");
}

TEST(MockCatalog, AcceleratorTypesFilterOrderAndPage) {
  World world(catalog_config(), 1, 1);
  auto exact = world.list_accelerator_types("p", "europe-west4-a", query("type=v6e-8"));
  EXPECT_EQ(names_of(exact.body["acceleratorTypes"], "type"), (std::vector<std::string>{"v6e-8"}));
  auto prefix = world.list_accelerator_types("p", "europe-west4-a", query("type=\"v6e-*\" AND type!=v6e-1", "", 100));
  EXPECT_EQ(prefix.body["acceleratorTypes"].size(), 7U) << prefix.body.dump();
  auto contains = world.list_accelerator_types("p", "europe-west4-a", query("name:acceleratorTypes/v5litepod-1"));
  EXPECT_EQ(names_of(contains.body["acceleratorTypes"], "type"),
            (std::vector<std::string>{"v5litepod-1", "v5litepod-16", "v5litepod-128"}));
  auto descending = world.list_accelerator_types("p", "us-central2-b", query("", "type desc", 2));
  EXPECT_EQ(names_of(descending.body["acceleratorTypes"], "type"), (std::vector<std::string>{"v4-8", "v4-64"}));
  auto rest =
      world.list_accelerator_types("p", "us-central2-b", query("", "type desc", 100, descending.body["nextPageToken"]));
  EXPECT_EQ(rest.body["acceleratorTypes"].size(), 8U);
  EXPECT_EQ(rest.body["acceleratorTypes"].back()["type"], "v4-1024");

  for (const auto* bad : {"type=v4-8 OR type=v4-32", "(type=v4-8)", "chips=4", "type", "type=v4-8 AND", "type>3"}) {
    expect_status(world.list_accelerator_types("p", "us-central2-b", query(bad)), 400, "INVALID_ARGUMENT");
  }
  for (const auto* bad : {"chips", "type sideways", "type,"}) {
    expect_status(world.list_accelerator_types("p", "us-central2-b", query("", bad)), 400, "INVALID_ARGUMENT");
  }
  expect_status(world.list_accelerator_types("p", "us-central2-b", query("", "", 1, "garbage!")), 400,
                "INVALID_ARGUMENT");
}

TEST(MockCatalog, RuntimeVersionsComeFromTheZonesGenerations) {
  World world(catalog_config(), 1, 1);
  auto central = world.list_runtime_versions("p", "us-central2-b", query());
  ASSERT_TRUE(central.ok()) << central.body.dump();
  EXPECT_EQ(names_of(central.body["runtimeVersions"], "version"),
            (std::vector<std::string>{"tpu-ubuntu2204-base", "tpu-vm-base"}));
  auto europe = world.list_runtime_versions("p", "europe-west4-a", query("", "version desc"));
  EXPECT_EQ(names_of(europe.body["runtimeVersions"], "version"),
            (std::vector<std::string>{"v2-alpha-tpuv6e", "v2-alpha-tpuv5-lite"}));
  auto one = world.get_runtime_version("p", "europe-west4-a", "v2-alpha-tpuv6e");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one.body, json({{"name", "projects/p/locations/europe-west4-a/runtimeVersions/v2-alpha-tpuv6e"},
                            {"version", "v2-alpha-tpuv6e"}}));
  expect_status(world.get_runtime_version("p", "us-central2-b", "v2-alpha-tpuv6e"), 404, "NOT_FOUND");
  auto filtered = world.list_runtime_versions("p", "us-central2-b", query("version=tpu-vm-base"));
  EXPECT_EQ(names_of(filtered.body["runtimeVersions"], "version"), (std::vector<std::string>{"tpu-vm-base"}));
  expect_status(world.list_runtime_versions("p", "us-central2-b", query("type=v4-8")), 400, "INVALID_ARGUMENT");
}

TEST(MockCatalog, ServiceIdentityIsStablePerProject) {
  World world(catalog_config(), 1, 1);
  auto first = world.generate_service_identity("p", "us-central2-b");
  ASSERT_TRUE(first.ok());
  const auto email = first.body["identity"]["email"].get<std::string>();
  EXPECT_TRUE(email.rfind("service-", 0) == 0 && email.find("@cloud-tpu.iam.gserviceaccount.com") != std::string::npos)
      << email;
  EXPECT_EQ(world.generate_service_identity("p", "europe-west4-a").body, first.body);
  World restarted(catalog_config(), 1, 99);
  EXPECT_EQ(restarted.generate_service_identity("p", "us-central2-b").body, first.body);
  EXPECT_NE(world.generate_service_identity("q", "us-central2-b").body, first.body);
  expect_status(world.generate_service_identity("p", "nowhere-1-a"), 404, "NOT_FOUND");
}

} // namespace world_catalog_test
