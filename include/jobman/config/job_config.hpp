// The validated, fully resolved job configuration (the Python jobman's YAML layout plus jobman's own sections).
#pragma once

#include "jobman/config/accelerator.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/util/error.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::config {

// How the slice is paid for: the domain's type (jobman/domain/pricing.hpp), with its one parser.
using domain::Pricing;

// How the slice is requested: queued resources (the default) or a plain TPU VM create.
enum class AllocationMode { queued_resources, tpu_vm };
// The environment the command runs in on each worker.
enum class EnvType { none, venv, conda, docker };

// The order candidates are tried in: by what the store learned of them (time to ACTIVE, preemptions), or as written.
enum class CandidateOrder { learned, as_written };
// How candidates are asked: one after another (each for tpu.queue_timeout), or all at once, keeping the first to come
// up.
enum class CandidateStrategy { sequential, first_ready };

// Lower-case names as written in configs: "queued-resources", "docker"...
std::string to_string(AllocationMode value);
std::string to_string(EnvType value);
std::string to_string(CandidateOrder value);
std::string to_string(CandidateStrategy value);

// Which worker hosts run the command: all of them, or the listed indices.
struct WorkerSelection {
  bool all = true;
  std::vector<int> indices; // Ascending, distinct, each < the slice's host count. Empty when all.
  // "all" or "0,2,3", the form gcloud's --worker takes.
  [[nodiscard]] std::string to_gcloud() const;
};

// What job.progress is when a config leaves it out: "step=611", "step: 611", "global_step 611", "Step 611/2000",
// "step=611 of 2000" (the total when one is given).
const std::string& default_progress_pattern();

// What job.loss is when a config leaves it out: "loss=2.31", "loss: 2.31e-01", "train_loss 2.3", "loss=nan": the
// first group that holds a number (or nan, inf) gives the loss of the step on the same line.
const std::string& default_loss_pattern();

// `job:` — the job's identity and environment choice.
struct JobSection {
  std::string name;
  EnvType env_type = EnvType::none;
  bool loop = true;        // The Python jobman's "keep going after preemption"; false means no preemption budget.
  std::string remote_user; // User on the worker hosts; empty means gcloud's default.
  // How training progress reads in the workers' output (util::ProgressPattern); empty: not read.
  std::string progress = default_progress_pattern();
  // How the loss reads on a step line (util::LossPattern), for recovery.loss_spike; empty: not read.
  std::string loss = default_loss_pattern();
  // The experiment the job is a run of, for comparing runs (report --compare); empty: its name without a sweep's
  // suffix.
  std::string experiment;
};

