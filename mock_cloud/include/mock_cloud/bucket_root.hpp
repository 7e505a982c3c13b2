// The mock's Cloud Storage on disk, as its gcsfuse (on the worker hosts) and its JSON API (in the server) share it:
// the bucket root holds one directory per bucket, whose regular files are the bucket's objects, and beside them a
// record of where each bucket was first mounted. Header-only: the worker hosts' tools link none of the mock's library.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace jobman::mock {

// The variable that tells a worker host's commands the zone of their node ("europe-west4-a").
inline constexpr const char* kHostZoneVariable = "MOCK_TPU_ZONE";

// The variable that tells a worker host's commands the host's own addresses, internal first, comma-separated: where its
// gcsfuse serves its metrics (on a TPU VM, a port of every address the VM has).
inline constexpr const char* kHostAddressVariable = "MOCK_TPU_HOST_ADDRESSES";

// The directory under the bucket root where gcsfuse records, per bucket, the zone of the first worker host that
// mounted it. No bucket name starts with '.', so it is no bucket, and no listing of a bucket shows it.
inline constexpr const char* kFirstMountsDir = ".first-mounts";

// The file under a worker host's MOCK_GCS_ROOT, when the mock meters its Cloud Storage (jobman-mock-gcs-meter), that
// holds what the host read from and wrote to each bucket, one "BUCKET\tKEY\tVALUE" line each: KEY is read_bytes,
// write_bytes, fs_op/NAME, gcs_method/NAME or reader/opened|closed, as gcsfuse names its metrics. Its gcsfuse serves
// them on --prometheus-port.
inline constexpr const char* kMeterFile = ".gcs-meter";

// The file that records where `bucket` was first mounted: the zone and a newline, written once.
inline std::filesystem::path first_mount_file(const std::filesystem::path& root, std::string_view bucket) {
  return root / kFirstMountsDir / std::string(bucket);
}

// True for a name Cloud Storage gives a bucket: 3 to 63 characters (222 with dots), lowercase letters, digits, '-',
// '_' and '.', beginning and ending with a letter or a digit.
inline bool valid_bucket_name(std::string_view name) {
  const auto alphanumeric = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  const std::size_t limit = name.find('.') == std::string_view::npos ? 63 : 222;
  if (name.size() < 3 || name.size() > limit || !alphanumeric(name.front()) || !alphanumeric(name.back())) {
    return false;
  }
  for (const char c : name) {
    if (!alphanumeric(c) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

} // namespace jobman::mock
