// The JSON API's view of the bucket directories: bucket resources placed by the world config, the first mount or the
// world's first zone, and objects listed from the files, with names in byte order as Cloud Storage lists them.
#include "mock_cloud/cloud_storage.hpp"

#include "jobman/util/base64url.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/bucket_root.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <memory>
#include <openssl/evp.h>
#include <set>
#include <sys/stat.h>
#include <vector>

namespace jobman::mock {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Objects up to this size are listed with their md5Hash; bigger ones without, as Cloud Storage lists a composite
// object: a listing reads no checkpoint whole.
constexpr std::uintmax_t kMaxHashedBytes = std::uintmax_t{1} << 20;
constexpr int kMaxListResults = 1000;

// A file's size and times, as an object's metadata shows them.
struct FileFacts {
  std::uintmax_t size = 0;
  std::int64_t created_ms = 0;  // Its birth time where the filesystem keeps one, else its modification time.
  std::int64_t modified_ms = 0; // Its modification time.
  std::int64_t generation = 0;  // Its modification time in microseconds: a new one for every write.
};

// The facts of `path` without following a link at its end; nullopt when it cannot be read.
std::optional<FileFacts> file_facts(const fs::path& path) {
  struct statx facts {};
  if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_SIZE | STATX_MTIME | STATX_BTIME, &facts) != 0) {
    return std::nullopt;
  }
  const auto ms = [](const struct statx_timestamp& at) { return at.tv_sec * 1000 + at.tv_nsec / 1'000'000; };
  FileFacts out;
  out.size = facts.stx_size;
  out.modified_ms = ms(facts.stx_mtime);
  out.created_ms = (facts.stx_mask & STATX_BTIME) != 0 ? ms(facts.stx_btime) : out.modified_ms;
  out.generation = facts.stx_mtime.tv_sec * 1'000'000 + facts.stx_mtime.tv_nsec / 1000;
  return out;
}

// "2025-01-16T09:30:00.250Z": Cloud Storage's times have milliseconds.
std::string storage_time(std::int64_t epoch_ms) {
  std::string text = util::format_utc(epoch_ms);
  const auto millis = std::to_string(1000 + ((epoch_ms % 1000) + 1000) % 1000).substr(1);
  return text.insert(text.size() - 1, "." + millis);
}

// Standard base64 with padding, the encoding of md5Hash and etag.
std::string padded_base64(std::string_view bytes) {
  std::string text = util::base64url_encode(bytes);
  std::replace(text.begin(), text.end(), '-', '+');
  std::replace(text.begin(), text.end(), '_', '/');
  text.append((4 - text.size() % 4) % 4, '=');
  return text;
}

// The MD5 of the file's bytes, base64; nullopt when it cannot be read.
std::optional<std::string> md5_of_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!in || !context || EVP_DigestInit_ex(context.get(), EVP_md5(), nullptr) != 1) {
    return std::nullopt;
  }
  std::array<char, 65536> chunk{};
  while (in.read(chunk.data(), chunk.size()) || in.gcount() > 0) {
    EVP_DigestUpdate(context.get(), chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (in.bad() || EVP_DigestFinal_ex(context.get(), digest.data(), &length) != 1) {
    return std::nullopt;
  }
  return padded_base64(std::string_view(reinterpret_cast<const char*>(digest.data()), length));
}

// A bucket's location as the JSON API writes it: upper case ("EUROPE-WEST4", "US").
std::string api_location(std::string location) {
  std::transform(location.begin(), location.end(), location.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return location;
}

// An object name as a path segment of a URL: everything but the unreserved characters percent-encoded.
std::string url_segment(std::string_view name) {
  static constexpr std::string_view kHex = "0123456789ABCDEF";
  std::string out;
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out.append({'%', kHex[byte >> 4], kHex[byte & 15]});
    }
  }
  return out;
}

// What gcsfuse uploads a file as, by its extension (Go's mime table, in part).
std::string content_type_of(const std::string& name) {
  static const std::map<std::string, std::string, std::less<>> kTypes = {
      {".csv", "text/csv; charset=utf-8"},   {".html", "text/html; charset=utf-8"}, {".jpg", "image/jpeg"},
      {".json", "application/json"},         {".pdf", "application/pdf"},           {".png", "image/png"},
      {".txt", "text/plain; charset=utf-8"}, {".xml", "text/xml; charset=utf-8"},
  };
  const auto dot = name.rfind('.');
  const auto slash = name.rfind('/');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) {
    if (const auto it = kTypes.find(util::to_lower(name.substr(dot))); it != kTypes.end()) {
      return it->second;
    }
  }
  return "application/octet-stream";
}

// True for a name a file in a bucket can have: no empty, "." or ".." segment, no NUL, UTF-8.
bool names_a_file(std::string_view name) {
  if (name.empty() || name.find('\0') != std::string_view::npos || !world_internal::is_utf8(std::string(name))) {
    return false;
  }
  std::size_t start = 0;
  while (start <= name.size()) {
    const auto end = std::min(name.find('/', start), name.size());
    const auto segment = name.substr(start, end - start);
    if (segment.empty() || segment == "." || segment == "..") {
      return false;
    }
    start = end + 1;
  }
  return true;
}