// `tpu:` — the slice.
struct TpuSection {
  AllocationMode allocation_mode = AllocationMode::queued_resources;
  AcceleratorType accelerator; // The first of `accelerators`.
  std::string name;            // Name prefix for the queued resource and node.
  std::string zone;            // The first of `zones`.
  std::string version;         // Runtime version, e.g. "tpu-ubuntu2204-base".
  // Where a slice may come from: tpu.zone and tpu.accelerator may each be a list (equivalent accelerators, zones to
  // fail over to); one entry each otherwise.
  std::vector<std::string> zones;
  std::vector<AcceleratorType> accelerators;
  bool version_given = false; // tpu.version was written; else each accelerator runs its generation's usual runtime.
  CandidateOrder order = CandidateOrder::learned;
  CandidateStrategy strategy = CandidateStrategy::sequential;
  Pricing pricing = Pricing::spot; // The first of `pricings`.
  // tpu.pricing as a list: the tiers (provisioning models) a slice may come in, in the order written; one entry for a
  // single value. Each is a candidate's tier of its own.
  std::vector<Pricing> pricings{Pricing::spot};
  std::optional<std::string> startup_script; // Script text or path, sent as metadata startup-script.
  std::vector<std::string> tags;             // Network tags on the node.
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::string> labels;      // Extra labels on the node (jobman adds its own).
  std::vector<std::string> flags;                 // Extra gcloud flags, passed through where gcloud is used.
  std::optional<long long> queue_timeout_seconds; // queueingPolicy.validUntilDuration.
  std::string network;                            // networkConfig.network; empty for the default.
  std::string subnetwork;                         // networkConfig.subnetwork; empty for the default.
  std::string service_account;                    // serviceAccount.email; empty for the default.
  std::string reservation;                        // reservationName; empty for none.
  // How long a flex-start slice runs before the cloud ends it (runDuration.maxRunDuration): required with flex-start,
  // at most kMaxRunDurationSeconds; nullopt otherwise.
  std::optional<long long> max_run_duration_seconds;
  // tpu.slices: how many identical slices of `accelerator` the job runs on at once (multislice, over the data-center
  // network): one queued resource whose nodeSpec asks for them all (multisliceParams, or multiNodeParams through
  // v2alpha1), nodes named NODE-0 ... NODE-(slices-1). 1: one slice, one node.
  int slices = 1;
  bool keep_on_success = false; // Keep the slice after the job succeeds.
  // A worker's slice is released after this long without a task, and asked for again when a task for it is queued.
  // Jobs and tasks, which hold a slice only while they run, have no use for it.
  std::optional<long long> idle_release_seconds;
  // A command run on every worker host after setup, before the command is launched: a non-zero exit says the host's
  // hardware is bad, and the slice is replaced. Empty: none.
  std::string preflight;
  bool reserved = false;     // Use reserved capacity (schedulingConfig.reserved; gcloud's --reserved).
  bool internal_ips = false; // No external IPs (networkConfig.enableExternalIps false; gcloud's --internal-ips).
  // Where "accelerator", "zone", "version", "pricing", "reserved" and "reservation" were given (or, for a default,
  // the tpu section; for the last two, the tpu.flags that set them), for the checks made after loading against what
  // the cloud offers.
  std::map<std::string, SourceLocation> origins;
};

// `gcsfuse:` — a bucket mounted on every worker.
struct GcsfuseSection {
  std::string bucket_name;
  std::string mount_path;
  std::vector<std::string> flags; // Extra gcsfuse flags.
  // How many GB one epoch reads through the mount (gcsfuse.expected_read_gb), for the cost of reading it from another
  // region; nullopt when not given.
  std::optional<double> expected_read_gb;
  // Where bucket_name was given, for the warnings about where the bucket is.
  SourceLocation bucket_origin;

  // The port the mount's gcsfuse serves its metrics on (what it read, for the cost of reading across regions): the
  // --prometheus-port among `flags` (0 turns them off), else kGcsfuseMetricsPort, which the setup then adds.
  [[nodiscard]] int metrics_port() const;
  // Whether `flags` name a --prometheus-port of their own.
  [[nodiscard]] bool flags_name_metrics_port() const;
};

// The port jobman has gcsfuse serve its metrics on when the config's flags name none.
inline constexpr int kGcsfuseMetricsPort = 9447;

// One extra ssh identity installed on the workers.
struct SshIdentity {
  std::string private_key;
  std::string public_key;
  std::string config_entry; // Appended to ~/.ssh/config once.
};

// `ssh:` — keys for reaching the workers and for the workers to reach others.
struct SshSection {
  std::string private_key;
  std::vector<SshIdentity> identities;
};

// `docker:` — run the command inside a container.
struct DockerSection {
  std::string image;
  std::vector<std::string> flags;
  std::vector<std::string> env_vars;   // "KEY=value", passed as --env.
  std::vector<std::string> mount_dirs; // Host paths mounted at the same path.
  std::string workdir;
};

// `conda:` — an environment created from a file.
struct CondaSection {
  std::string name;
  std::string config_file;
};

// `venv:` — a virtualenv with requirements.
struct VenvSection {
  std::string name;
  std::string requirements_file;
  std::string python; // "3.10" or "python3.10".
};

// `remote:` — how jobman reaches the worker hosts.
struct RemoteSection {
  // Connect to the hosts' internal addresses even where they have external ones (gcloud's --internal-ip): from a
  // machine inside the VPC, or through a bastion host the user's ~/.ssh/config names.
  bool internal_ip = false;
};

