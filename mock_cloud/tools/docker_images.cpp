// The mock's docker images: references taken apart as docker takes them apart, and one record per image pulled.
#include "docker.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <system_error>

namespace jobman::mock::tools::docker {

namespace {

// Whether `component` is a valid path component of a repository name.
bool valid_component(const std::string& component) {
  return !component.empty() &&
         component.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-") == std::string::npos &&
         std::isalnum(static_cast<unsigned char>(component.front())) != 0 &&
         std::isalnum(static_cast<unsigned char>(component.back())) != 0;
}

} // namespace

std::optional<ImageRef> parse_image_ref(const std::string& text) {
  ImageRef ref;
  std::string name = text;
  if (const auto at = name.find('@'); at != std::string::npos) {
    ref.digest = name.substr(at + 1);
    name.resize(at);
    if (!ref.digest.starts_with("sha256:") || ref.digest.size() != 71 || !is_lower_hex(ref.digest.substr(7))) {
      return std::nullopt;
    }
  }
  const auto slash = name.rfind('/');
  const auto colon = name.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    ref.tag = name.substr(colon + 1);
    name.resize(colon);
    if (ref.tag.empty() || ref.tag.size() > 128 ||
        ref.tag.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
            std::string::npos ||
        ref.tag.front() == '.' || ref.tag.front() == '-') {
      return std::nullopt;
    }
  }
  ref.tag_given = !ref.tag.empty() || !ref.digest.empty();
  if (!ref.digest.empty()) {
    ref.tag.clear();
  } else if (ref.tag.empty()) {
    ref.tag = "latest";
  }
  auto parts = split(name, '/');
  ref.registry = "docker.io";
  if (parts.size() > 1 && (parts[0].find_first_of(".:") != std::string::npos || parts[0] == "localhost")) {
    ref.registry = parts[0] == "index.docker.io" ? "docker.io" : parts[0];
    parts.erase(parts.begin());
  }
  if (!std::all_of(parts.begin(), parts.end(), valid_component)) {
    return std::nullopt;
  }
  ref.path = join(parts, "/");
  if (ref.registry == "docker.io" && parts.size() == 1) {
    ref.path = "library/" + ref.path;
  }
  return ref;
}

namespace {

// `text` made safe as a file name: every character but [a-z0-9._-] as %XX.
std::string escape_file_name(const std::string& text) {
  std::string name;
  for (const unsigned char c : text) {
    if ((std::islower(c) != 0 || std::isdigit(c) != 0 || c == '.' || c == '_' || c == '-') &&
        !(name.empty() && c == '.')) {
      name += static_cast<char>(c);
    } else {
      std::array<char, 4> hex{};
      std::snprintf(hex.data(), hex.size(), "%%%02X", c);
      name += hex.data();
    }
  }
  return name;
}

} // namespace

fs::path image_file(const ImageRef& ref) {
  return images_dir() / (escape_file_name(ref.familiar()) + ".json");
}

std::vector<json> all_images() {
  std::vector<json> images;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(images_dir(), ec)) {
    if (entry.path().extension() == ".json") {
      if (auto image = read_json(entry.path())) {
        images.push_back(std::move(*image));
      }
    }
  }
  std::sort(images.begin(), images.end(), [](const json& a, const json& b) {
    return std::pair(a.value("CreatedUnix", 0LL), a.value("Reference", "")) <
           std::pair(b.value("CreatedUnix", 0LL), b.value("Reference", ""));
  });
  return images;
}

std::optional<json> find_image(const std::string& text) {
  if (const auto ref = parse_image_ref(text)) {
    if (auto image = read_json(image_file(*ref))) {
      return image;
    }
  }
  const std::string id = text.starts_with("sha256:") ? text.substr(7) : text;
  if (id.size() >= 4 && is_lower_hex(id)) {
    for (auto& image : all_images()) {
      if (image.value("Id", "").substr(7).starts_with(id)) {
        return image;
      }
    }
  }
  return std::nullopt;
}

namespace {

// The digest the mock's registry gives `ref`.
std::string registry_digest(const ImageRef& ref) {
  return ref.digest.empty() ? "sha256:" + stable_hex("digest " + ref.familiar()) : ref.digest;
}

} // namespace

void pull(const ImageRef& ref, std::ostream& out) {
  const auto familiar = ref.familiar();
  if (familiar.find("does-not-exist") != std::string::npos) {
    throw Failure("Error response from daemon: pull access denied for " + ref.repository() +
                      ", repository does not exist or may require 'docker login': denied: requested access to the "
                      "resource is denied",
                  1);
  }
  if (!ref.tag_given) {
    out << "Using default tag: latest\n";
  }
  out << (ref.digest.empty() ? ref.tag : ref.digest) << ": Pulling from " << ref.path << "\n";
  const auto file = image_file(ref);
  const bool present = fs::exists(file);
  const auto digest = registry_digest(ref);
  if (!present) {
    for (int layer = 0; layer < 3; ++layer) {
      out << stable_hex(std::to_string(layer) + " layer " + familiar).substr(0, 12) << ": Pull complete\n";
    }
    const auto created = now_seconds();
    json image = {{"Id", "sha256:" + stable_hex("image " + familiar)},
                  {"RepoTags", ref.digest.empty() ? json::array({familiar}) : json::array()},
                  {"RepoDigests", json::array({ref.repository() + "@" + digest})},
                  {"Created", rfc3339(created)},
                  {"CreatedUnix", created},
                  {"Reference", familiar},
                  {"Size", 0}};
    write_atomic(kTool, file, image.dump(4));
  }
  out << "Digest: " << digest << "\n";
  out << "Status: " << (present ? "Image is up to date for " : "Downloaded newer image for ") << familiar << "\n";
  out << ref.canonical() << "\n";
}

ImageRef image_ref_or_fail(const std::string& text, const std::string& prefix, int status) {
  auto ref = parse_image_ref(text);
  if (!ref) {
    throw Failure(prefix + "invalid reference format: " + text, status);
  }
  return *ref;
}

} // namespace jobman::mock::tools::docker
