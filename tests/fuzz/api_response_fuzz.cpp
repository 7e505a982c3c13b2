// libFuzzer target: jobman's reading of TPU API and token-endpoint answers.
// Input: the first byte picks a call; the rest is the answers the server gives, separated by lines "%%". Each
// answer is a status line ("200", "429 Retry-After: 3", or a word for a transport failure) and the body. When the
// answers run out the server says 404. jobman::Error (ApiError among them) is the client's answer to a bad
// server; anything else escaping is a bug.
#include "jobman/cloud/auth.hpp"
#include "jobman/cloud/retry.hpp"
#include "jobman/cloud/tpu_client.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>

namespace {

using jobman::cloud::HttpRequest;
using jobman::cloud::HttpResponse;
using jobman::cloud::TransportFailure;

// One scripted answer from "STATUS[ Retry-After: VALUE]\nBODY".
HttpResponse answer_from(std::string_view chunk) {
  const auto end = chunk.find('\n');
  const std::string_view status_line = chunk.substr(0, end);
  HttpResponse response;
  response.body = std::string(end == std::string_view::npos ? std::string_view() : chunk.substr(end + 1));
  const auto space = status_line.find(' ');
  const std::string_view code = status_line.substr(0, space);
  if (space != std::string_view::npos) {
    constexpr std::string_view header = "Retry-After: ";
    const std::string_view rest = status_line.substr(space + 1);
    if (rest.starts_with(header)) {
      response.headers["retry-after"] = std::string(rest.substr(header.size()));
    }
  }
  if (const auto status = jobman::util::parse_int(code); status && *status >= 100 && *status <= 599) {
    response.status = static_cast<int>(*status);
  } else if (code == "timeout") {
    response.failure = TransportFailure::timed_out;
  } else if (code == "refused") {
    response.failure = TransportFailure::connect_failed;
  } else {
    response.failure = TransportFailure::other;
    response.error = std::string(code);
  }
  return response;
}

std::deque<HttpResponse> answers_from(std::string_view input) {
  std::deque<HttpResponse> answers;
  constexpr std::string_view separator = "\n%%\n";
  while (!input.empty()) {
    const auto end = input.find(separator);
    answers.push_back(answer_from(input.substr(0, end)));
    input.remove_prefix(end == std::string_view::npos ? input.size() : end + separator.size());
  }
  return answers;
}

void exercise(std::uint8_t call, std::string_view input) {
  using namespace jobman::cloud;
  auto answers = std::make_shared<std::deque<HttpResponse>>(answers_from(input));
  TpuClientOptions options;
  options.endpoint = "http://127.0.0.1:1/v2/";
  options.sleep = [](std::chrono::milliseconds) {};
  options.jitter = [] { return 0.5; };
  options.transport = [answers](const HttpRequest&) {
    if (answers->empty()) {
      HttpResponse gone;
      gone.status = 404;
      gone.body = R"({"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}})";
      return gone;
    }
    HttpResponse next = std::move(answers->front());
    answers->pop_front();
    return next;
  };
  auto tokens = std::make_shared<CachedTokenSource>(make_static_token_source("fuzz-token", "the fuzzer"));
  TpuClient client(tokens, options);
  const Location where{"p", "us-central2-b"};
  switch (call % 11) {
  case 0: (void)client.list_queued_resources(where, 10); break;
  case 1: (void)client.list_nodes(where); break;
  case 2: (void)client.get_queued_resource(where, "qr"); break;
  case 3: (void)client.get_node(where, "node"); break;
  case 4: (void)client.create_queued_resource(where, "qr", nlohmann::json::object()); break;
  case 5: (void)client.delete_queued_resource(where, "qr", DeleteMode::force); break;
  case 6: (void)client.delete_node(where, "node"); break;
  case 7: (void)client.wait_operation("projects/p/locations/us-central2-b/operations/op", std::chrono::hours(1)); break;
  case 8: {
    const HttpResponse response = answers->empty() ? HttpResponse{} : answers->front();
    (void)parse_token_answer(response, "the fuzzer");
    break;
  }
  case 9: (void)parse_service_account_key(std::string(input), "key.json"); break;
  default: (void)parse_retry_after(input, 1'800'000'000'000); break;
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  try {
    exercise(data[0], std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  } catch (const jobman::Error&) {
    // ApiError and Error are how the client reports a server it cannot use.
  }
  return 0;
}