// The object resource of the file `path`, named `name` in `bucket`.
json object_json(const std::string& bucket, const std::string& name, const fs::path& path, const FileFacts& facts,
                 const std::string& storage_class, const std::string& base_url) {
  const auto generation = std::to_string(facts.generation);
  const auto link = base_url + "/storage/v1/b/" + bucket + "/o/" + url_segment(name);
  json object = {{"kind", "storage#object"},
                 {"id", bucket + "/" + name + "/" + generation},
                 {"selfLink", link},
                 {"name", name},
                 {"bucket", bucket},
                 {"generation", generation},
                 {"metageneration", "1"},
                 {"contentType", content_type_of(name)},
                 {"storageClass", storage_class},
                 {"size", std::to_string(facts.size)},
                 {"timeCreated", storage_time(facts.created_ms)},
                 {"updated", storage_time(facts.modified_ms)},
                 {"timeStorageClassUpdated", storage_time(facts.created_ms)},
                 {"etag", padded_base64(generation + "/1")}};
  if (facts.size <= kMaxHashedBytes) {
    if (auto md5 = md5_of_file(path)) {
      object["md5Hash"] = *md5;
    }
  }
  return object;
}

// A file of a bucket and the object name it has.
struct NamedFile {
  std::string name;
  fs::path path;
};

// Every regular file of the bucket directory `dir` whose object name starts with `prefix`, in byte order of the
// names. Links are not followed: a listing stays in the bucket. Only the directory the prefix ends in is walked.
std::vector<NamedFile> files_under(const fs::path& dir, const std::string& prefix) {
  const auto slash = prefix.rfind('/');
  const std::string start = slash == std::string::npos ? std::string() : prefix.substr(0, slash + 1);
  std::vector<NamedFile> files;
  std::error_code ec;
  if (!start.empty() && !names_a_file(start.substr(0, start.size() - 1))) {
    return files;
  }
  for (fs::recursive_directory_iterator it(dir / start, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it->symlink_status(ec).type() != fs::file_type::regular) {
      continue;
    }
    auto name = start + it->path().lexically_relative(dir / start).generic_string();
    if (name.starts_with(prefix) && world_internal::is_utf8(name)) {
      files.push_back({std::move(name), it->path()});
    }
  }
  // std::string compares as unsigned bytes (char_traits<char>), which is Cloud Storage's order.
  std::sort(files.begin(), files.end(), [](const NamedFile& a, const NamedFile& b) { return a.name < b.name; });
  return files;
}

} // namespace

std::string region_of_zone(std::string_view zone) {
  const auto dash = zone.rfind('-');
  return std::string(dash == std::string_view::npos ? zone : zone.substr(0, dash));
}

Reply storage_error(int http_status, const std::string& message) {
  static const std::map<int, std::string> kReasons = {
      {400, "invalid"}, {401, "required"}, {403, "forbidden"}, {404, "notFound"}, {503, "backendError"}};
  Reply reply = error_reply(http_status, message);
  const auto reason = kReasons.find(http_status);
  reply.body["error"]["errors"] = json::array(
      {{{"message", message}, {"domain", "global"}, {"reason", reason == kReasons.end() ? "error" : reason->second}}});
  return reply;
}

BucketDirectories::BucketDirectories(Options options) : options_(std::move(options)) {}

std::optional<BucketDirectories::Placement> BucketDirectories::placement(const std::string& bucket) const {
  if (!valid_bucket_name(bucket)) {
    return std::nullopt;
  }
  std::error_code ec;
  const bool has_dir = fs::is_directory(fs::symlink_status(options_.root / bucket, ec));
  const auto placed = options_.placed.find(bucket);
  if (!has_dir && placed == options_.placed.end()) {
    return std::nullopt;
  }
  Placement out;
  std::ifstream record(first_mount_file(options_.root, bucket));
  std::getline(record, out.mount_zone);
  if (placed != options_.placed.end()) {
    out.config = placed->second;
    out.placed_by = "config";
  } else {
    out.config.location = region_of_zone(out.mount_zone.empty() ? options_.default_zone : out.mount_zone);
    out.placed_by = out.mount_zone.empty() ? "first zone" : "first mount";
  }
  return out;
}

Reply BucketDirectories::get_bucket(const std::string& bucket, const std::string& base_url) const {
  if (!valid_bucket_name(bucket)) {
    return storage_error(400, "Invalid bucket name: '" + bucket + "'");
  }
  const auto place = placement(bucket);
  if (!place) {
    return storage_error(404, "The specified bucket does not exist.");
  }
  const auto facts = file_facts(options_.root / bucket);
  const auto created = facts ? facts->created_ms : options_.started_ms;
  return {200,
          {{"kind", "storage#bucket"},
           {"id", bucket},
           {"selfLink", base_url + "/storage/v1/b/" + bucket},
           {"projectNumber", std::to_string(options_.project_number)},
           {"name", bucket},
           {"timeCreated", storage_time(created)},
           {"updated", storage_time(created)},
           {"metageneration", "1"},
           {"location", api_location(place->config.location)},
           {"locationType", std::string(bucket_location_type_name(place->config.type))},
           {"storageClass", place->config.storage_class},
           {"etag", "CAE="}}};
}

