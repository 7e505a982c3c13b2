// Bugs the fuzz targets in tests/fuzz found in the config loader and in jobman's reading of the TPU API's answers;
// each test is named after its bug, and the input that found it is in tests/fuzz/corpus/.
#include "jobman/cloud/auth.hpp"
#include "jobman/cloud/tpu_client.hpp"
#include "jobman/config/loader.hpp"
#include "jobman/util/json_text.hpp"
#include "support/scoped_env.hpp"

#include <algorithm>
#include <chrono>
#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace jobman {
namespace fuzz_regressions_test {

const std::string kConfig = "job:\n  name: mnist\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
                            "command:\n  cmd: train\n";

// The diagnostics of a config the loader refuses; fails the test when it is accepted or throws something else.
std::vector<Diagnostic> config_errors(const std::string& text, const config::LoadOptions& options = {}) {
  try {
    (void)config::parse_job_configs(text, "fuzz.yaml", options);
  } catch (const ConfigError& e) {
    return e.diagnostics();
  }
  ADD_FAILURE() << "the config was accepted";
  return {};
}

TEST(ConfigFuzzRegressions, InvalidUtf8InAConfigIsAConfigErrorNotAJsonException) {
  // A byte that is not UTF-8 in a value reached the JSON of --dry-run and the store, where nlohmann::json threw.
  const auto errors = config_errors(kConfig + "vars:\n  note: caf\xe9\n");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].where.line, 9);
  EXPECT_EQ(errors[0].where.column, 12);
  EXPECT_EQ(errors[0].message, "not UTF-8 text: byte 0xe9");

  // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either; real UTF-8 is fine.
  for (const std::string& bad : std::vector<std::string>{"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    EXPECT_EQ(config_errors(kConfig + "vars:\n  x: a" + bad + "\n").size(), 1U);
  }
  EXPECT_EQ(
      config::parse_job_configs(kConfig + "vars:\n  x: caf\xc3\xa9 \xf0\x9f\x9a\x80\n", "ok.yaml").front().vars.at("x"),
      "caf\xc3\xa9 \xf0\x9f\x9a\x80");
}

TEST(ConfigFuzzRegressions, ANulByteIsAConfigErrorNotUtf16ThatYieldsBytesThatAreNotUtf8) {
  // yaml-cpp reads text that starts "X\0" as UTF-16LE. These bytes are UTF-8 and also UTF-16LE with a lone surrogate
  // (D800 before 0080), which yaml-cpp passed on as ED A0 80: the JSON of --dry-run and the store threw on it.
  std::string text;
  for (const char c : kConfig + "vars:\n  x: a") {
    text += c;
    text += '\0';
  }
  text += std::string("\0\xd8\x80\0\n\0", 6);
  auto errors = config_errors(text);
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].where.line, 1);
  EXPECT_EQ(errors[0].where.column, 2);
  EXPECT_EQ(errors[0].message, "a NUL byte, which YAML text cannot hold");

  // Anywhere else in a file, it is refused at its place as well.
  errors = config_errors(kConfig + "vars:\n  x: a" + std::string(1, '\0') + "b\n");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].where.line, 9);
  EXPECT_EQ(errors[0].where.column, 7);
}

TEST(ConfigFuzzRegressions, InvalidUtf8InSetOrSweepArgumentsIsAConfigError) {
  config::LoadOptions options;
  options.set_overrides = {"vars.x=ok", "vars.y=\xff"};
  auto errors = config_errors(kConfig, options);
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].where.file, "--set");
  EXPECT_EQ(errors[0].message, "the --set argument number 2 is not UTF-8 text");

  options.set_overrides.clear();
  options.sweep_args = {"vars.\xfe=1,2"};
  errors = config_errors(kConfig, options);
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].where.file, "--sweep");
}

TEST(ConfigFuzzRegressions, InvalidUtf8FromAnEnvironmentVariableIsAConfigError) {
  const test::ScopedEnv env("JOBMAN_FUZZ_NOT_UTF8", "\x80\x81");
  const auto errors = config_errors(kConfig + "vars:\n  x: ${oc.env:JOBMAN_FUZZ_NOT_UTF8}\n");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_NE(errors[0].message.find("is not UTF-8 text"), std::string::npos) << errors[0].message;
}

TEST(ConfigFuzzRegressions, ACommaOutsideAFlowCollectionIsASyntaxErrorNotAnEndlessLoop) {
  // yaml-cpp's LoadAll returned empty documents forever after a stray ',' (as in --set 'command.workers=,[0]').
  for (const std::string& text : std::vector<std::string>{",", ",[r 0]", "- a\n,", kConfig + ","}) {
    const auto errors = config_errors(text);
    ASSERT_FALSE(errors.empty()) << text;
  }
  EXPECT_EQ(config_errors("- a\n,")[0].message, "YAML syntax error: ',' outside a flow collection");

  config::LoadOptions options;
  options.set_overrides = {"command.workers=,[r 0]"};
  // The value reads as a plain string, which command.workers refuses, at once.
  EXPECT_THROW((void)config::parse_job_configs(kConfig, "fuzz.yaml", options), ConfigError);
}

