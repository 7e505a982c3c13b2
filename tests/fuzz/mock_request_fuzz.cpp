// libFuzzer target: the mock cloud's handling of requests, in-process (no HTTP): the TPU API methods of World with
// their JSON bodies, ids and page tokens, the `fields` selection, the world description (parse_mock_config), and
// the token endpoint's JWT-bearer grant (base64url, JWT parsing).
// Input: requests separated by lines "%%"; each is a line "VERB ARG..." (words split at spaces) and a body
// (ZONE may be PROJECT/ZONE; the project is "p" otherwise):
//   create ZONE ID REQUEST_ID + QueuedResource JSON   get|reset|getnode|deletenode|preempt|faulty ZONE ID
//   delete ZONE ID FORCE REQUEST_ID   list|listnodes|listops ZONE PAGE_SIZE PAGE_TOKEN   getop ZONE OPERATION_ID
//   capacity ZONE GENERATION TIER CHIPS QUOTA   tick MILLISECONDS   fields FIELDS (on the last reply's body)
//   config + YAML (a new world)   token + form "grant_type=...&assertion=..."   jwt + TOKEN   b64 + TEXT
// A Reply with an error status is the mock's answer to a bad request; jobman::Error (ConfigError) is the answer to
// a bad world description. Any other exception (the server would answer 500) or crash is a bug.
#include "jobman/util/base64url.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/json_text.hpp"
#include "jobman/util/strings.hpp"
#include "mock_cloud/auth.hpp"
#include "mock_cloud/config.hpp"
#include "mock_cloud/jwt.hpp"
#include "mock_cloud/partial_response.hpp"
#include "mock_cloud/world.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

using jobman::mock::Reply;
using jobman::mock::World;

constexpr std::int64_t kStart = 1'800'000'000'000;
constexpr double kTimeScale = 60;

const jobman::mock::MockConfig& default_config() {
  static const auto config = jobman::mock::load_mock_config(JOBMAN_MOCK_CONFIG_FILE);
  return config;
}

// A token authority that trusts one generated service account, as the mock's token endpoint does.
jobman::mock::TokenAuthority& authority() {
  static auto* instance = [] {
    auto* made = new jobman::mock::TokenAuthority();
    jobman::mock::ServiceAccountOptions account;
    account.token_uri = "http://127.0.0.1:8471/token";
    made->trust_key(jobman::mock::generate_service_account_key(account));
    return made;
  }();
  return *instance;
}

std::vector<std::string> words_of(std::string_view line) {
  std::vector<std::string> words;
  while (!line.empty()) {
    const auto end = line.find(' ');
    words.emplace_back(line.substr(0, end));
    line.remove_prefix(end == std::string_view::npos ? line.size() : end + 1);
  }
  return words;
}

int number(const std::string& text, int fallback) {
  const auto value = jobman::util::parse_int(text);
  return value && *value >= -1'000'000'000 && *value <= 1'000'000'000 ? static_cast<int>(*value) : fallback;
}

std::map<std::string, std::string> form_of(std::string_view body) {
  std::map<std::string, std::string> form;
  while (!body.empty()) {
    const auto end = body.find('&');
    const std::string_view pair = body.substr(0, end);
    const auto equals = pair.find('=');
    form[std::string(pair.substr(0, equals))] =
        equals == std::string_view::npos ? std::string() : std::string(pair.substr(equals + 1));
    body.remove_prefix(end == std::string_view::npos ? body.size() : end + 1);
  }
  return form;
}

struct Session {
  std::unique_ptr<World> world = std::make_unique<World>(default_config(), kTimeScale, 1);
  std::int64_t now = kStart;
  Reply last;

  void handle(std::string_view request) {
    const auto end = request.find('\n');
    const auto words = words_of(request.substr(0, end));
    const std::string body(end == std::string_view::npos ? std::string_view() : request.substr(end + 1));
    const auto arg = [&](std::size_t i) { return i < words.size() ? words[i] : std::string(); };
    const std::string verb = arg(0);
    // The location word is ZONE or PROJECT/ZONE.
    std::string zone = words.size() > 1 ? arg(1) : std::string("us-central2-b");
    std::string project = "p";
    if (const auto slash = zone.find('/'); slash != std::string::npos) {
      project = zone.substr(0, slash);
      zone.erase(0, slash + 1);
    }
    now += 1000;
    if (verb == "create") {
      const auto json = jobman::util::parse_json_bounded(body); // As the route reads it.
      if (!json.is_discarded()) {
        last = world->create_queued_resource(project, zone, arg(2), arg(3), json, now);
      }
    } else if (verb == "get") {
      last = world->get_queued_resource(project, zone, arg(2), now);
    } else if (verb == "list") {
      last = world->list_queued_resources(project, zone, number(arg(2), 0), arg(3), now);
    } else if (verb == "delete") {
      last = world->delete_queued_resource(project, zone, arg(2), arg(3) == "true", arg(4), now);
    } else if (verb == "reset") {
      last = world->reset_queued_resource(project, zone, arg(2), now);
    } else if (verb == "getnode") {
      last = world->get_node(project, zone, arg(2), now);
    } else if (verb == "listnodes") {
      last = world->list_nodes(project, zone, number(arg(2), 0), arg(3), now);
    } else if (verb == "deletenode") {
      last = world->delete_node(project, zone, arg(2), now);
    } else if (verb == "getop") {
      last = world->get_operation(project, zone, arg(2), now);
    } else if (verb == "listops") {
      last = world->list_operations(project, zone, number(arg(2), 0), arg(3), now);
    } else if (verb == "preempt") {
      last = world->preempt_node(project, zone, arg(2), now);
    } else if (verb == "faulty") {
      last = world->mark_node_faulty(project, zone, arg(2), now);
    } else if (verb == "capacity") {
      const auto tier = jobman::mock::tier_named(arg(3)).value_or(jobman::mock::Tier::on_demand);
      std::optional<int> quota;
      if (words.size() > 5) {
        quota = number(arg(5), 0);
      }
      last = world->set_capacity(zone, arg(2), tier, number(arg(4), 0), quota, now);
    } else if (verb == "tick") {
      now += number(zone, 0) < 0 ? 0 : number(zone, 0);
      world->tick(now);
      (void)world->metrics(now);
    } else if (verb == "fields") {
      if (last.ok()) {
        (void)jobman::mock::select_fields(last.body, body);
      }
    } else if (verb == "config") {
      try {
        world = std::make_unique<World>(jobman::mock::parse_mock_config(body, "fuzz.yaml"), kTimeScale, 1);
      } catch (const jobman::Error&) {
        // ConfigError: the mock refuses the world description.
      }
    } else if (verb == "token") {
      auto& tokens = authority();
      (void)tokens.exchange(form_of(body), "http://127.0.0.1:8471/token", tokens.now());
    } else if (verb == "jwt") {
      (void)jobman::mock::parse_jwt(body);
    } else if (verb == "b64") {
      (void)jobman::util::base64url_decode(body);
    }
    (void)last.body.dump();
  }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  Session session;
  constexpr std::string_view separator = "\n%%\n";
  int requests = 0;
  while (!input.empty() && requests++ < 64) {
    const auto end = input.find(separator);
    session.handle(input.substr(0, end));
    input.remove_prefix(end == std::string_view::npos ? input.size() : end + separator.size());
  }
  session.world->tick(session.now + 86'400'000);
  (void)session.world->snapshot();
  return 0;
}
