// The model written back as a document in the layout of a config file: the snapshot stored with a job, and the JSON
// of --json and --dry-run.
#include "interpolation.hpp"
#include "loader_parts.hpp"
#include "schema.hpp"

namespace jobman::config::detail {

namespace {

using json = nlohmann::ordered_json;

// A setup script's text as a snapshot keeps it: its references escaped, and a backslash before a "${" that is not one
// doubled, since reading the snapshot takes "\${" for OmegaConf's escape of "${" and a script read from a file (whose
// text is not resolved) may hold one ("echo \${HOME}").
std::string escape_script(std::string_view text) {
  const std::string escaped = detail::escape_references(text);
  std::string out;
  out.reserve(escaped.size());
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '\\' && escaped.compare(i + 1, 2, "${") == 0) {
      out += '\\';
    }
    out += escaped[i];
  }
  return out;
}

} // namespace

json document(const JobConfig& c, Purpose purpose, const std::optional<std::string>& api_key_reference) {
  const auto s = [&](const std::string& text) -> json {
    return purpose == Purpose::snapshot ? detail::escape_references(text) : text;
  };
  const auto opt = [&](const std::string& text) -> json { return text.empty() ? json(nullptr) : s(text); };
  const auto list = [&](const std::vector<std::string>& items) {
    json out = json::array();
    for (const auto& item : items) {
      out.push_back(s(item));
    }
    return out;
  };
  // A std::map's keys are distinct already: they are appended as they are, without the ordered map's search for an
  // equal key, which made a config with thousands of vars take seconds.
  const auto map = [&](const std::map<std::string, std::string>& items) {
    json out = json::object();
    auto& entries = static_cast<json::object_t::Container&>(out.get_ref<json::object_t&>());
    entries.reserve(items.size());
    for (const auto& [key, value] : items) {
      entries.emplace_back(key, s(value));
    }
    return out;
  };

  json doc = json::object();
  doc["job"] = json{{"name", s(c.job.name)},
                    {"env_type", to_string(c.job.env_type)},
                    {"loop", c.job.loop},
                    {"remote_user", opt(c.job.remote_user)},
                    {"progress", c.job.progress},
                    {"loss", c.job.loss},
                    {"experiment", opt(c.job.experiment)}};
  const TpuSection& t = c.tpu;
  json tpu = json::object();
  tpu["allocation_mode"] = to_string(t.allocation_mode);
  if (t.accelerators.size() > 1) {
    json names = json::array();
    for (const auto& a : t.accelerators) {
      names.push_back(a.name);
    }
    tpu["accelerator"] = names;
  } else {
    tpu["accelerator"] = t.accelerator.name;
  }
  tpu["name"] = s(t.name);
  tpu["zone"] = t.zones.size() > 1 ? list(t.zones) : s(t.zone);
  // A version nobody wrote is left out when the accelerators differ, so each keeps its generation's.
  tpu["version"] = t.version_given || t.accelerators.size() <= 1 ? s(t.version) : json(nullptr);
  if (t.pricings.size() > 1) {
    json pricings = json::array();
    for (const auto pricing : t.pricings) {
      pricings.push_back(to_string(pricing));
    }
    tpu["pricing"] = pricings;
  } else {
    tpu["pricing"] = to_string(t.pricing);
  }
  tpu["startup_script"] = t.startup_script ? s(*t.startup_script) : json(nullptr);
  tpu["tags"] = list(t.tags);
  tpu["metadata"] = map(t.metadata);
  tpu["labels"] = map(t.labels);
  tpu["flags"] = list(t.flags);
  tpu["queue_timeout"] =
      t.queue_timeout_seconds ? json(detail::exact_duration(*t.queue_timeout_seconds)) : json(nullptr);
  tpu["network"] = opt(t.network);
  tpu["subnetwork"] = opt(t.subnetwork);
  tpu["service_account"] = opt(t.service_account);
  tpu["reservation"] = opt(t.reservation);
  tpu["max_run_duration"] =
      t.max_run_duration_seconds ? json(detail::exact_duration(*t.max_run_duration_seconds)) : json(nullptr);
  if (t.slices != 1) { // Left out for one, so that a snapshot of a single-slice job reads as it always has.
    tpu["slices"] = t.slices;
  }
  tpu["preflight"] = opt(t.preflight);
  tpu["order"] = to_string(t.order);
  tpu["strategy"] = to_string(t.strategy);
  tpu["reserved"] = t.reserved;
  tpu["internal_ips"] = t.internal_ips;
  tpu["keep_on_success"] = t.keep_on_success;
  if (t.idle_release_seconds) { // Only a worker's config has it.
    tpu["idle_release"] = detail::exact_duration(*t.idle_release_seconds);
  }
  doc["tpu"] = tpu;
  doc["gcsfuse"] = c.gcsfuse ? json{{"bucket_name", s(c.gcsfuse->bucket_name)},
                                    {"mount_path", s(c.gcsfuse->mount_path)},
                                    {"flags", list(c.gcsfuse->flags)}}
                             : json(nullptr);
  if (c.gcsfuse && c.gcsfuse->expected_read_gb) {
    doc["gcsfuse"]["expected_read_gb"] = *c.gcsfuse->expected_read_gb;
  }
  if (c.ssh) {
    json identities = json::array();
    for (const auto& identity : c.ssh->identities) {
      identities.push_back(json{{"private_key", s(identity.private_key)},
                                {"public_key", opt(identity.public_key)},
                                {"config_entry", opt(identity.config_entry)}});
    }
    doc["ssh"] = json{{"private_key", opt(c.ssh->private_key)}, {"identities", identities}};
  } else {
    doc["ssh"] = nullptr;
  }
  doc["docker"] = c.docker ? json{{"image", opt(c.docker->image)},
                                  {"flags", list(c.docker->flags)},
                                  {"env_vars", list(c.docker->env_vars)},
                                  {"mount_dirs", list(c.docker->mount_dirs)},
                                  {"workdir", opt(c.docker->workdir)}}
                           : json(nullptr);
  doc["conda"] =
      c.conda ? json{{"name", opt(c.conda->name)}, {"config_file", opt(c.conda->config_file)}} : json(nullptr);
  doc["venv"] = c.venv ? json{{"name", opt(c.venv->name)},
                              {"requirements_file", opt(c.venv->requirements_file)},
                              {"python", opt(c.venv->python)}}
                       : json(nullptr);
  doc["setup"] = c.setup ? json{{"script", purpose == Purpose::snapshot ? json(escape_script(c.setup->script))
                                                                        : json(c.setup->script)}}
                         : json(nullptr);
  if (c.remote) { // Only when given: documents of configs without it stay as they were.
    doc["remote"] = json{{"internal_ip", c.remote->internal_ip}};
  }
  json workers = "all";
  if (!c.command.workers.all) {
    workers = json(c.command.workers.indices);
  }
  doc["command"] = json{{"cmd", s(c.command.cmd)}, {"workers", workers}};
  const RecoverySection& r = c.recovery;
  doc["recovery"] = json{
      {"max_preemptions", r.max_preemptions ? json(*r.max_preemptions) : json("unlimited")},
      {"max_failures", r.max_failures},
      {"restart_exit_codes", r.restart_exit_codes},
      {"poll_interval", detail::exact_duration(r.poll_interval_seconds)},
      {"backoff", json{{"initial", detail::exact_duration(r.backoff_initial_seconds)},
                       {"max", detail::exact_duration(r.backoff_max_seconds)},
                       {"multiplier", r.backoff_multiplier}}},
      {"max_bad_hardware", r.max_bad_hardware},
      {"maintenance_lead", detail::exact_duration(r.maintenance_lead_seconds)},
      {"deadline_lead", detail::exact_duration(r.deadline_lead_seconds)},
      {"max_runs", r.max_runs ? json(*r.max_runs) : json("unlimited")},
      {"fallback", r.fallback_after_preemptions || r.fallback_after_waiting_seconds
                       ? json{{"after_preemptions",
                               r.fallback_after_preemptions ? json(*r.fallback_after_preemptions) : json(nullptr)},
                              {"after_waiting", r.fallback_after_waiting_seconds
                                                    ? json(detail::exact_duration(*r.fallback_after_waiting_seconds))
                                                    : json(nullptr)}}
                       : json(nullptr)},
      {"bad_hardware", list(r.bad_hardware)},
      {"stall_timeout", detail::exact_duration(r.stall_timeout_seconds)},
      {"stall_first_line", detail::exact_duration(r.stall_first_line_seconds)},
      {"loss_spike", r.loss_spike ? json{{"factor", r.loss_spike->factor},
                                         {"window", r.loss_spike->window},
                                         {"min_steps", r.loss_spike->min_steps},
                                         {"max_rollbacks", r.loss_spike->max_rollbacks},
                                         {"skip_steps", r.loss_spike->skip_steps}}
                                  : json(false)},
  };
  doc["vars"] = map(c.vars);
  if (c.email) {
    // The API key is a secret: the snapshot keeps the reference it came from, output never shows it.
    json api_key = nullptr;
    if (!c.email->api_key.empty()) {
      api_key = purpose == Purpose::snapshot && api_key_reference ? json(*api_key_reference) : json("<redacted>");
    }
    doc["brevo_email"] =
        json{{"api_key", api_key}, {"sender", opt(c.email->sender)}, {"receiver", opt(c.email->receiver)}};
  } else {
    doc["brevo_email"] = nullptr;
  }
  if (c.notify) {
    const auto& n = *c.notify;
    json events = json::array();
    for (const auto event : n.events) {
      events.push_back(to_string(event));
    }
    json notify = {{"events", events}, {"mail_to", n.mail_to}, {"webhooks", n.webhooks}};
    if (n.smtp) {
      notify["smtp"] = {{"url", n.smtp->url},
                        {"from", n.smtp->from},
                        {"to", n.smtp->to},
                        {"username", opt(n.smtp->username)},
                        // The snapshot keeps the ${oc.env:...} call the password came from (keep_calls); output
                        // for people and programs never shows it.
                        {"password", n.smtp->password.empty()       ? json(nullptr)
                                     : purpose == Purpose::snapshot ? json(n.smtp->password)
                                                                    : json("<redacted>")}};
    } else {
      notify["smtp"] = nullptr;
    }
    notify["brevo_config"] = opt(n.brevo_config);
    doc["notify"] = notify;
  } else {
    doc["notify"] = nullptr;
  }
  return doc;
}

std::optional<std::string> api_key_reference(const Node& root) {
  const Entry* section = root.find("brevo_email");
  if (section == nullptr || !section->value.is_mapping()) {
    return std::nullopt;
  }
  const Entry* key = section->value.find("api_key");
  if (key == nullptr || !key->value.is_scalar() || !detail::has_reference(key->value.text)) {
    return std::nullopt;
  }
  return key->value.text;
}

} // namespace jobman::config::detail