Reply BucketDirectories::list_objects(const std::string& bucket, const ObjectListQuery& query,
                                      const std::string& base_url) const {
  if (!valid_bucket_name(bucket)) {
    return storage_error(400, "Invalid bucket name: '" + bucket + "'");
  }
  const auto place = placement(bucket);
  if (!place) {
    return storage_error(404, "The specified bucket does not exist.");
  }
  if (query.max_results < 1 || query.max_results > kMaxListResults) {
    return storage_error(400, "Invalid value for maxResults: it must be a whole number from 1 to 1000");
  }
  std::string after;
  if (!query.page_token.empty()) {
    auto decoded = util::base64url_decode(query.page_token);
    if (!decoded) {
      return storage_error(400, "Invalid page token: '" + query.page_token + "'");
    }
    after = std::move(*decoded);
  }
  json items = json::array();
  json prefixes = json::array();
  std::string last_key;
  int entries = 0;
  bool more = false;
  for (const auto& file : files_under(options_.root / bucket, query.prefix)) {
    if (file.name < query.start_offset || (!query.end_offset.empty() && file.name >= query.end_offset)) {
      continue;
    }
    // The entry this name makes: itself, or the prefix up to the first delimiter after the query's prefix.
    const auto cut = query.delimiter.empty() ? std::string::npos : file.name.find(query.delimiter, query.prefix.size());
    const bool collapsed = cut != std::string::npos;
    const auto key = collapsed ? file.name.substr(0, cut + query.delimiter.size()) : file.name;
    if ((!after.empty() && key <= after) || (collapsed && entries > 0 && key == last_key)) {
      continue;
    }
    const auto facts = file_facts(file.path);
    if (!facts) {
      continue; // Gone since it was listed.
    }
    if (entries == query.max_results) {
      more = true;
      break;
    }
    if (collapsed) {
      prefixes.push_back(key);
    }
    if (!collapsed || (query.include_trailing_delimiter && key == file.name)) {
      items.push_back(object_json(bucket, file.name, file.path, *facts, place->config.storage_class, base_url));
    }
    last_key = key;
    ++entries;
  }
  json page = {{"kind", "storage#objects"}};
  if (!items.empty()) {
    page["items"] = std::move(items);
  }
  if (!prefixes.empty()) {
    page["prefixes"] = std::move(prefixes);
  }
  if (more) {
    page["nextPageToken"] = util::base64url_encode(last_key);
  }
  return {200, page};
}

std::optional<fs::path> BucketDirectories::object_file(const std::string& bucket, const std::string& object) const {
  if (!valid_bucket_name(bucket) || !names_a_file(object)) {
    return std::nullopt;
  }
  // Every directory on the way must be one, not a link: an object is a file in the bucket.
  std::error_code ec;
  fs::path path = options_.root / bucket;
  for (const auto& segment : fs::path(object)) {
    if (!fs::is_directory(fs::symlink_status(path, ec))) {
      return std::nullopt;
    }
    path /= segment;
  }
  if (!fs::is_regular_file(fs::symlink_status(path, ec))) {
    return std::nullopt;
  }
  return path;
}

Reply BucketDirectories::get_object(const std::string& bucket, const std::string& object,
                                    const std::string& base_url) const {
  if (!valid_bucket_name(bucket)) {
    return storage_error(400, "Invalid bucket name: '" + bucket + "'");
  }
  const auto place = placement(bucket);
  if (!place) {
    return storage_error(404, "The specified bucket does not exist.");
  }
  const auto path = object_file(bucket, object);
  const auto facts = path ? file_facts(*path) : std::nullopt;
  if (!facts) {
    return storage_error(404, "No such object: " + bucket + "/" + object);
  }
  return {200, object_json(bucket, object, *path, *facts, place->config.storage_class, base_url)};
}

json BucketDirectories::locations() const {
  std::set<std::string> names;
  for (const auto& [name, config] : options_.placed) {
    names.insert(name);
  }
  std::error_code ec;
  for (fs::directory_iterator it(options_.root, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (valid_bucket_name(name) && fs::is_directory(it->symlink_status(ec))) {
      names.insert(name);
    }
  }
  json buckets = json::array();
  for (const auto& name : names) {
    if (const auto place = placement(name)) {
      json bucket = {{"name", name},
                     {"location", api_location(place->config.location)},
                     {"locationType", std::string(bucket_location_type_name(place->config.type))},
                     {"storageClass", place->config.storage_class},
                     {"placedBy", place->placed_by}};
      if (!place->mount_zone.empty()) {
        bucket["firstMountZone"] = place->mount_zone;
      }
      buckets.push_back(std::move(bucket));
    }
  }
  return {{"buckets", std::move(buckets)}};
}

} // namespace jobman::mock
