// The query parameters each method binds: the mock's table against the discovery document, and a parameter no
// method field takes refused as Google's front end refuses it.
#include "mock_cloud/query_parameters.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace query_parameters_test {

using nlohmann::json;

// Every method of the discovery document's resources, by the mock's short name ("nodes.create"), with the query
// parameters it binds.
void collect_methods(const json& resources, std::map<std::string, std::set<std::string>>& out) {
  for (const auto& [resource, body] : resources.items()) {
    // Held here: a range-for over items() of a temporary would outlive it.
    const json verbs = body.value("methods", json::object());
    for (const auto& [verb, method] : verbs.items()) {
      const std::string short_name = resource == "locations" ? "locations." + verb : resource + "." + verb;
      std::set<std::string> query;
      const json parameters = method.value("parameters", json::object());
      for (const auto& [name, parameter] : parameters.items()) {
        if (parameter.value("location", "") == "query") {
          query.insert(name);
        }
      }
      out[short_name] = query;
    }
    collect_methods(body.value("resources", json::object()), out);
  }
}

TEST(MockQueryParameters, EveryMethodBindsWhatTheDiscoveryDocumentSays) {
  std::ifstream in(std::string(JOBMAN_SOURCE_DIR) + "/tests/clients/tpu-v2-discovery.json");
  ASSERT_TRUE(in.good());
  const json discovery = json::parse(in);
  std::map<std::string, std::set<std::string>> methods;
  collect_methods(discovery["resources"]["projects"]["resources"], methods);
  ASSERT_EQ(methods.size(), 24U);
  for (const auto& [method, expected] : methods) {
    const auto bound = jobman::mock::method_query_parameters(method);
    ASSERT_TRUE(bound.has_value()) << method;
    EXPECT_EQ(std::set<std::string>(bound->begin(), bound->end()), expected) << method;
  }
}

TEST(MockQueryParameters, AParameterTheMethodLacksIsNamed) {
  using jobman::mock::unbound_query_parameter;
  EXPECT_EQ(unbound_query_parameter("nodes.create", "nodeId=a&requestId=r").value_or(""), "requestId");
  EXPECT_EQ(unbound_query_parameter("nodes.delete", "prettyPrint=false&requestId=r").value_or(""), "requestId");
  EXPECT_EQ(unbound_query_parameter("nodes.list", "pageSize=5&pageSz=3").value_or(""), "pageSz");
}

TEST(MockQueryParameters, SystemParametersBindEverywhereWithOrWithoutTheDollar) {
  using jobman::mock::unbound_query_parameter;
  EXPECT_FALSE(unbound_query_parameter("nodes.create", "nodeId=a&prettyPrint=false&fields=name&alt=json"));
  EXPECT_FALSE(unbound_query_parameter("nodes.get", "%24alt=json%3Benum-encoding%3Dint&$.xgafv=2&key=k"));
  EXPECT_FALSE(unbound_query_parameter("queuedResources.delete", "force=true&requestId=r&quotaUser=u"));
  EXPECT_FALSE(unbound_query_parameter("admin.preempt", "anything=1")) << "methods outside the API are not checked";
}

} // namespace query_parameters_test
