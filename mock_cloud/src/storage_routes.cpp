// Cloud Storage's JSON API over the mock's bucket directories (/storage/v1: buckets.get, objects.list, objects.get,
// metadata only), behind the TPU API's bearer check, and the admin API's view of where each bucket is.
#include "jobman/util/strings.hpp"
#include "mock_cloud/cloud_storage.hpp"
#include "mock_cloud/server.hpp"
#include "server_internal.hpp"

#include <algorithm>

namespace jobman::mock {

namespace {

constexpr const char* kBucketRoute = "/storage/v1/b/([^/]+)";

// Where the client reached the mock, "http://HOST:PORT": the start of every selfLink.
std::string storage_base_url(const httplib::Request& req) {
  const auto host = req.get_header_value("Host");
  return "http://" + (host.empty() ? std::string("127.0.0.1") : host);
}

// A true boolean query parameter: "true" in any case, or "1".
bool storage_flag(const httplib::Request& req, const char* name) {
  const auto value = util::to_lower(req.get_param_value(name));
  return value == "true" || value == "1";
}

// objects.list's query parameters into `query`; the 400 that refuses them, or nullopt. Parameters that change nothing
// in a bucket without versions, ACLs or soft deletion (versions, projection, userProject) are taken as they are; what
// the mock does not do (matchGlob, folders as prefixes, soft-deleted objects) is refused rather than ignored.
std::optional<Reply> read_list_query(const httplib::Request& req, ObjectListQuery& query) {
  const auto refuse = [](const std::string& what) {
    return storage_error(400, "objects.list: the mock cloud does not support " + what +
                                  "; list with prefix and delimiter and select on the client");
  };
  if (req.has_param("matchGlob")) {
    return refuse("matchGlob");
  }
  for (const char* flag : {"includeFoldersAsPrefixes", "softDeleted"}) {
    if (storage_flag(req, flag)) {
      return refuse(flag);
    }
  }
  query.prefix = req.get_param_value("prefix");
  query.delimiter = req.get_param_value("delimiter");
  query.page_token = req.get_param_value("pageToken");
  query.start_offset = req.get_param_value("startOffset");
  query.end_offset = req.get_param_value("endOffset");
  query.include_trailing_delimiter = storage_flag(req, "includeTrailingDelimiter");
  if (req.has_param("maxResults")) {
    const auto value = util::parse_int(req.get_param_value("maxResults"));
    if (!value || *value < 1) {
      return storage_error(400, "Invalid value for maxResults: '" + req.get_param_value("maxResults") +
                                    "' is not a positive whole number");
    }
    // Cloud Storage answers at most 1000 entries a page, whatever the client asks for.
    query.max_results = static_cast<int>(std::min<long long>(*value, 1000));
  }
  return std::nullopt;
}

} // namespace

httplib::Server::Handler MockServer::storage_route(const std::string& method, Handler handler) {
  return [this, method, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    Reply reply;
    if (auto refused = refuse_unauthenticated(req, res)) {
      reply = storage_error(refused->status, refused->body["error"].value("message", ""));
    } else if (!buckets_) {
      reply = storage_error(503, "The mock's Cloud Storage is not up yet");
    } else {
      reply = handler(req);
      server_internal::select_requested_fields(req, reply);
      if (!reply.ok() && !reply.body["error"].contains("errors")) {
        reply = storage_error(reply.status, reply.body["error"].value("message", ""));
      }
    }
    world_->count_request(method, reply.status);
    server_internal::send_reply(res, reply, server_internal::pretty_printed(req));
  };
}

void MockServer::register_storage_routes() {
  const std::string bucket = kBucketRoute;
  http_.Get(bucket, storage_route("storage.buckets.get", [this](const httplib::Request& req) {
              return buckets_->get_bucket(req.matches[1].str(), storage_base_url(req));
            }));
  http_.Get(bucket + "/o", storage_route("storage.objects.list", [this](const httplib::Request& req) {
              ObjectListQuery query;
              if (auto refused = read_list_query(req, query)) {
                return *refused;
              }
              return buckets_->list_objects(req.matches[1].str(), query, storage_base_url(req));
            }));
  // The object's name is the rest of the path, its '/' sent as %2F and decoded by the server.
  http_.Get(bucket + "/o/(.+)", storage_route("storage.objects.get", [this](const httplib::Request& req) {
              if (req.get_param_value("alt") == "media") {
                return storage_error(501, "The mock cloud serves no object data through the JSON API (alt=media): "
                                          "read the bucket through gcsfuse on a worker host");
              }
              return buckets_->get_object(req.matches[1].str(), req.matches[2].str(), storage_base_url(req));
            }));
  // Every bucket and where it is: the world config's placement, its first mount's zone, or the world's first zone.
  http_.Get("/mock/v1/buckets", admin_route("admin.buckets", [this](const httplib::Request&) {
              return buckets_ ? Reply{200, buckets_->locations()}
                              : error_reply(503, "The mock's Cloud Storage is not up yet");
            }));
}

} // namespace jobman::mock