TEST(ConfigFuzzRegressions, AnAliasInsideTheValueItNamesIsAnErrorNotEndlessRecursion) {
  // yaml-cpp builds a node that contains itself, and converting it recursed until the stack overflowed.
  for (const std::string& text : std::vector<std::string>{"vars: &a [*a]\n", kConfig + "tpu: &t {x: [1, *t]}\n"}) {
    const auto errors = config_errors(text);
    ASSERT_FALSE(errors.empty()) << text;
    EXPECT_EQ(errors[0].message, "an alias (*name) inside the value it names would make it contain itself");
  }
}

TEST(ConfigFuzzRegressions, AliasesThatExpandToMillionsOfValuesAreRefused) {
  // Each level repeats the one before ten times: 10^7 values once expanded, from 600 bytes of YAML.
  std::string bomb = "vars:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char level = 'b'; level <= 'g'; ++level) {
    const std::string previous(1, static_cast<char>(level - 1));
    bomb += std::string("  ") + level + ": &" + level + " [";
    for (int i = 0; i < 10; ++i) {
      bomb += (i > 0 ? ", *" : "*") + previous;
    }
    bomb += "]\n";
  }
  const auto errors = config_errors(kConfig + bomb);
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].message, "the document has more than 100000 values once its aliases (*name) are expanded");
  // Aliases that stay small are fine (the unknown section one fills is only a warning).
  const auto small = config::parse_job_configs(kConfig + "vars: &v {a: one}\nzzz: *v\n", "fuzz.yaml", {});
  ASSERT_EQ(small.size(), 1U);
  ASSERT_EQ(small[0].warnings.size(), 1U);
  EXPECT_EQ(small[0].warnings[0].where.key_path, "zzz");
}

// Lines that each repeat the one before ten times, through ${...} references: `prefix` + "a: x" ... "i: ...".
std::string tenfold_references(const std::string& prefix, bool lists) {
  std::string text = prefix + "  a: " + (lists ? "[x, x, x, x, x, x, x, x, x, x]" : "xxxxxxxxxx") + "\n";
  const std::string section = prefix.substr(0, prefix.find(':'));
  for (char level = 'b'; level <= 'i'; ++level) {
    const std::string reference = "${" + section + "." + std::string(1, static_cast<char>(level - 1)) + "}";
    // Text: "${vars.a}${vars.a}..."; lists: ["${extra.a}", "${extra.a}", ...], each item a copy of the list.
    text += std::string("  ") + level + ": " + (lists ? "[" : "\"");
    for (int i = 0; i < 10; ++i) {
      text += lists ? std::string(i > 0 ? ", " : "") + "\"" + reference + "\"" : reference;
    }
    text += std::string(lists ? "]" : "\"") + "\n";
  }
  return text;
}

TEST(ConfigFuzzRegressions, ReferencesThatGrowTheConfigPastAMegabyteAreRefusedNotAnOutOfMemory) {
  // Nine lines of vars, each ten references to the one before, asked for 10^9 bytes of text.
  const std::string message = "resolving references would make the config more than 1 MiB larger";
  for (const bool lists : {false, true}) {
    const auto errors = config_errors(kConfig + tenfold_references(lists ? "extra:\n" : "vars:\n", lists));
    EXPECT_EQ(std::count_if(errors.begin(), errors.end(), [&](const Diagnostic& d) { return d.message == message; }), 1)
        << (lists ? "lists" : "text");
  }
  // A few references that copy text are fine.
  EXPECT_EQ(
      config::parse_job_configs(kConfig + "vars:\n  a: abc\n  b: ${vars.a}${vars.a}\n", "ok.yaml").front().vars.at("b"),
      "abcabc");
}

// A TPU client whose server gives these answers in turn, then 404s.
class ScriptedServer {
public:
  explicit ScriptedServer(std::vector<cloud::HttpResponse> answers) : answers_(std::move(answers)) {}

  cloud::TpuClient client() {
    cloud::TpuClientOptions options;
    options.endpoint = "http://127.0.0.1:1/v2/";
    options.sleep = [](std::chrono::milliseconds) {};
    options.jitter = [] { return 0.5; };
    options.transport = [this](const cloud::HttpRequest&) {
      cloud::HttpResponse response;
      response.status = 404;
      if (next_ < answers_.size()) {
        response = answers_[next_];
      }
      ++next_;
      return response;
    };
    return cloud::TpuClient(std::make_shared<cloud::CachedTokenSource>(cloud::make_static_token_source("t", "test")),
                            options);
  }

private:
  std::vector<cloud::HttpResponse> answers_;
  std::size_t next_ = 0;
};

