#include "mock_cloud/auth.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace jobman::mock {
namespace {

constexpr const char* kMetadataFlavor = "Metadata-Flavor";

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  // Token responses must never be cached (RFC 6749 section 5.1).
  res.set_header("Cache-Control", "no-store");
  res.set_header("Pragma", "no-cache");
  res.set_content(body.dump(), "application/json; charset=utf-8");
}

void send_token(httplib::Response& res, const IssuedToken& token) {
  send_json(res, 200,
            nlohmann::json{{"access_token", token.access_token},
                           {"expires_in", token.expires_in.count()},
                           {"token_type", "Bearer"}});
}

void send_oauth_error(httplib::Response& res, const OAuthError& error) {
  send_json(res, error.status, nlohmann::json{{"error", error.error}, {"error_description", error.description}});
}

// The OAuth endpoint: a form-encoded JWT-bearer grant in the body.
void handle_token_request(TokenAuthority& authority, const httplib::Request& req, httplib::Response& res) {
  if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) != 0) {
    send_oauth_error(res, {400, "invalid_request", "The body must be application/x-www-form-urlencoded."});
    return;
  }
  // Only the body counts: a grant in the query string would put the assertion into URLs.
  httplib::Params params;
  httplib::detail::parse_query_text(req.body, params);
  std::map<std::string, std::string> form;
  for (const auto& [name, value] : params) {
    if (!form.emplace(name, value).second) {
      send_oauth_error(res, {400, "invalid_request", "Parameter " + name + " is given more than once."});
      return;
    }
  }
  const std::string request_url = "http://" + req.get_header_value("Host") + req.path;
  const GrantResult result = authority.exchange(form, request_url, authority.now());
  if (result.token) {
    send_token(res, *result.token);
  } else {
    send_oauth_error(res, result.error);
  }
}

// The metadata server answers only requests that say they mean it, and always says who it is.
bool metadata_request_allowed(const httplib::Request& req, httplib::Response& res) {
  res.set_header(kMetadataFlavor, "Google");
  if (req.get_header_value(kMetadataFlavor) != "Google") {
    res.status = 403;
    res.set_content("Missing Metadata-Flavor:Google header.\n", "text/plain; charset=utf-8");
    return false;
  }
  // Like Google's, the mock refuses requests that came through a proxy.
  if (req.has_header("X-Forwarded-For")) {
    res.status = 403;
    res.set_content("Request had an X-Forwarded-For header and was rejected.\n", "text/plain; charset=utf-8");
    return false;
  }
  return true;
}

void send_metadata_text(httplib::Response& res, const std::string& text) {
  res.status = 200;
  res.set_content(text, "application/text");
}

// A metadata directory: its entries one a line, subdirectories with a trailing '/', as the metadata server lists
// them. Only what the mock answers is listed.
void serve_metadata_directory(httplib::Server& server, const std::string& path, const std::string& entries) {
  server.Get(path + "/", [entries](const httplib::Request& req, httplib::Response& res) {
    if (metadata_request_allowed(req, res)) {
      send_metadata_text(res, entries);
    }
  });
  // Without the trailing '/', the metadata server redirects to the directory; google-auth-library's probe for a
  // metadata server (GET .../instance) follows it.
  server.Get(path, [path](const httplib::Request& req, httplib::Response& res) {
    if (metadata_request_allowed(req, res)) {
      res.set_redirect(path + "/", 301);
    }
  });
}

} // namespace

void register_auth_routes(httplib::Server& server, TokenAuthority& authority, const AuthRouteOptions& options) {
  const auto token_handler = [&authority](const httplib::Request& req, httplib::Response& res) {
    handle_token_request(authority, req, res);
  };
  server.Post("/token", token_handler);
  server.Post("/oauth2/v4/token", token_handler);

  // Each service account of the VM answers under its email and under "default", as the metadata server's do; gcloud
  // on a VM lists them and asks for its account by email.
  const auto account = [email = options.metadata_email](const httplib::Request& req) {
    return req.matches[1] == "default" || req.matches[1] == email;
  };
  server.Get("/computeMetadata/v1/instance/service-accounts/([^/]+)/token",
             [&authority, account](const httplib::Request& req, httplib::Response& res) {
               if (!metadata_request_allowed(req, res)) {
                 return;
               }
               if (!account(req)) {
                 res.status = 404;
                 return;
               }
               send_token(res, authority.issue(authority.now()));
             });
  server.Get("/computeMetadata/v1/instance/service-accounts/([^/]+)/email",
             [email = options.metadata_email, account](const httplib::Request& req, httplib::Response& res) {
               if (!metadata_request_allowed(req, res)) {
                 return;
               }
               if (!account(req)) {
                 res.status = 404;
                 return;
               }
               send_metadata_text(res, email);
             });
  server.Get("/computeMetadata/v1/project/project-id",
             [project = options.project_id](const httplib::Request& req, httplib::Response& res) {
               if (metadata_request_allowed(req, res)) {
                 send_metadata_text(res, project);
               }
             });
  server.Get("/computeMetadata/v1/project/numeric-project-id",
             [number = options.numeric_project_id](const httplib::Request& req, httplib::Response& res) {
               if (metadata_request_allowed(req, res)) {
                 send_metadata_text(res, number);
               }
             });
  // google-auth-library asks which universe its credentials belong to; a VM outside a sovereign cloud says this.
  server.Get("/computeMetadata/v1/universe/universe-domain", [](const httplib::Request& req, httplib::Response& res) {
    if (metadata_request_allowed(req, res)) {
      send_metadata_text(res, "googleapis.com");
    }
  });
  serve_metadata_directory(server, "/computeMetadata/v1/instance", "service-accounts/\n");
  serve_metadata_directory(server, "/computeMetadata/v1/instance/service-accounts",
                           "default/\n" + options.metadata_email + "/\n");
  // A service account's directory; with ?recursive=true, as JSON (google-auth reads the account's email and scopes
  // so).
  server.Get("/computeMetadata/v1/instance/service-accounts/([^/]+)/",
             [email = options.metadata_email, account](const httplib::Request& req, httplib::Response& res) {
               if (!metadata_request_allowed(req, res)) {
                 return;
               }
               if (!account(req)) {
                 res.status = 404;
                 return;
               }
               if (req.get_param_value("recursive") == "true") {
                 const nlohmann::json info = {{"aliases", {"default"}},
                                              {"email", email},
                                              {"scopes", {"https://www.googleapis.com/auth/cloud-platform"}}};
                 res.status = 200;
                 res.set_content(info.dump(), "application/json");
                 return;
               }
               send_metadata_text(res, "email\ntoken\n");
             });
  server.Get("/computeMetadata/v1/instance/service-accounts/([^/]+)",
             [](const httplib::Request& req, httplib::Response& res) {
               if (metadata_request_allowed(req, res)) {
                 res.set_redirect(req.path + "/", 301);
               }
             });
  serve_metadata_directory(server, "/computeMetadata/v1/project", "numeric-project-id\nproject-id\n");
  serve_metadata_directory(server, "/computeMetadata/v1/universe", "universe-domain\n");
}

} // namespace jobman::mock
