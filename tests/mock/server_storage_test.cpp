// Cloud Storage's JSON API of a jobman-mock-cloud child process: buckets.get placed by the world config, by the zone
// of the host that mounted the bucket first (gcsfuse over ssh) or by the world's first zone; Google's errors and the
// bearer check; objects.list over a directory tree with prefix, delimiter and paging, in byte order; objects.get; and
// the config's buckets section refused where it is wrong.
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/config.hpp"
#include "support/host_ssh.hpp"
#include "support/mock_cloud.hpp"
#include "support/temp_dir.hpp"

#include <filesystem>
#include <gtest/gtest.h>
#include <httplib.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

namespace server_storage_test {

using jobman::test::HttpAnswer;
using nlohmann::json;
namespace fs = std::filesystem;

// The headers of a call with the token start_test_mock makes the mock trust.
httplib::Headers auth() {
  return {{"Authorization", "Bearer test-token"}};
}

// Two zones, the first in us-central2; three buckets placed by the config.
std::string world() {
  return jobman::test::test_world(1, R"(  us-central2-b:
    v4:
      spot: {chips: 64}
  europe-west4-a:
    v4:
      spot: {chips: 64}
buckets:
  my-eu-data: {location: europe-west4}
  shared-us: {location: us, type: multi-region}
  cold-pair: {location: EUR4, storage_class: coldline}
)");
}

// An RFC 3339 time with milliseconds, as Cloud Storage writes them.
bool storage_time(const json& value) {
  static const std::regex pattern(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  return value.is_string() && std::regex_match(value.get<std::string>(), pattern);
}

// The object names of a list page, in order.
std::vector<std::string> names_of(const json& page) {
  std::vector<std::string> names;
  for (const auto& item : page.value("items", json::array())) {
    names.push_back(item["name"].get<std::string>());
  }
  return names;
}

class MockStorageTest : public ::testing::Test {
protected:
  jobman::test::TempDir dir;
  std::unique_ptr<jobman::test::MockCloudProcess> server;
  std::unique_ptr<httplib::Client> client;

  void SetUp() override { start({"--sshd", "none"}); }

  void start(const std::vector<std::string>& options) {
    client.reset();
    server = jobman::test::start_test_mock(dir, world(), 1, options);
    ASSERT_GT(server->port(), 0) << server->first_line();
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
  }

  HttpAnswer get(const std::string& path, const httplib::Headers& headers = auth()) {
    return jobman::test::http_call(*client, "GET", path, nullptr, headers);
  }

  // The bucket directory the mock's gcsfuse mounts from.
  fs::path bucket_dir(const std::string& bucket) { return dir / "state" / "buckets" / bucket; }

  // Writes `content` to object `name` of `bucket`, making its directories.
  void put(const std::string& bucket, const std::string& name, const std::string& content = "hello") {
    const auto path = bucket_dir(bucket) / name;
    fs::create_directories(path.parent_path());
    jobman::util::write_file_atomic(path, content, 0644);
  }

  // Every object name of `bucket` under `query` (with no pageToken), page by page of `max_results`.
  std::vector<std::string> every_page(const std::string& bucket, const std::string& query, int max_results,
                                      int& pages) {
    std::vector<std::string> names;
    std::string token;
    pages = 0;
    do {
      auto page = get("/storage/v1/b/" + bucket + "/o?maxResults=" + std::to_string(max_results) + query +
                      (token.empty() ? "" : "&pageToken=" + token));
      EXPECT_EQ(page.status, 200) << page.text;
      const auto these = names_of(page.body);
      EXPECT_LE(these.size(), static_cast<std::size_t>(max_results));
      names.insert(names.end(), these.begin(), these.end());
      token = page.body.value("nextPageToken", "");
      ++pages;
    } while (!token.empty() && pages < 100);
    return names;
  }
};

// Asserts Cloud Storage's error body: a google.rpc Status that also lists {message, domain, reason}.
void expect_storage_error(const HttpAnswer& answer, int code, const std::string& reason) {
  EXPECT_EQ(answer.status, code) << answer.text;
  ASSERT_TRUE(answer.body.is_object() && answer.body.contains("error")) << answer.text;
  const auto& error = answer.body["error"];
  EXPECT_EQ(error.value("code", 0), code);
  EXPECT_FALSE(error.value("message", "").empty());
  ASSERT_TRUE(error.contains("errors") && error["errors"].size() == 1) << answer.text;
  EXPECT_EQ(error["errors"][0].value("reason", ""), reason);
  EXPECT_EQ(error["errors"][0].value("domain", ""), "global");
}

TEST_F(MockStorageTest, ABucketTheConfigPlacesIsWhereItSays) {
  auto eu = get("/storage/v1/b/my-eu-data");
  ASSERT_EQ(eu.status, 200) << eu.text;
  EXPECT_EQ(eu.body["kind"], "storage#bucket");
  EXPECT_EQ(eu.body["id"], "my-eu-data");
  EXPECT_EQ(eu.body["name"], "my-eu-data");
  EXPECT_EQ(eu.body["location"], "EUROPE-WEST4");
  EXPECT_EQ(eu.body["locationType"], "region");
  EXPECT_EQ(eu.body["storageClass"], "STANDARD");
  EXPECT_EQ(eu.body["metageneration"], "1");
  EXPECT_TRUE(eu.body["projectNumber"].is_string() &&
              std::regex_match(eu.body["projectNumber"].get<std::string>(), std::regex("[0-9]+")))
      << eu.text;
  EXPECT_TRUE(eu.body["selfLink"].get<std::string>().ends_with("/storage/v1/b/my-eu-data")) << eu.text;
  EXPECT_TRUE(storage_time(eu.body["timeCreated"])) << eu.text;
  EXPECT_TRUE(storage_time(eu.body["updated"])) << eu.text;
  EXPECT_FALSE(eu.body.value("etag", "").empty());

  auto us = get("/storage/v1/b/shared-us");
  ASSERT_EQ(us.status, 200) << us.text;
  EXPECT_EQ(us.body["location"], "US");
  EXPECT_EQ(us.body["locationType"], "multi-region");
  auto pair = get("/storage/v1/b/cold-pair");
  EXPECT_EQ(pair.body["location"], "EUR4");
  EXPECT_EQ(pair.body["locationType"], "dual-region");
  EXPECT_EQ(pair.body["storageClass"], "COLDLINE");

  // Partial response, as on the TPU routes.
  auto some = get("/storage/v1/b/my-eu-data?fields=location,locationType");
  EXPECT_EQ(some.body, json({{"location", "EUROPE-WEST4"}, {"locationType", "region"}})) << some.text;
}

TEST_F(MockStorageTest, ABucketNothingPlacesIsInTheRegionOfTheWorldsFirstZone) {
  put("plain", "file.txt");
  auto plain = get("/storage/v1/b/plain");
  ASSERT_EQ(plain.status, 200) << plain.text;
  EXPECT_EQ(plain.body["location"], "US-CENTRAL2");
  EXPECT_EQ(plain.body["locationType"], "region");
  const auto buckets = get("/mock/v1/buckets", server->admin_headers());
  ASSERT_EQ(buckets.status, 200) << buckets.text;
  bool listed = false;
  for (const auto& bucket : buckets.body["buckets"]) {
    if (bucket["name"] == "plain") {
      listed = true;
      EXPECT_EQ(bucket["placedBy"], "first zone");
    } else if (bucket["name"] == "my-eu-data") {
      EXPECT_EQ(bucket["placedBy"], "config");
      EXPECT_EQ(bucket["location"], "EUROPE-WEST4");
    }
  }
  EXPECT_TRUE(listed) << buckets.text;
  EXPECT_EQ(buckets.body["buckets"].size(), 4U) << buckets.text;
  EXPECT_EQ(get("/mock/v1/buckets", {}).status, 401) << "the admin API needs the admin token";
  EXPECT_EQ(get("/mock/v1/buckets").status, 403) << "an API access token does not open the admin API";
}

// The real path: gcsfuse over ssh on a host in europe-west4-a mounts the bucket first; a later mount from another
// zone changes nothing.
TEST_F(MockStorageTest, ABucketIsInTheRegionOfTheHostThatMountedItFirst) {
  start({});
  jobman::test::MockHostSsh hosts(dir, *server);
  ASSERT_EQ(hosts.error(), "");
  for (const auto& [zone, node] : {std::pair{std::string("europe-west4-a"), std::string("eu-node")},
                                   std::pair{std::string("us-central2-b"), std::string("us-node")}}) {
    const json body = {
        {"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}, {"schedulingConfig", {{"spot", true}}}};
    std::string path = "/v2/projects/p/locations/" + zone;
    path += "/nodes?nodeId=" + node;
    auto created = jobman::test::http_call(*client, "POST", path, body, auth());
    ASSERT_EQ(created.status, 200) << created.text;
    auto mounted = hosts.ssh(zone, node, "0", "echo $MOCK_TPU_ZONE && mkdir -p ~/m && gcsfuse shared-ckpt ~/m");
    ASSERT_EQ(mounted.exit_code, 0) << mounted.err;
    EXPECT_EQ(mounted.out, zone + "\n");
    auto bucket = get("/storage/v1/b/shared-ckpt");
    ASSERT_EQ(bucket.status, 200) << bucket.text;
    EXPECT_EQ(bucket.body["location"], "EUROPE-WEST4") << "mounted first in europe-west4-a, then from " << zone;
  }
  // The record is beside the buckets, not in one: no listing shows it.
  EXPECT_EQ(jobman::util::read_file(dir / "state" / "buckets" / ".first-mounts" / "shared-ckpt"), "europe-west4-a\n");
  auto listed = get("/storage/v1/b/shared-ckpt/o");
  EXPECT_EQ(listed.status, 200) << listed.text;
  EXPECT_FALSE(listed.body.contains("items")) << listed.text;
  expect_storage_error(get("/storage/v1/b/.first-mounts"), 400, "invalid");
}

TEST_F(MockStorageTest, AnUnknownBucketIsNotFound) {
  expect_storage_error(get("/storage/v1/b/no-such-bucket"), 404, "notFound");
  expect_storage_error(get("/storage/v1/b/no-such-bucket/o"), 404, "notFound");
  expect_storage_error(get("/storage/v1/b/Not_A_Bucket"), 400, "invalid");
  put("bkt", "a");
  expect_storage_error(get("/storage/v1/b/bkt/o/missing"), 404, "notFound");
  // A name that would leave the bucket names no object.
  put("other", "secret");
  expect_storage_error(get("/storage/v1/b/bkt/o/..%2Fother%2Fsecret"), 404, "notFound");
}

TEST_F(MockStorageTest, EveryCallNeedsAnAccessToken) {
  put("bkt", "a");
  for (const std::string path : {"/storage/v1/b/bkt", "/storage/v1/b/bkt/o", "/storage/v1/b/bkt/o/a"}) {
    auto none = get(path, {});
    expect_storage_error(none, 401, "required");
    EXPECT_TRUE(none.headers.count("WWW-Authenticate") == 1) << path;
    expect_storage_error(get(path, {{"Authorization", "Bearer not-a-token"}}), 401, "required");
    EXPECT_EQ(get(path).status, 200) << path;
  }
  // The metrics count the calls under the API's method names.
  const auto metrics = get("/mock/v1/metrics", server->admin_headers()).body;
  EXPECT_EQ(metrics["requests"]["storage.buckets.get"]["401"], 2) << metrics.dump();
  EXPECT_EQ(metrics["requests"]["storage.objects.list"]["200"], 1) << metrics.dump();
}

TEST_F(MockStorageTest, ObjectsListTakesPrefixDelimiterAndPages) {
  put("bkt", "data/a.txt", "hello");
  put("bkt", "data/b/c.bin", "cc");
  put("bkt", "data/b/d.bin", "ddd");
  put("bkt", "data/e/f/g.txt", "gggg");
  put("bkt", "data-x", "x");
  put("bkt", "top.txt", "top");
  fs::create_directories(bucket_dir("bkt") / "empty-dir");
  fs::create_symlink("/etc/hostname", bucket_dir("bkt") / "link-out");
  fs::create_directory_symlink("/etc", bucket_dir("bkt") / "dir-out");
  const std::vector<std::string> every = {"data-x",       "data/a.txt",     "data/b/c.bin",
                                          "data/b/d.bin", "data/e/f/g.txt", "top.txt"};

  auto all = get("/storage/v1/b/bkt/o");
  ASSERT_EQ(all.status, 200) << all.text;
  EXPECT_EQ(all.body["kind"], "storage#objects");
  EXPECT_EQ(names_of(all.body), every) << "files only, no links, '-' before '/'";
  EXPECT_FALSE(all.body.contains("nextPageToken"));
  EXPECT_FALSE(all.body.contains("prefixes"));
  const auto& a = all.body["items"][1];
  EXPECT_EQ(a["kind"], "storage#object");
  EXPECT_EQ(a["bucket"], "bkt");
  EXPECT_EQ(a["size"], "5");
  EXPECT_EQ(a["md5Hash"], "XUFAKrxLKna5cZ2REBfFkg==") << "MD5 of 'hello'";
  EXPECT_EQ(a["contentType"], "text/plain; charset=utf-8");
  EXPECT_EQ(a["storageClass"], "STANDARD");
  EXPECT_EQ(a["metageneration"], "1");
  EXPECT_TRUE(std::regex_match(a["generation"].get<std::string>(), std::regex("[1-9][0-9]+")));
  EXPECT_EQ(a["id"], "bkt/data/a.txt/" + a["generation"].get<std::string>());
  EXPECT_TRUE(storage_time(a["timeCreated"]) && storage_time(a["updated"])) << a.dump();

  auto under_data = get("/storage/v1/b/bkt/o?prefix=data/&delimiter=/");
  EXPECT_EQ(names_of(under_data.body), std::vector<std::string>{"data/a.txt"});
  EXPECT_EQ(under_data.body["prefixes"], json({"data/b/", "data/e/"})) << under_data.text;
  auto top = get("/storage/v1/b/bkt/o?delimiter=/");
  EXPECT_EQ(names_of(top.body), (std::vector<std::string>{"data-x", "top.txt"}));
  EXPECT_EQ(top.body["prefixes"], json({"data/"})) << top.text;
  EXPECT_EQ(names_of(get("/storage/v1/b/bkt/o?prefix=data/b").body),
            (std::vector<std::string>{"data/b/c.bin", "data/b/d.bin"}));
  EXPECT_FALSE(get("/storage/v1/b/bkt/o?prefix=nothing/").body.contains("items"));

  // Items and prefixes share a page: two entries, then the third.
  auto first = get("/storage/v1/b/bkt/o?prefix=data/&delimiter=/&maxResults=2");
  EXPECT_EQ(names_of(first.body), std::vector<std::string>{"data/a.txt"});
  EXPECT_EQ(first.body["prefixes"], json({"data/b/"}));
  ASSERT_TRUE(first.body.contains("nextPageToken")) << first.text;
  auto second = get("/storage/v1/b/bkt/o?prefix=data/&delimiter=/&maxResults=2&pageToken=" +
                    first.body["nextPageToken"].get<std::string>());
  EXPECT_FALSE(second.body.contains("items")) << second.text;
  EXPECT_EQ(second.body["prefixes"], json({"data/e/"}));
  EXPECT_FALSE(second.body.contains("nextPageToken")) << second.text;

  int pages = 0;
  EXPECT_EQ(every_page("bkt", "", 1, pages), every);
  EXPECT_EQ(pages, 6);
  EXPECT_EQ(every_page("bkt", "&prefix=data/", 3, pages),
            (std::vector<std::string>{"data/a.txt", "data/b/c.bin", "data/b/d.bin", "data/e/f/g.txt"}));
  EXPECT_EQ(pages, 2);
  EXPECT_EQ(names_of(get("/storage/v1/b/bkt/o?startOffset=data/b&endOffset=data/e").body),
            (std::vector<std::string>{"data/b/c.bin", "data/b/d.bin"}));

  auto narrow = get("/storage/v1/b/bkt/o?maxResults=2&fields=items(name),nextPageToken");
  ASSERT_EQ(narrow.status, 200) << narrow.text;
  EXPECT_EQ(narrow.body["items"], json({{{"name", "data-x"}}, {{"name", "data/a.txt"}}})) << narrow.text;
  EXPECT_TRUE(narrow.body.contains("nextPageToken"));
  EXPECT_FALSE(narrow.body.contains("kind"));

  expect_storage_error(get("/storage/v1/b/bkt/o?maxResults=0"), 400, "invalid");
  expect_storage_error(get("/storage/v1/b/bkt/o?pageToken=!!"), 400, "invalid");
  expect_storage_error(get("/storage/v1/b/bkt/o?matchGlob=**.txt"), 400, "invalid");

  auto one = get("/storage/v1/b/bkt/o/data%2Fe%2Ff%2Fg.txt");
  ASSERT_EQ(one.status, 200) << one.text;
  EXPECT_EQ(one.body["name"], "data/e/f/g.txt");
  EXPECT_EQ(one.body["size"], "4");
  expect_storage_error(get("/storage/v1/b/bkt/o/link-out"), 404, "notFound");
  expect_storage_error(get("/storage/v1/b/bkt/o/dir-out%2Fhostname"), 404, "notFound");
  EXPECT_EQ(get("/storage/v1/b/bkt/o/data%2Fa.txt?alt=media").status, 501);
}

TEST_F(MockStorageTest, NamesAreListedInByteOrder) {
  // Upper case before lower case, '-' before '/', ASCII before UTF-8: the order of the bytes, not of a directory walk.
  for (const std::string name : {"a/x", "a-b", "a.d/z", "~", "B", "\xc3\xa9t\xc3\xa9", "Z", "a0"}) {
    put("order", name);
  }
  const std::vector<std::string> expected = {"B", "Z", "a-b", "a.d/z", "a/x", "a0", "~", "\xc3\xa9t\xc3\xa9"};
  auto all = get("/storage/v1/b/order/o");
  ASSERT_EQ(all.status, 200) << all.text;
  EXPECT_EQ(names_of(all.body), expected);
  int pages = 0;
  EXPECT_EQ(every_page("order", "", 3, pages), expected);
  auto collapsed = get("/storage/v1/b/order/o?delimiter=/");
  EXPECT_EQ(names_of(collapsed.body), (std::vector<std::string>{"B", "Z", "a-b", "a0", "~", "\xc3\xa9t\xc3\xa9"}));
  EXPECT_EQ(collapsed.body["prefixes"], json({"a.d/", "a/"}));
}

// The config's buckets section: each mistake named by its key.
TEST(MockStorageConfig, RefusesWhatIsNotABucketPlacement) {
  const auto world = [](const std::string& buckets) {
    return jobman::test::test_world(1, "  us-central2-b:\n    v4:\n      spot: {chips: 8}\n") + "buckets:\n" + buckets;
  };
  const auto refusal = [&](const std::string& buckets) -> std::string {
    try {
      jobman::mock::parse_mock_config(world(buckets), "world.yaml");
    } catch (const jobman::ConfigError& e) {
      return e.what();
    }
    return "";
  };
  const auto config = jobman::mock::parse_mock_config(
      world("  a-eu: {location: europe-west4}\n  b-us: {location: US}\n  c-nam: {location: nam4, type: dual-region}\n"),
      "world.yaml");
  ASSERT_EQ(config.buckets.size(), 3U);
  EXPECT_EQ(config.buckets.at("a-eu").type, jobman::mock::BucketLocationType::region);
  EXPECT_EQ(config.buckets.at("b-us").location, "us");
  EXPECT_EQ(config.buckets.at("b-us").type, jobman::mock::BucketLocationType::multi_region);
  EXPECT_EQ(config.buckets.at("c-nam").type, jobman::mock::BucketLocationType::dual_region);

  EXPECT_NE(refusal("  b: {location: us}\n").find("buckets.b"), std::string::npos) << "too short a name";
  EXPECT_NE(refusal("  Big_Data: {location: us}\n").find("is not a bucket name"), std::string::npos);
  EXPECT_NE(refusal("  data: {}\n").find("buckets.data.location"), std::string::npos);
  const auto zone = refusal("  data: {location: europe-west4-a}\n");
  EXPECT_NE(zone.find("is a zone"), std::string::npos) << zone;
  EXPECT_NE(zone.find("location: europe-west4"), std::string::npos) << zone;
  EXPECT_NE(refusal("  data: {location: mars}\n").find("not a location Cloud Storage has"), std::string::npos);
  EXPECT_NE(refusal("  data: {location: us, type: region}\n").find("not a region location"), std::string::npos);
  EXPECT_NE(refusal("  data: {location: us, type: global}\n").find("buckets.data.type"), std::string::npos);
  EXPECT_NE(refusal("  data: {location: us, storage_class: hot}\n").find("buckets.data.storage_class"),
            std::string::npos);
  EXPECT_NE(refusal("  data: {location: us, locaton: eu}\n").find("did you mean 'location'"), std::string::npos);
  EXPECT_NE(refusal("  - data\n").find("buckets"), std::string::npos);
}

} // namespace server_storage_test
