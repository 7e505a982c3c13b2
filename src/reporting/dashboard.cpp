// The dashboard's answers: the page with the job table as `list` shows it, what changed since a cursor (one indexed
// query, rows rendered here so that the page and its updates look the same), a job's panel (the report's timeline and
// account, its attempts and events) with the tail of a log, and the report's totals. Everything stored is escaped
// here; the script only places what it is given.
#include "jobman/reporting/dashboard.hpp"

#include "jobman/config/settings.hpp"
#include "jobman/core/job_logs.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/reporting/accounting.hpp"
#include "jobman/reporting/report.hpp"
#include "jobman/reporting/text.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/random.h>

namespace jobman::reporting {

namespace detail {
extern const char* const kDashboardScript;
extern const char* const kDashboardStyle;
} // namespace detail

namespace {

// The API's answers are read by the page's script alone: built member by member, their members in the order
// nlohmann::json keeps (by name).
using nlohmann::json;

// How much of a log's end the panel shows.
constexpr std::uint64_t kLogTailBytes = std::uint64_t{64} * 1024;
// The events a panel lists, newest last.
constexpr std::size_t kPanelEvents = 15;

// Sent with every answer: nothing is cached, nothing is framed, nothing is fetched from elsewhere, and the token in
// the page's URL never leaves in a Referer.
const std::vector<std::pair<std::string, std::string>>& security_headers() {
  static const std::vector<std::pair<std::string, std::string>> headers{
      {"Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; "
                                  "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
                                  "frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
      {"Cache-Control", "no-store"},
  };
  return headers;
}

DashboardAnswer answer_of(int status, std::string content_type, std::string body) {
  DashboardAnswer a;
  a.status = status;
  a.content_type = std::move(content_type);
  a.body = std::move(body);
  a.headers = security_headers();
  return a;
}

DashboardAnswer json_answer(const json& body) {
  return answer_of(200, "application/json", body.dump());
}

DashboardAnswer error_answer(int status, const std::string& message) {
  return answer_of(status, "text/plain; charset=utf-8", message + "\n");
}

// Equal without telling, by its timing, how much of the token a guess got right.
bool same_secret(const std::string& given, const std::string& token) {
  if (given.size() != token.size()) {
    return false;
  }
  unsigned char diff = 0;
  for (std::size_t i = 0; i < token.size(); ++i) {
    diff = static_cast<unsigned char>(diff |
                                      (static_cast<unsigned char>(given[i]) ^ static_cast<unsigned char>(token[i])));
  }
  return diff == 0;
}

// A Host header naming this server on loopback.
bool loopback_host(const std::string& host, int port) {
  const std::string suffix = ":" + std::to_string(port);
  for (const char* name : {"127.0.0.1", "localhost", "[::1]"}) {
    if (host == std::string(name) + suffix) {
      return true;
    }
  }
  return false;
}

std::string param(const DashboardRequest& request, const std::string& name) {
  const auto it = request.params.find(name);
  return it == request.params.end() ? std::string() : it->second;
}

// A parameter that must be a whole number of at least 0 (a change number, a worker); nullopt otherwise.
std::optional<std::int64_t> count_param(const DashboardRequest& request, const std::string& name) {
  const auto value = util::parse_int(param(request, name));
  return value && *value >= 0 ? std::optional<std::int64_t>(*value) : std::nullopt;
}

std::string badge(const domain::JobRecord& job) {
  const std::string phase(domain::to_string(job.phase));
  std::string extra = status_text(job).substr(phase.size());
  return "<span class=\"badge ph-" + phase + "\">" + phase + "</span>" +
         (extra.empty() ? std::string() : "<span class=\"m\">" + html_escape(extra) + "</span>");
}

// The PROGRESS cell: the text `list` shows, and a bar when the total is known.
std::string progress_cell(const domain::JobRecord& job) {
  std::string cell = html_escape(progress_text(job));
  if (job.progress && job.step_total && *job.step_total > 0) {
    const double share =
        std::clamp(static_cast<double>(job.progress->step) / static_cast<double>(*job.step_total), 0.0, 1.0);
    cell += "<span class=\"bar\"><i style=\"width:" + decimal(share * 100, 1) + "%\"></i></span>";
  }
  return cell;
}

// One row of the job table: the columns of `list`, the kind beside the name, the age kept current by the script.
std::string row_html(const domain::JobRecord& job, std::int64_t now_ms) {
  const std::string id = domain::format_job_id(job.id);
  const std::string kind(domain::to_string(job.kind));
  std::string row = "<tr id=\"job-" + id + "\" data-id=\"" + std::to_string(job.id) + "\" data-phase=\"" +
                    std::string(domain::to_string(job.phase)) + "\" data-kind=\"" + kind + "\" data-search=\"" +
                    html_escape(job.name + " " + job.user + " " + job.zone + " " + job.accelerator + " " + id) + "\">";
  row += "<td class=\"l mono\">" + id + "</td><td class=\"l\">" + html_escape(job.user) + "</td><td class=\"l name\">" +
         html_escape(job.name) +
         (job.kind == domain::JobKind::job ? std::string() : " <span class=\"kind\">" + kind + "</span>") +
         "</td><td class=\"l\">" + html_escape(job.accelerator) + "</td><td class=\"l\">" +
         (job.zone.empty() ? std::string("-") : html_escape(job.zone)) + "</td><td class=\"l\">" + badge(job) +
         "</td><td>" + std::to_string(job.attempt) + "</td><td class=\"l prog\">" + progress_cell(job) +
         "</td><td data-since=\"" + std::to_string(job.created_ms) + "\">" +
         util::format_duration((now_ms - job.created_ms) / 1000) + "</td></tr>";
  return row;
}

// What the count cards group the phases into.
const char* phase_group(domain::Phase phase) {
  using domain::Phase;
  switch (phase) {
  case Phase::running: return "running";
  case Phase::setup:
  case Phase::provisioning:
  case Phase::queued:
  case Phase::pending: return "waiting";
  case Phase::recovering: return "recovering";
  case Phase::succeeded: return "succeeded";
  case Phase::failed: return "failed";
  default: return "other";
  }
}

// "22:34:02" on the day of `now_ms`, "11-26 22:34" before it: a panel's tables fit beside the job table.
std::string short_time(std::int64_t ms, std::int64_t now_ms) {
  std::string at = util::format_local(ms); // "2026-11-27 22:34:02"
  if (at.size() < 19) {
    return at;
  }
  return at.compare(0, 10, util::format_local(now_ms), 0, 10) == 0 ? at.substr(11) : at.substr(5, 11);
}

std::string time_cell(const std::optional<std::int64_t>& ms, std::int64_t now_ms) {
  return ms ? html_escape(short_time(*ms, now_ms)) : std::string("-");
}

void attempts_table(std::ostream& out, const std::vector<domain::AttemptRecord>& attempts, std::int64_t now_ms) {
  if (attempts.empty()) {
    out << "<p class=\"note\">No slice asked for yet.</p>\n";
    return;
  }
  out << "<table class=\"attempts\"><tr><th>#</th><th class=\"l\">zone</th><th class=\"l\">slice</th>"
         "<th class=\"l\">tier</th><th class=\"l\">asked</th><th class=\"l\">ready</th><th class=\"l\">ended</th>"
         "<th class=\"l\">outcome</th><th>steps</th></tr>\n";
  for (const auto& a : attempts) {
    const auto first = a.progress.first();
    const auto last = a.progress.latest();
    out << "<tr><td>" << a.number << "</td><td class=\"l\">" << html_escape(a.zone) << "</td><td class=\"l mono\">"
        << html_escape(a.slice_name()) << "</td><td class=\"l\">" << html_escape(domain::to_string(a.pricing))
        << "</td><td class=\"l\">" << html_escape(short_time(a.started_ms, now_ms)) << "</td><td class=\"l\">"
        << time_cell(a.active_ms, now_ms) << "</td><td class=\"l\">" << time_cell(a.ended_ms, now_ms)
        << "</td><td class=\"l\">"
        << (a.outcome == domain::AttemptOutcome::none ? std::string(a.ended_ms ? "-" : "current")
                                                      : html_escape(std::string(domain::to_string(a.outcome))))
        << "</td><td>"
        << (first && last ? std::to_string(first->step) + "&ndash;" + std::to_string(last->step) : std::string("-"))
        << "</td></tr>\n";
  }
  out << "</table>\n";
}

void buckets_table(std::ostream& out, const core::JobAccount& account) {
  const auto wall = account.wall_ms();
  out << "<table class=\"buckets\"><tr><th class=\"l\">time</th><th>spent</th><th>share</th></tr>";
  for (const auto bucket : core::all_buckets()) {
    const auto ms = account.of(bucket);
    if (ms == 0) {
      continue;
    }
    out << "<tr><td class=\"l\"><i class=\"sw\" style=\"background:" << bucket_colour(bucket) << "\"></i>"
        << core::to_string(bucket) << "</td><td>" << span_text(ms) << "</td><td>"
        << percent_text(wall > 0 ? std::optional<double>(static_cast<double>(ms) / static_cast<double>(wall))
                                 : std::nullopt)
        << "</td></tr>";
  }
  out << "</table>\n";
}

void events_table(std::ostream& out, const std::vector<domain::EventRecord>& events, std::int64_t now_ms) {
  const std::size_t first = events.size() > kPanelEvents ? events.size() - kPanelEvents : 0;
  out << "<table class=\"events\">";
  for (std::size_t i = first; i < events.size(); ++i) {
    const auto& e = events[i];
    std::string what = e.message;
    if (e.kind == "phase" && e.to) {
      what = std::string(domain::to_string(*e.to)) + (e.message.empty() ? "" : ": " + e.message);
    }
    out << "<tr><td class=\"l nowrap\">" << html_escape(short_time(e.ts_ms, now_ms)) << "</td><td class=\"l\">"
        << html_escape(e.kind) << "</td><td class=\"l wrap\">" << html_escape(what) << "</td></tr>";
  }
  out << "</table>\n";
}

} // namespace

std::string new_dashboard_token() {
  std::array<unsigned char, 16> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw Error(std::string("getrandom: ") + std::strerror(errno));
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (const unsigned char b : bytes) {
    token += kHex[b >> 4U];
    token += kHex[b & 0xFU];
  }
  return token;
}

Dashboard::Dashboard(store::JobStore& store, config::PriceTable prices, std::string token)
    : store_(store), prices_(std::move(prices)), token_(std::move(token)) {}

void Dashboard::set_port(int port) {
  std::lock_guard lock(mutex_);
  port_ = port;
}

std::string Dashboard::url() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/?token=" + token_;
}

DashboardAnswer Dashboard::answer(const DashboardRequest& request) {
  std::lock_guard lock(mutex_);
  if (!loopback_host(request.host, port_)) {
    return error_answer(403, "This dashboard answers on 127.0.0.1:" + std::to_string(port_) + " only.");
  }
  if (request.method != "GET") {
    auto a = error_answer(405, "The dashboard is read-only.");
    a.headers.emplace_back("Allow", "GET");
    return a;
  }
  if (request.path == "/dashboard.js") {
    return answer_of(200, "text/javascript; charset=utf-8", detail::kDashboardScript);
  }
  if (request.path == "/favicon.ico") {
    return answer_of(204, "", "");
  }
  if (request.path == "/") {
    if (!same_secret(param(request, "token"), token_)) {
      return answer_of(403, "text/html; charset=utf-8",
                       "<!DOCTYPE html><title>jobman</title><p>Open the address <code>jobman ui</code> printed: it "
                       "carries the dashboard's token.</p>\n");
    }
    try {
      return page();
    } catch (const Error& e) {
      return error_answer(500, e.what());
    }
  }
  if (!request.path.starts_with("/api/")) {
    return error_answer(404, "No such page.");
  }
  if (!same_secret(request.token, token_)) {
    return error_answer(403, "A request to the dashboard's API must carry its token.");
  }
  try {
    if (request.path == "/api/changes") {
      return changes(request);
    }
    if (request.path == "/api/job") {
      return job_panel(request);
    }
    if (request.path == "/api/report") {
      return report(request);
    }
  } catch (const domain::NoSuchJobError& e) {
    return error_answer(404, e.what());
  } catch (const Error& e) {
    return error_answer(500, e.what());
  }
  return error_answer(404, "No such page.");
}

DashboardAnswer Dashboard::page() {
  const std::int64_t now = util::now_ms();
  std::string rows;
  std::map<std::string, int> counts;
  store::JobFilter filter;
  filter.now_ms = now;
  const std::int64_t cursor = store_.jobs().for_each_with_cursor(filter, [&](const domain::JobRecord& job) {
    rows += row_html(job, now);
    rows += '\n';
    ++counts[phase_group(job.phase)];
  });
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>jobman</title><style>"
      << report_style() << detail::kDashboardStyle << "</style></head>\n<body data-cursor=\"" << cursor
      << "\" data-now=\"" << now << "\">\n<header class=\"top\"><h1>jobman</h1><span class=\"sub\">"
      << html_escape(config::jobman_home().string())
      << "</span><span id=\"live\" class=\"live\">live</span></header>\n<div class=\"counts\" id=\"counts\">";
  for (const char* group : {"running", "waiting", "recovering", "succeeded", "failed"}) {
    out << "<div class=\"card c-" << group << "\"><div class=\"v\" data-count=\"" << group << "\">" << counts[group]
        << "</div><div class=\"k\">" << group << "</div></div>";
  }
  out << "</div>\n<div class=\"filters\"><span class=\"kinds\">";
  for (const char* kind : {"all", "job", "worker", "task"}) {
    out << "<button type=\"button\" data-kind=\"" << kind << "\""
        << (std::strcmp(kind, "all") == 0 ? " class=\"on\"" : "") << ">" << kind
        << (std::strcmp(kind, "all") == 0 ? "" : "s") << "</button>";
  }
  out << "</span><input id=\"filter\" type=\"search\" placeholder=\"filter: name, user, zone, accelerator\" "
         "autocomplete=\"off\"></div>\n<div class=\"layout\"><section class=\"jobs\"><table id=\"jobs\"><thead><tr>"
         "<th class=\"l\">JOB ID</th><th class=\"l\">USER</th><th class=\"l\">NAME</th><th class=\"l\">ACCELERATOR</th>"
         "<th class=\"l\">ZONE</th><th class=\"l\">STATUS</th><th>ATTEMPT</th><th class=\"l\">PROGRESS</th><th>AGE</th>"
         "</tr></thead><tbody>\n"
      << rows << "</tbody></table><p id=\"empty\" class=\"note\"" << (rows.empty() ? "" : " hidden")
      << ">No active or recent jobs (unfinished ones, and those finished in the last 24 hours).</p></section>\n"
         "<aside id=\"panel\" class=\"panel\"><p class=\"note\">Select a job to see where its time went, its attempts "
         "and the end of its logs.</p></aside></div>\n"
         "<section class=\"report\"><h2>Where the time and money went <select id=\"since\" aria-label=\"since\">"
         "<option value=\"24h\">last 24 hours</option><option value=\"7d\" selected>last 7 days</option>"
         "<option value=\"30d\">last 30 days</option></select></h2><div id=\"report\" class=\"note\">loading&hellip;"
         "</div></section>\n<script src=\"/dashboard.js\"></script>\n</body></html>\n";
  return answer_of(200, "text/html; charset=utf-8", out.str());
}

DashboardAnswer Dashboard::changes(const DashboardRequest& request) {
  const auto after = count_param(request, "after");
  if (!after) {
    return error_answer(400, "after: a change number is required");
  }
  const std::int64_t now = util::now_ms();
  const auto changed = store_.jobs().changes_since(*after);
  json answer;
  answer["cursor"] = changed.cursor;
  answer["now_ms"] = now;
  answer["rows"] = json::array();
  for (const auto& job : changed.jobs) {
    json row;
    row["id"] = job.id;
    row["html"] = row_html(job, now);
    answer["rows"].push_back(std::move(row));
  }
  answer["removed"] = changed.removed;
  answer["reload"] = !changed.complete;
  return json_answer(answer);
}

DashboardAnswer Dashboard::job_panel(const DashboardRequest& request) {
  const auto id = domain::parse_job_id(param(request, "id"));
  if (!id) {
    return error_answer(400, "id: a job id is required");
  }
  const std::int64_t now = util::now_ms();
  ReportSelection selection;
  selection.ids = {*id};
  selection.detailed_rows = 1;
  const auto built = build_report(store_, selection, prices_, now);
  const auto& row = built.rows.front();
  const auto& job = row.job;
  std::ostringstream out;
  out << "<div class=\"head\"><span class=\"t\">" << domain::format_job_id(job.id) << " " << html_escape(job.name)
      << "</span> " << badge(job)
      << "<button type=\"button\" id=\"close\" aria-label=\"close\">&times;</button></div>\n"
      << "<div class=\"m\">" << html_escape(place_of(job)) << " &middot; " << html_escape(job.user) << " &middot; "
      << domain::to_string(job.kind) << " &middot; attempt " << job.attempt << " &middot; " << job.preemptions
      << " preemption" << (job.preemptions == 1 ? "" : "s") << " &middot; created "
      << html_escape(util::format_local(job.created_ms)) << "</div>\n";
  if (!job.phase_reason.empty()) {
    out << "<div class=\"m wrap\">" << html_escape(job.phase_reason) << "</div>\n";
  }
  if (const auto view = progress_view(job, row.attempts)) {
    out << "<div class=\"line\">Progress: " << html_escape(progress_line(*view)) << "</div>\n";
  }
  const std::string cost = cost_cell(row.account, row.cost, prices_);
  out << "<div class=\"line\">" << html_escape(goodput_text(row.account))
      << (cost == "-" ? std::string() : ", " + html_escape(cost))
      << (row.account.lost_steps > 0 ? ", " + std::to_string(row.account.lost_steps) + " steps done again" : "")
      << "</div>\n";
  write_job_timeline(out, row);
  buckets_table(out, row.account);
  for (const auto& note : row.account.notes) {
    out << "<div class=\"note\">note: " << html_escape(note) << "</div>\n";
  }
  out << "<h3>Attempts</h3>\n";
  attempts_table(out, row.attempts, now);
  out << "<h3>Events</h3>\n";
  events_table(out, store_.events().of(job.id), now);

  // The log: one worker's output (or its setup's) of the current attempt, its end only.
  const int hosts = std::max(job.hosts, 1);
  const int worker = static_cast<int>(std::min<std::int64_t>(count_param(request, "worker").value_or(0), hosts - 1));
  const bool setup = param(request, "log") == "setup";
  json log;
  log["worker"] = worker;
  log["workers"] = hosts;
  log["kind"] = setup ? "setup" : "output";
  log["text"] = "";
  log["note"] = "";
  if (job.attempt > 0) {
    const auto path = core::log_path(core::attempt_directory(job.id, job.attempt),
                                     setup ? core::LogKind::setup : core::LogKind::worker, worker);
    if (auto tail = util::read_file_tail(path, kLogTailBytes)) {
      std::string_view text = tail->text;
      if (tail->size > tail->text.size()) {
        const auto first_break = text.find('\n'); // The first line is cut: start at the next whole one.
        text.remove_prefix(first_break == std::string_view::npos ? text.size() : first_break + 1);
      }
      log["text"] = util::escape_controls(text, util::LineBreaks::keep);
      log["note"] = "attempt " + std::to_string(job.attempt) + ", " + path.filename().string() + ", " +
                    std::to_string(tail->size) + " bytes" + (tail->size > tail->text.size() ? ", its end" : "");
    } else {
      log["note"] = "attempt " + std::to_string(job.attempt) + ": no " + path.filename().string() + " yet";
    }
  } else {
    log["note"] = "no attempt yet";
  }
  json answer;
  answer["id"] = job.id;
  answer["phase"] = domain::to_string(job.phase);
  answer["html"] = out.str();
  answer["log"] = std::move(log);
  return json_answer(answer);
}

DashboardAnswer Dashboard::report(const DashboardRequest& request) {
  const std::string since_text = param(request, "since").empty() ? "7d" : param(request, "since");
  const auto since = util::parse_duration_seconds(since_text);
  if (!since) {
    return error_answer(400, "since: '" + since_text + "' is not a duration (90s, 30m, 2h, 7d)");
  }
  const std::int64_t now = util::now_ms();
  ReportSelection selection;
  selection.since_ms = now - *since * 1000;
  const auto built = build_report(store_, selection, prices_, now, [](const ReportRow&) {}); // The totals alone.
  std::ostringstream out;
  if (built.jobs == 0) {
    out << "<p class=\"note\">No jobs in this time.</p>";
  } else {
    write_report_summary(out, built, prices_);
    out << "<p class=\"note\">" << html_escape(prices_note(prices_)) << ". <code>jobman report --since "
        << html_escape(since_text) << " --html report.html</code> writes every job's timeline.</p>";
  }
  json answer;
  answer["jobs"] = built.jobs;
  answer["html"] = out.str();
  return json_answer(answer);
}

} // namespace jobman::reporting
