#include "jobman/core/gcloud_setup.hpp"

#include "jobman/util/error.hpp"
#include "jobman/util/process.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <set>
#include <sys/file.h>
#include <unistd.h>

namespace jobman::core {

namespace fs = std::filesystem;

namespace {

// An open file with an exclusive flock on it, both released on destruction.
class LockedFile {
public:
  LockedFile(const fs::path& path, int flags)
      : path_(path), fd_(::open(path.c_str(), flags | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) {
      const int error = errno;
      if (fd_ >= 0) {
        ::close(fd_);
      }
      throw Error("cannot lock " + path.string() + ": " + std::strerror(error));
    }
  }
  ~LockedFile() { ::close(fd_); }
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;

  // Appends `text` whole; throws jobman::Error on a short write.
  void append(const std::string& text) const {
    std::size_t done = 0;
    while (done < text.size()) {
      const auto wrote = ::write(fd_, text.data() + done, text.size() - done);
      if (wrote < 0 && errno == EINTR) {
        continue;
      }
      if (wrote <= 0) {
        throw Error("cannot write " + path_.string() + ": " + std::strerror(errno));
      }
      done += static_cast<std::size_t>(wrote);
    }
  }

private:
  fs::path path_;
  int fd_;
};

// The file's text, or "" when it cannot be read.
std::string text_or_empty(const fs::path& path) {
  try {
    return util::read_file(path);
  } catch (const std::exception&) {
    return {};
  }
}

} // namespace

std::map<std::string, std::string> mock_gcloud_environment(const std::string& url, const std::string& project,
                                                           const fs::path& config_dir) {
  return {{"CLOUDSDK_CONFIG", config_dir.string()},
          {"CLOUDSDK_CORE_PROJECT", project},
          {"CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU", url + "/"},
          {"CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", url + "/compute/v1/"},
          {"CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN", url + "/oslogin/"},
          // The key's token_uri names the port of the mock that wrote it; a mock started again listens elsewhere.
          {"CLOUDSDK_AUTH_TOKEN_HOST", url + "/token"},
          {"CLOUDSDK_CORE_DISABLE_PROMPTS", "1"},
          {"CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true"},
          {"CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true"},
          {"CLOUDSDK_CORE_CHECK_GCE_METADATA", "false"}};
}

void activate_service_account(const std::string& gcloud, const std::map<std::string, std::string>& environment,
                              const fs::path& config_dir, const fs::path& key_file) {
  const auto key = nlohmann::json::parse(text_or_empty(key_file), nullptr, false);
  if (!key.is_object() || !key.contains("private_key_id") || !key["private_key_id"].is_string() ||
      !key.contains("client_email") || !key["client_email"].is_string()) {
    throw Error("cannot log gcloud in to the mock cloud: " + key_file.string() +
                " is missing or is not a service-account key file (client_email, private_key_id)");
  }
  const auto key_id = key["private_key_id"].get<std::string>();
  const auto marker = config_dir / "jobman-activated-key";
  const auto activated = [&marker, &key_id] { return util::trim(text_or_empty(marker)) == key_id; };
  if (activated()) {
    return;
  }
  util::ensure_directory(config_dir, 0700);
  const LockedFile lock(config_dir / "jobman-activate.lock", O_RDWR);
  if (activated()) {
    return; // Another process logged it in while this one waited.
  }
  const auto log = config_dir / "jobman-activate.log";
  const int status = util::wait_exit(
      util::ProcessBuilder({gcloud, "auth", "activate-service-account", "--key-file=" + key_file.string(), "--quiet"})
          .env(environment)
          .input(util::Stream::null())
          .output(util::Stream::file(log, util::FileMode::truncate))
          .error(util::Stream::output())
          .spawn()
          .pid);
  if (status != 0) {
    throw Error("gcloud could not log in to the mock cloud with " + key_file.string() + " (`" + gcloud +
                " auth activate-service-account` exited " + std::to_string(status) +
                "): " + std::string(util::trim(text_or_empty(log))));
  }
  util::write_file_atomic(marker, key_id + "\n", 0600);
}

namespace {

// `alias` ("tpu.NODE_ID-WORKER") as gcloud files a host's key under it: with the key's last six characters.
std::string with_key_suffix(std::string alias, const std::string& host_key) {
  if (!host_key.empty()) {
    alias += "-" + host_key.substr(host_key.size() < 6 ? 0 : host_key.size() - 6);
  }
  return alias;
}

} // namespace

std::string gcloud_host_key_alias(const std::string& node_id, int worker, const std::string& host_key) {
  return with_key_suffix("tpu." + node_id + "-" + std::to_string(worker), host_key);
}

fs::path gcloud_known_hosts_file(const fs::path& home) {
  return home / ".ssh" / "google_compute_known_hosts";
}

bool add_gcloud_known_hosts(const SliceHosts& hosts, const fs::path& home) {
  if (!hosts.complete() || hosts.node_id.empty()) {
    return false;
  }
  const auto file = gcloud_known_hosts_file(home);
  util::ensure_directory(file.parent_path(), 0700);
  const LockedFile locked(file, O_RDWR | O_APPEND);
  const auto text = text_or_empty(file);
  const auto lines = util::split(text, '\n');
  const std::set<std::string> present(lines.begin(), lines.end());
  // A last line without its newline (a file someone edited) is ended first.
  std::string missing = !text.empty() && !text.ends_with('\n') ? "\n" : "";
  for (std::size_t w = 0; w < hosts.host_keys.size(); ++w) {
    const auto& key = hosts.host_keys[w];
    // Each host's alias names its own node's id and its index there (a multislice job's hosts span several nodes).
    const auto& alias = w < hosts.hosts.size() ? hosts.hosts[w].host_key_alias : std::string();
    const auto line =
        (alias.empty() ? gcloud_host_key_alias(hosts.node_id, static_cast<int>(w), key) : with_key_suffix(alias, key)) +
        " " + key;
    if (!present.contains(line)) {
      missing += line + "\n";
    }
  }
  if (missing.size() > 1) {
    locked.append(missing);
  }
  return true;
}

} // namespace jobman::core