cloud::HttpResponse answer(int status, std::string body) {
  cloud::HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

// The message of the ApiError `call` throws; fails the test when it throws nothing or something else.
template <typename Call> std::string api_error_of(Call call) {
  try {
    call();
  } catch (const cloud::ApiError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ApiError";
  return {};
}

TEST(CloudFuzzRegressions, AnAnswerThatIsJsonButNotAnObjectIsAnApiErrorNotATypeError) {
  // A list answer that was a JSON string made nlohmann::json::value() throw type_error out of the client.
  ScriptedServer server({answer(200, R"(":[{")")});
  auto client = server.client();
  EXPECT_EQ(api_error_of([&] {
              (void)client.list_queued_resources({"p", "us-central2-b"});
            }),
            "TPU API: queuedResources.list projects/p/locations/us-central2-b: the answer is not a JSON object");
  ScriptedServer arrays({answer(200, "[1, 2]")});
  auto other = arrays.client();
  EXPECT_NE(api_error_of([&] { (void)other.get_node({"p", "z"}, "n"); }).find("not a JSON object"), std::string::npos);
}

TEST(CloudFuzzRegressions, ANextPageTokenThatIsNotAStringIsAnApiErrorNotATypeError) {
  ScriptedServer server({answer(200, R"({"nodes": [{"name": "a"}], "nextPageToken": 7})")});
  auto client = server.client();
  EXPECT_EQ(api_error_of([&] {
              (void)client.list_nodes({"p", "us-central2-b"});
            }),
            "TPU API: nodes.list projects/p/locations/us-central2-b: nextPageToken is not a string");
}

TEST(CloudFuzzRegressions, TokenAnswerWithAHugeOrNegativeExpiresInStaysInTheClocksRange) {
  // expires_in 1e300 was converted to an integer (undefined behaviour) and added to the clock (overflow).
  const auto now = std::chrono::system_clock::now();
  for (const std::string& value :
       std::vector<std::string>{"1e300", "9223372036854775807", "-1e300", "-5", "18446744073709551615"}) {
    const auto token =
        cloud::parse_token_answer(answer(200, R"({"access_token": "ya29.x", "expires_in": )" + value + "}"), "test");
    EXPECT_EQ(token.value, "ya29.x");
    EXPECT_GE(token.expiry, now) << value;
    EXPECT_LE(token.expiry, std::chrono::system_clock::now() + std::chrono::hours(24)) << value;
  }
  const auto hour = cloud::parse_token_answer(answer(200, R"({"access_token": "a", "expires_in": 3599})"), "test");
  EXPECT_GT(hour.expiry, now + std::chrono::seconds(3500));
}

TEST(CloudFuzzRegressions, TokenErrorWhoseMessageIsNotAStringIsAnErrorNotATypeError) {
  try {
    (void)cloud::parse_token_answer(answer(500, R"({"error": {"code": 500, "message": 42}})"), "the metadata server");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot get an access token from the metadata server: HTTP 500");
  }
}

TEST(CloudFuzzRegressions, ADeeplyNestedAnswerIsAnApiErrorNotAStackOverflow) {
  // nlohmann::json parses any depth without recursion, but copying, comparing and dumping the value recurse: an
  // answer of 200,000 nested arrays overflowed the stack when parse_queued_resource kept it as `raw`.
  const std::string deep = R"({"name": "qr", "x": )" + std::string(200'000, '[') + std::string(200'000, ']') + "}";
  ScriptedServer server({answer(200, deep)});
  auto client = server.client();
  EXPECT_NE(api_error_of([&] {
              (void)client.get_queued_resource({"p", "z"}, "qr");
            }).find("not a JSON object"),
            std::string::npos);
  EXPECT_THROW((void)cloud::parse_token_answer(answer(200, deep), "test"), Error);

  EXPECT_EQ(util::json_nesting_depth(R"({"a": [1, {"b": "[[[{{{"}], "c": "\"]"})", 100), 3U);
  EXPECT_EQ(util::json_nesting_depth(std::string(1000, '['), 128), 129U);
  EXPECT_TRUE(util::parse_json_bounded(std::string(129, '[') + std::string(129, ']')).is_discarded());
  EXPECT_EQ(util::parse_json_bounded(std::string(128, '[') + std::string(128, ']')).size(), 1U);
}

} // namespace fuzz_regressions_test
} // namespace jobman
