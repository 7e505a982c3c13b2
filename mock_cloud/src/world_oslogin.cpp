// OS Login: users.getLoginProfile and users.importSshPublicKey, what gcloud calls before it connects to a VM whose
// metadata has enable-oslogin TRUE.
#include "jobman/util/strings.hpp"
#include "mock_cloud/world.hpp"
#include "world_internal.hpp"

#include <cctype>
#include <memory>

namespace jobman::mock {

using nlohmann::json;
using world_internal::is_utf8;
using world_internal::kOsLoginRecordPrefix;
using world_internal::stable_hash;

namespace {

// Where the POSIX uids and gids OS Login hands out begin.
constexpr std::uint64_t kFirstUid = 1'000'000'000;

// A google.rpc Status reply with OS Login's wording.
Reply oslogin_invalid(const std::string& message) {
  return error_reply(400, message);
}

// The hex SHA-256 of a key's type and data (its comment left out): the key's fingerprint in the profile.
std::string key_fingerprint(const std::string& type, const std::string& data) {
  static constexpr std::string_view kDigits = "0123456789abcdef";
  std::string key = type;
  key.append(" ").append(data);
  std::string out;
  for (const char byte : world_internal::sha256(key)) {
    out += kDigits[static_cast<unsigned char>(byte) >> 4U];
    out += kDigits[static_cast<unsigned char>(byte) & 15U];
  }
  return out;
}

// A user in users/{user}: an email.
bool valid_user(const std::string& user) {
  const auto at = user.find('@');
  return is_utf8(user) && at != std::string::npos && at > 0 && at + 1 < user.size() &&
         user.find('/') == std::string::npos;
}

} // namespace

std::string world_internal::oslogin_username(const std::string& email) {
  if (email.ends_with(".gserviceaccount.com")) {
    return "sa_" +
           std::to_string(100'000'000'000'000'000ULL + stable_hash("oslogin " + email) % 900'000'000'000'000'000ULL);
  }
  std::string out;
  for (const char c : email) {
    out += std::isalnum(static_cast<unsigned char>(c)) != 0
               ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
               : '_';
  }
  return out.substr(0, 32);
}

json World::login_profile_json(const OsLoginUser& user, const std::string& project_id, std::int64_t now) {
  json out = {{"name", user.email}};
  const auto username = world_internal::oslogin_username(user.email);
  const auto uid = std::to_string(kFirstUid + stable_hash("uid " + user.email) % 1'000'000'000ULL);
  json accounts = json::array();
  for (const auto& project : user.projects) {
    if (!project_id.empty() && project != project_id) {
      continue;
    }
    accounts.push_back({{"primary", true},
                        {"username", username},
                        {"uid", uid},
                        {"gid", uid},
                        {"homeDirectory", "/home/" + username},
                        {"operatingSystemType", "LINUX"},
                        {"accountId", project},
                        {"name", "users/" + user.email + "/projects/" + project}});
  }
  if (!accounts.empty()) {
    out["posixAccounts"] = accounts;
  }
  json keys = json::object();
  for (const auto& [print, key] : user.keys) {
    const auto& [text, expires_usec] = key;
    if (expires_usec != 0 && expires_usec <= now * 1000) {
      continue; // Expired keys are not in the profile.
    }
    json entry = {{"key", text}, {"fingerprint", print}, {"name", "users/" + user.email + "/sshPublicKeys/" + print}};
    if (expires_usec != 0) {
      entry["expirationTimeUsec"] = std::to_string(expires_usec);
    }
    keys[print] = entry;
  }
  if (!keys.empty()) {
    out["sshPublicKeys"] = keys;
  }
  return out;
}

Reply World::get_login_profile(const std::string& user, const std::string& project_id, std::int64_t now_ms) {
  const auto lock = settle_at(now_ms);
  if (!valid_user(user)) {
    return oslogin_invalid("Invalid user '" + user + "': users/{user} names a user by email");
  }
  const auto it = oslogin_users_.find(std::string(kOsLoginRecordPrefix) + user);
  if (it == oslogin_users_.end()) {
    return {200, {{"name", user}}}; // A user who never imported a key has an empty profile.
  }
  return {200, login_profile_json(*it->second, project_id, now_ms)};
}

Reply World::import_ssh_public_key(const std::string& user, const std::string& project_id, const json& key,
                                   std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    if (!valid_user(user)) {
      return oslogin_invalid("Invalid user '" + user + "': users/{user} names a user by email");
    }
    if (!is_utf8(project_id)) {
      return oslogin_invalid("Invalid projectId: not UTF-8 text");
    }
    if (!key.is_object() || !key.contains("key") || !key["key"].is_string()) {
      return oslogin_invalid("The request body must be an SshPublicKey with a key");
    }
    // As a key file holds it, often with its line's end: the profile keeps the key without surrounding space.
    const std::string text(util::trim(key["key"].get<std::string>()));
    const auto fields = util::split(text, ' ');
    const bool known_type = !fields.empty() && (fields[0].starts_with("ssh-") || fields[0].starts_with("ecdsa-") ||
                                                fields[0].starts_with("sk-"));
    if (fields.size() < 2 || !known_type || fields[1].empty()) {
      return oslogin_invalid("Invalid SSH public key: expected 'TYPE BASE64 [COMMENT]' in OpenSSH's format");
    }
    std::int64_t expires_usec = 0;
    if (key.contains("expirationTimeUsec")) {
      const auto& value = key["expirationTimeUsec"];
      const auto parsed = value.is_number_integer() ? std::optional<long long>(value.get<long long>())
                          : value.is_string()       ? util::parse_int(value.get<std::string>())
                                                    : std::nullopt;
      if (!parsed || *parsed < 0) {
        return oslogin_invalid("Invalid expirationTimeUsec: a whole number of microseconds since the epoch");
      }
      expires_usec = *parsed;
    }
    const auto record = std::string(kOsLoginRecordPrefix) + user;
    auto& entry = oslogin_users_[record];
    if (!entry) {
      entry = std::make_unique<OsLoginUser>();
      entry->email = user;
    }
    entry->keys[key_fingerprint(fields[0], fields[1])] = {text, expires_usec};
    if (!project_id.empty()) {
      entry->projects.insert(project_id);
    }
    touch_locked(record);
    if (!project_id.empty()) {
      // The project's hosts that go by OS Login take the key at once, as the guest agent asks OS Login at each login.
      common_metadata_changed_locked(project_id);
    }
    return Reply{200, {{"loginProfile", login_profile_json(*entry, project_id, now_ms)}}};
  });
}

} // namespace jobman::mock
