// Job-level operations the commands share: opening the store, recording new jobs, user requests.
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/remote/workload.hpp"
#include "jobman/store/job_store.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace jobman::core {

// The store the settings name (`store`, JOBMAN_STORE): a SQLite file, by default $JOBMAN_HOME/jobman.db, or a
// postgresql:// URL.
std::string store_location();

// Opens (creating if needed) the user's job store.
store::JobStore open_store();

// Which store `location` is, for the files a home keeps of it: "" for the home's own SQLite file
// ($JOBMAN_HOME/jobman.db), else twelve hex digits of a digest of the location (a password in a URL left out).
std::string store_key(const std::string& location);

// Where a home keeps the job directories of the store at `location`: $JOBMAN_HOME/jobs for the home's own SQLite
// store, $JOBMAN_HOME/stores/<store_key>/jobs for any other, so that two stores' job 000001 never share one.
std::filesystem::path jobs_root(const std::string& location);

// Links every file under the job directories in `from` (a jobs_root) into `to`, the same names and layout, copying
// where a hard link cannot be made (another file system); files already in `to` are kept. Returns how many job
// directories it went through. For `store migrate`: the copied store's jobs keep their logs.
std::size_t link_job_directories(const std::filesystem::path& from, const std::filesystem::path& to);

// jobs_root(store_location())/<id>: where a job's logs and local state live.
std::filesystem::path job_directory(std::int64_t id);

// Removes the job's directory. Another process removing it at the same time (a supervisor and `clean` both carrying
// out a clean) is not an error; throws jobman::Error when it cannot be removed.
void remove_job_directory(std::int64_t id);

// $JOBMAN_HOME/jobs/<id>/attempt-<n>: one attempt's setup-<w>.log and worker-<w>.log files.
std::filesystem::path attempt_directory(std::int64_t id, int attempt);

// The attempt's workload on the workers (remote files under ~/.jobman/jobs/<id>/attempt-<n>).
remote::WorkloadId workload_id(std::int64_t id, int attempt);

// The row `create` records for a resolved config.
domain::NewJob to_new_job(const config::JobConfig& config, const std::string& user);

// Records one job per resolved config (the members of a sweep together, in one transaction) for `user`; returns their
// ids in the configs' order. The one way jobs are created.
std::vector<std::int64_t> create_jobs(store::JobStore& store, const std::vector<config::JobConfig>& configs,
                                      const std::string& user);

// Records `rows` (each made from the config at the same position, by to_new_job and then adjusted: a worker, a task)
// in one transaction, with the values of the environment variables each config read; returns their ids.
std::vector<std::int64_t> record_jobs(store::JobStore& store, const std::vector<config::JobConfig>& configs,
                                      const std::vector<domain::NewJob>& rows);

// "lr=0.1,bs=32" for a sweep member; empty otherwise.
std::string sweep_label(const config::JobConfig& config);

// The config recorded when the job was created (`job` read with its config), its ${oc.env:...} calls kept (see
// expand_recorded_environment). Throws ConfigError when the snapshot no longer parses.
config::JobConfig recorded_config(const domain::JobRecord& job);

// The values of the environment variables a job's recorded config calls for (${oc.env:NAME}), as read when it
// was created: $JOBMAN_HOME/jobs/<id>/environment, mode 0600, never the store. Saving none writes nothing.
void save_job_environment(std::int64_t id, const std::map<std::string, std::string>& values);
std::map<std::string, std::string> job_environment(std::int64_t id);

// Puts into job `id`'s recorded config the values its ${oc.env:...} calls read: those recorded at create, then this
// process's environment, then the calls' defaults. Returns the variables that have none.
std::vector<std::string> expand_recorded_environment(std::int64_t id, config::JobConfig& config);

// What a user asks of an existing job.
enum class Request { resume, cancel, remove, clean };

// "resume", "cancel", "delete", "clean".
std::string_view to_string(Request request);

// What became of one request.
struct RequestOutcome {
  std::int64_t id = 0;
  bool changed = false; // False when the job was already where the request leads.
  bool done = false;    // True when nothing is left for the supervisor to do.
  std::string message;  // One line for people: "cancelled", "cancel requested", ...
  std::string status;   // The job's phase afterwards ("" once removed).
};

// Records `request` for job `id` as its desired state. Where the job has nothing in the cloud yet
// (no attempt started), the request is carried out at once; otherwise the supervisor reads the
// desired state and makes the cloud match it. Throws domain::NoSuchJobError, or Error when the request
// makes no sense for the job (resuming a job that succeeded).
RequestOutcome apply_request(store::JobStore& store, std::int64_t id, Request request);

} // namespace jobman::core