// `setup:` — jobman's own: a bootstrap script run on every worker after the environment is set up, before the command.
struct SetupSection {
  // The script's text, ending with a newline. A config may give the text or the path of a local file (relative to
  // the config's directory); the file is read when the config is loaded, so a job keeps the text it was created with.
  std::string script;
  std::string file; // The file the script was read from, absolute; empty when the config holds the text.
};

// `command:` — what runs.
struct CommandSection {
  std::string cmd;
  WorkerSelection workers;
};

// `recovery:` — what happens when an attempt ends without success.
struct RecoverySection {
  std::optional<int> max_preemptions;      // nullopt: unlimited.
  int max_failures = 0;                    // Real failures tolerated before FAILED.
  std::vector<int> restart_exit_codes{42}; // Exit codes that mean "restart me" without spending the failure budget.
  long long poll_interval_seconds = 30;    // Supervisor tick for this job.
  long long backoff_initial_seconds = 10;  // Wait before the first retry of a failed step.
  long long backoff_max_seconds = 600;     // Upper bound of the wait.
  double backoff_multiplier = 2.0;
  int max_bad_hardware = 3; // Slices found bad (NaN loss, a failed preflight) tolerated before FAILED.
  // How long before a maintenance window its node announces the job leaves the slice (checkpointing on SIGTERM).
  long long maintenance_lead_seconds = 600;
  // How long before a flex-start slice's run ends (its terminationTime) the workload is stopped (SIGTERM, so that it
  // checkpoints).
  long long deadline_lead_seconds = 300;
  // How many flex-start runs the job may have (each asks for a slice again when the previous one's run ended); nullopt:
  // unlimited.
  std::optional<int> max_runs;
  // recovery.fallback: spot (or preemptible) capacity given up for on-demand after this many preemptions, or after
  // waiting this long for a slice; neither set: no fallback.
  std::optional<int> fallback_after_preemptions;
  std::optional<long long> fallback_after_waiting_seconds;
  // The extended regular expressions (case-insensitive) whose match in a worker's output means bad hardware, as
  // written: the entry "default" stands for default_bad_hardware_patterns(); an empty list turns the check off.
  std::vector<std::string> bad_hardware{"default"};
  // How long (real seconds, never scaled) an attempt may run with no new line of output from any worker before it is
  // judged stalled; 0: never.
  long long stall_timeout_seconds = 30LL * 60;
  // How long the wait for an attempt's first line may be (a compile), when longer than stall_timeout.
  long long stall_first_line_seconds = 60LL * 60;
  // recovery.loss_spike: a step whose loss exceeds `factor` times the median of the last `window` steps' losses is
  // a spike, once the step is at least `min_steps`; the attempt is stopped and the job resumes from before it, at
  // most `max_rollbacks` times, skipping the data of `skip_steps` steps. nullopt: off.
  struct LossSpike {
    double factor = 3;
    int window = 100;
    long long min_steps = 0;
    int max_rollbacks = 3;
    long long skip_steps = 0;
  };
  std::optional<LossSpike> loss_spike;
};

struct JobConfig;

// The longest run duration a flex-start request may ask for: 7 days.
inline constexpr long long kMaxRunDurationSeconds = 7LL * 24 * 3600;
// The most slices tpu.slices may ask for in one queued resource: beyond the 199 slices of the largest multislice runs
// published, and small enough that chips times slices never overflows (the checks against the zone refuse what it
// could never hold).
inline constexpr int kMaxSlices = 256;

// One place a slice may come from.
struct Candidate {
  std::string zone;
  AcceleratorType accelerator;
  Pricing pricing = Pricing::spot;
  // "v4-32 spot in us-central2-b".
  [[nodiscard]] std::string label() const;
};

// The config's candidates at `pricing`, as written: each accelerator in every zone, accelerator by accelerator. (A
// pair the zone does not offer is the cloud's to refuse: jobman's catalog of zones is advisory.)
std::vector<Candidate> candidates(const JobConfig& config, Pricing pricing);
// The config's candidates at every pricing of tpu.pricing, pricing by pricing in the order written.
std::vector<Candidate> candidates(const JobConfig& config);

