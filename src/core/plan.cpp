#include "jobman/core/plan.hpp"

#include "jobman/cloud/tpu_client.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/slice_hosts.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/util/digest.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <cctype>

namespace jobman::core {

namespace {

// Lower-case letters, digits and dashes; starts with a letter; no trailing or doubled dash.
std::string sanitize_resource_part(const std::string& text) {
  std::string out;
  for (const char raw : text) {
    const auto c = static_cast<unsigned char>(raw);
    char next = '-';
    if (std::isalnum(c) != 0) {
      next = static_cast<char>(std::tolower(c));
    }
    if (next == '-' && (out.empty() || out.back() == '-')) {
      continue;
    }
    out += next;
  }
  while (!out.empty() && out.back() == '-') {
    out.pop_back();
  }
  if (out.empty() || std::isalpha(static_cast<unsigned char>(out.front())) == 0) {
    out = "tpu-" + out;
  }
  return out;
}

// GCP label values: lower-case letters, digits, '_' and '-', at most 63 characters.
std::string sanitize_label_value(const std::string& text) {
  std::string out;
  for (const char raw : text) {
    const auto c = static_cast<unsigned char>(raw);
    if (std::isalnum(c) != 0 || raw == '_' || raw == '-') {
      out += static_cast<char>(std::tolower(c));
    } else {
      out += '_';
    }
    if (out.size() == 63) {
      break;
    }
  }
  return out;
}

std::vector<int> all_workers(const config::JobConfig& config) {
  std::vector<int> workers;
  workers.reserve(static_cast<std::size_t>(config.tpu.accelerator.hosts));
  for (int w = 0; w < config.tpu.accelerator.hosts; ++w) {
    workers.push_back(w);
  }
  return workers;
}

} // namespace

std::string owner_label_value(const std::string& user) {
  return sanitize_label_value(user);
}

std::string store_label_value(const std::string& location) {
  if (util::is_postgres_url(location)) {
    return store_key(location); // Named by its server and database.
  }
  std::error_code ec;
  const auto file = std::filesystem::weakly_canonical(std::filesystem::absolute(location), ec);
  return util::hex_digits(util::fnv1a(util::hostname() + ":" + file.string()), 12);
}

nlohmann::json request_node_labels(const nlohmann::json& body) {
  const auto pointer = nlohmann::json::json_pointer("/tpu/nodeSpec/0/node/labels");
  return body.contains(pointer) ? body.at(pointer) : nlohmann::json();
}

void refuse_another_stores_resource(const std::string& name, const std::map<std::string, std::string>& found_labels,
                                    const nlohmann::json& request_labels) {
  const auto found = found_labels.find(kStoreLabel);
  if (found == found_labels.end() || !request_labels.is_object() || !request_labels.contains(kStoreLabel) ||
      !request_labels[kStoreLabel].is_string() || request_labels[kStoreLabel].get<std::string>() == found->second) {
    return;
  }
  throw cloud::ApiError("TPU API: " + name +
                            " exists already and is another jobman store's (jobman-store=" + found->second +
                            "): its job has the same tpu.name and id as this one; give this job "
                            "another tpu.name",
                        400, "FAILED_PRECONDITION");
}

std::string resource_id(const std::string& tpu_name, std::int64_t job_id, int attempt, int candidate) {
  std::string suffix = "-" + domain::format_job_id(job_id) + "-a" + std::to_string(attempt);
  if (candidate > 1) {
    suffix += "c" + std::to_string(candidate);
  }
  std::string prefix = sanitize_resource_part(tpu_name);
  if (prefix.size() + suffix.size() > 63) {
    prefix.resize(63 - suffix.size());
    while (!prefix.empty() && prefix.back() == '-') {
      prefix.pop_back();
    }
  }
  return prefix + suffix;
}

std::map<std::string, std::string> job_labels(const config::JobConfig& config, std::int64_t job_id,
                                              const std::string& user, int attempt) {
  std::map<std::string, std::string> labels = config.tpu.labels;
  labels[kJobIdLabel] = domain::format_job_id(job_id);
  labels[kOwnerLabel] = owner_label_value(user);
  labels[kAttemptLabel] = std::to_string(attempt);
  labels[kStoreLabel] = store_label_value(store_location());
  return labels;
}

void add_ssh_key(nlohmann::json& body, const std::string& entry) {
  const auto add = [&entry](nlohmann::json& node) {
    if (!node.is_object()) {
      return;
    }
    auto& metadata = node["metadata"];
    if (!metadata.is_object()) {
      metadata = nlohmann::json::object();
    }
    metadata["ssh-keys"] = with_ssh_keys_entry(metadata.contains("ssh-keys") && metadata["ssh-keys"].is_string()
                                                   ? metadata["ssh-keys"].get<std::string>()
                                                   : std::string(),
                                               entry);
  };
  if (body.contains("tpu") && body["tpu"].is_object() && body["tpu"].contains("nodeSpec") &&
      body["tpu"]["nodeSpec"].is_array()) {
    for (auto& spec : body["tpu"]["nodeSpec"]) {
      if (spec.is_object() && spec.contains("node")) {
        add(spec["node"]);
      }
    }
  } else {
    add(body);
  }
}

std::filesystem::path ssh_identity(const config::JobConfig& config) {
  if (config.ssh && !config.ssh->private_key.empty()) {
    return util::expand_user(config.ssh->private_key);
  }
  return default_ssh_identity();
}

std::string remote_user(const config::JobConfig& config) {
  return config.job.remote_user.empty() ? util::current_user() : config.job.remote_user;
}

nlohmann::json create_request_body(const config::JobConfig& config, const std::string& project, std::int64_t job_id,
                                   const std::string& user, int attempt, const std::string& node_id) {
  const auto& tpu = config.tpu;
  nlohmann::json node = {
      {"acceleratorType", tpu.accelerator.name},
      {"runtimeVersion", tpu.version},
      {"labels", job_labels(config, job_id, user, attempt)},
  };
  if (!tpu.tags.empty()) {
    node["tags"] = tpu.tags;
  }
  auto metadata = nlohmann::json(tpu.metadata);
  if (tpu.startup_script) {
    metadata["startup-script"] = *tpu.startup_script;
  }
  if (!metadata.empty()) {
    node["metadata"] = metadata;
  }
  if (!tpu.network.empty() || !tpu.subnetwork.empty() || tpu.internal_ips) {
    nlohmann::json network = {{"enableExternalIps", !tpu.internal_ips}};
    if (!tpu.network.empty()) {
      network["network"] = tpu.network;
    }
    if (!tpu.subnetwork.empty()) {
      network["subnetwork"] = tpu.subnetwork;
    }
    node["networkConfig"] = network;
  }
  if (!tpu.service_account.empty()) {
    node["serviceAccount"] = {{"email", tpu.service_account}};
  }
  if (tpu.pricing == domain::Pricing::preemptible) {
    node["schedulingConfig"] = {{"preemptible", true}};
  }
  // A reservation only for the tiers it may hold (a job failing over from reserved to spot asks for spot without).
  const bool may_reserve = tpu.pricing == domain::Pricing::reserved || tpu.pricing == domain::Pricing::ondemand;
  if (tpu.reserved && may_reserve) {
    node["schedulingConfig"]["reserved"] = true;
  }
  const std::string parent = "projects/" + project + "/locations/" + tpu.zone;
  const std::string id = node_id.empty() ? resource_id(tpu.name, job_id, attempt) : node_id;
  if (tpu.allocation_mode == config::AllocationMode::tpu_vm) {
    // A node asks for its own pricing: spot or preemptible in schedulingConfig, on-demand by naming neither.
    if (tpu.pricing == domain::Pricing::spot) {
      node["schedulingConfig"]["spot"] = true;
    } else if (tpu.pricing == domain::Pricing::reserved) {
      node["schedulingConfig"]["reserved"] = true;
    }
    return node;
  }
  // One slice is the node `id`; several are nodes id-0 ... id-(N-1), as the TPU API names a multislice request's.
  nlohmann::json spec = {{"parent", parent}};
  if (tpu.slices > 1) {
    spec[cloud::kMultisliceParams] = {{"nodeCount", tpu.slices}, {"nodeIdPrefix", id}};
  } else {
    spec["nodeId"] = id;
  }
  spec["node"] = std::move(node);
  nlohmann::json body = {{"tpu", {{"nodeSpec", nlohmann::json::array({std::move(spec)})}}}};
  // The tier: spot, guaranteed (on-demand, or reserved) or bestEffort; flex-start is a provisioning model with a run
  // duration instead. The last three are v2alpha1's (the client sends them there).
  switch (tpu.pricing) {
  case domain::Pricing::spot: body["spot"] = nlohmann::json::object(); break;
  case domain::Pricing::ondemand: body["guaranteed"] = nlohmann::json::object(); break;
  case domain::Pricing::preemptible: break; // In the node's schedulingConfig.
  case domain::Pricing::flex_start:
    body["provisioningModel"] = "FLEX_START";
    body["runDuration"] = {{"maxRunDuration", std::to_string(tpu.max_run_duration_seconds.value_or(0)) + "s"}};
    break;
  case domain::Pricing::reserved:
    body["provisioningModel"] = "RESERVATION_BOUND";
    body["guaranteed"] = {{"reserved", true}};
    break;
  case domain::Pricing::best_effort: body["bestEffort"] = nlohmann::json::object(); break;
  }
  if (tpu.queue_timeout_seconds) {
    body["queueingPolicy"] = {{"validUntilDuration", std::to_string(*tpu.queue_timeout_seconds) + "s"}};
  }
  if (!tpu.reservation.empty() && may_reserve) {
    // A bare name in full, as gcloud writes it; a full name as it is.
    body["reservationName"] =
        tpu.reservation.find('/') == std::string::npos ? parent + "/reservations/" + tpu.reservation : tpu.reservation;
  }
  if (tpu.slices > 1 && cloud::needs_v2alpha1(body)) {
    // The body goes to v2alpha1, whose NodeSpec calls the same field multiNodeParams.
    auto& first = body["tpu"]["nodeSpec"][0];
    first[cloud::kMultiNodeParams] = std::move(first[cloud::kMultisliceParams]);
    first.erase(cloud::kMultisliceParams);
  }
  return body;
}

std::vector<SetupStep> setup_steps(const config::JobConfig& config) {
  std::vector<SetupStep> steps;
  const std::vector<int> every = all_workers(config);
  if (config.ssh) {
    std::string summary = "install ssh key " + config.ssh->private_key;
    if (!config.ssh->identities.empty()) {
      summary +=
          " and " + std::to_string(config.ssh->identities.size()) + " identities with their ~/.ssh/config entries";
    }
    steps.push_back({"ssh", summary, every});
  }
  if (config.gcsfuse) {
    steps.push_back(
        {"gcsfuse", "mount bucket gs://" + config.gcsfuse->bucket_name + " at " + config.gcsfuse->mount_path, every});
  }
  switch (config.job.env_type) {
  case config::EnvType::venv:
    if (config.venv) {
      steps.push_back({"venv",
                       "create virtualenv " + config.venv->name + " with " + config.venv->python +
                           (config.venv->requirements_file.empty() ? std::string()
                                                                   : " and install " + config.venv->requirements_file),
                       every});
    }
    break;
  case config::EnvType::conda:
    if (config.conda) {
      steps.push_back({"conda",
                       "create conda environment " + config.conda->name +
                           (config.conda->config_file.empty() ? std::string() : " from " + config.conda->config_file),
                       every});
    }
    break;
  case config::EnvType::docker:
    if (config.docker) {
      steps.push_back({"docker", "pull image " + config.docker->image, every});
    }
    break;
  case config::EnvType::none: break;
  }
  if (config.setup) {
    const auto lines = std::count(config.setup->script.begin(), config.setup->script.end(), '\n');
    steps.push_back({"script",
                     "run setup.script (" + std::to_string(lines) + (lines == 1 ? " line" : " lines") +
                         (config.setup->file.empty() ? std::string() : ", from " + config.setup->file) +
                         ") with bash from the home directory, in the job's environment",
                     every});
  }
  const std::vector<int> run_on = config.command.workers.all ? every : config.command.workers.indices;
  steps.push_back({"command",
                   "launch the command detached with JOBMAN_JOB_ID, JOBMAN_ATTEMPT, JOBMAN_RESUME, JOBMAN_WORKER_ID, "
                   "JOBMAN_NUM_WORKERS, JOBMAN_TPU_NAME, JOBMAN_ZONE and JOBMAN_ACCELERATOR set",
                   run_on});
  return steps;
}

nlohmann::json plan_json(const config::JobConfig& config, const std::string& project, const std::string& user) {
  // The id is not known before the job is recorded; the plan shows attempt 1 of a job numbered 0.
  const std::string parent = "projects/" + project + "/locations/" + config.tpu.zone;
  const std::string id = resource_id(config.tpu.name, 0, 1);
  const bool queued = config.tpu.allocation_mode == config::AllocationMode::queued_resources;
  auto body = create_request_body(config, project, 0, user, 1);
  nlohmann::json api = {
      {"method", "POST"},
      {"version", queued && cloud::needs_v2alpha1(body) ? "v2alpha1" : "v2"}, // Where the client sends it.
      {"url", parent + (queued ? "/queuedResources?queuedResourceId=" : "/nodes?nodeId=") + id},
      {"body", std::move(body)},
  };
  nlohmann::json setup = nlohmann::json::array();
  for (const auto& step : setup_steps(config)) {
    setup.push_back({{"module", step.module}, {"summary", step.summary}, {"workers", step.workers}});
  }
  return {{"api", api}, {"setup", setup}};
}

} // namespace jobman::core