// The config as it asks for `candidate`: its zone, accelerator, pricing and runtime version in place of the first.
JobConfig candidate_config(const JobConfig& config, const Candidate& candidate);

// The patterns `recovery.bad_hardware: [default]` stands for: a non-finite loss on a step line, and the messages
// JAX, TensorFlow and PyTorch print for non-finite values.
const std::vector<std::string>& default_bad_hardware_patterns();

// The patterns a recovery section asks for, "default" expanded.
std::vector<std::string> bad_hardware_patterns(const RecoverySection& recovery);

// The Python jobman's `brevo_email:`: e-mail through Brevo when the job begins, ends or fails.
struct EmailSection {
  std::string api_key;
  std::string sender;
  std::string receiver;
  [[nodiscard]] bool enabled() const { return !api_key.empty() && !receiver.empty(); }
};

// A plain SMTP server for `notify.smtp`.
struct SmtpSection {
  std::string url;  // smtp://host:port (STARTTLS when offered) or smtps://host:port.
  std::string from; // The sender address.
  std::vector<std::string> to;
  std::string username; // Empty: no login.
  std::string password; // A secret: written as ${oc.env:...}, the snapshot keeps the call.
};

// When a notification goes out: the first launch (BEGIN), success (END), the job or task failing for good (FAIL).
enum class NotifyEvent { begin, end, fail };

// "BEGIN", "END", "FAIL".
std::string to_string(NotifyEvent event);

// `notify:` — who hears about the job, and when. `#JOBMAN --mail-user/--mail-type` write mail_to and events.
struct NotifySection {
  std::vector<NotifyEvent> events{NotifyEvent::end, NotifyEvent::fail}; // In the order BEGIN, END, FAIL.
  std::vector<std::string> mail_to; // Addresses mailed through Brevo (the key: brevo_email, the environment, settings).
  std::vector<std::string> webhooks; // Slack-compatible URLs (secrets: write them as ${oc.env:...}).
  std::optional<SmtpSection> smtp;
  std::string brevo_config; // jobman-lite's .jobman_brevo.json (api_key, sender_email), read when sending; "" none.
};

// A non-fatal remark about the config (a key jobman reads but cannot honour, an unusual zone).
struct ConfigWarning {
  SourceLocation where;
  std::string message;
};

// A complete job description, every `${...}` resolved and every value checked.
struct JobConfig {
  std::string source_path; // The file it came from ("" for a string).
  JobSection job;
  TpuSection tpu;
  std::optional<GcsfuseSection> gcsfuse;
  std::optional<SshSection> ssh;
  std::optional<DockerSection> docker;
  std::optional<CondaSection> conda;
  std::optional<VenvSection> venv;
  std::optional<SetupSection> setup;
  std::optional<RemoteSection> remote;
  CommandSection command;
  RecoverySection recovery;
  std::optional<EmailSection> email;
  std::optional<NotifySection> notify;
  std::map<std::string, std::string> vars;        // `vars:` — free user variables for ${vars.x}.
  std::map<std::string, std::string> sweep_point; // key path -> value for a sweep member; empty otherwise.
  std::vector<ConfigWarning> warnings;
  // The resolved document, as snapshotted into the store. In the keys whose values reach the workers or the node
  // as written (command.cmd, docker.env_vars and docker.flags, tpu.metadata and tpu.startup_script, setup.script
  // written in the config, vars), an ${oc.env:...} call stays a call, so that a secret read from the environment is
  // never stored.
  std::string resolved_yaml;
  // The values those calls read now, by variable: kept beside the job, out of the store, for its launches.
  std::map<std::string, std::string> environment;
  // In a recorded config (LoadOptions::recorded): the calls as written, which markers in those keys stand for
  // until expand_environment puts in their values.
  std::vector<std::string> environment_calls;
};

} // namespace jobman::config
