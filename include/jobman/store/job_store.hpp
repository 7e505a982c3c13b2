// The job store: jobs, attempts, events and leases (the domain model, jobman/domain/job.hpp) in SQLite (WAL), shaped
// for the supervisor.
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/util/error.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::store {

// Which jobs `list` wants.
struct JobFilter {
  bool include_history = false; // false: unfinished jobs plus those finished within `recent_ms`.
  std::int64_t recent_ms = 24LL * 3600 * 1000;
  std::int64_t now_ms = 0;            // Reference time for `recent_ms`; 0 means the clock.
  std::vector<domain::Phase> phases;  // Empty: any phase.
  std::string name_glob;              // Empty: any name.
  std::string user;                   // Empty: any user.
  std::vector<domain::JobKind> kinds; // Empty: any kind.
  bool with_config = false;           // Fill JobRecord::config_yaml.
};

// The tasks `status` shows by default (JobStore::task_board).
struct TaskBoard {
  // In id order, each with its place (1-based) among all the tasks `status` lists: unfinished ones and those finished
  // within a day. That place is the `#` the task commands resolve.
  std::vector<std::pair<std::size_t, domain::JobRecord>> shown;
  std::int64_t queued = 0; // Tasks waiting in the queue, shown or not.
  std::int64_t queued_shown = 0;
};

// What a worker offers the queue: its slice, and what a task may ask of it.
struct WorkerOffer {
  std::int64_t worker_id = 0;
  std::string accelerator;     // A task runs on a worker of its accelerator only.
  std::string zone;            // And of its zone, when it names one.
  std::string pricing;         // And of its pricing, when it names one.
  domain::Placement placement; // The worker's slice (its current attempt's), which the task's attempt borrows.
};

// What one zone of a cloud offers, as its catalog methods last answered.
struct ZoneCatalog {
  std::string endpoint;                       // The API's base URL: the mock's and Google's answers are kept apart.
  std::string project;                        // The project asked.
  std::string zone;                           // "us-central2-b".
  std::vector<std::string> accelerator_types; // acceleratorTypes.list: "v4-8", ...
  std::vector<std::string> runtime_versions;  // runtimeVersions.list: "tpu-ubuntu2204-base", ...
  std::int64_t fetched_ms = 0;                // When the cloud answered.
};

// A slice an attempt still holds (its release not confirmed): the names it gives its queued resource and node.
struct HeldSlice {
  std::int64_t job_id = 0;
  int attempt = 0;             // The attempt's number.
  std::string queued_resource; // Empty for a node created without one (tpu-vm mode).
  std::string node;            // The node's name.
  std::string zone;            // Where the attempt runs.
};

// One attempt as `jobman availability` reads it: where its slice was asked for, when, and how it went.
struct PlaceRecord {
  std::string zone;
  std::string accelerator;
  std::string pricing;
  domain::AttemptOutcome outcome = domain::AttemptOutcome::none; // As AttemptRecord::outcome.
  std::int64_t started_ms = 0;
  std::optional<std::int64_t> active_ms;
  std::optional<std::int64_t> ended_ms;
};

// The progress of one attempt, as a supervisor records it.
struct ProgressUpdate {
  std::int64_t job_id = 0;
  int attempt = 0;
  domain::ProgressSeries series;     // The attempt's whole series (it replaces what is stored).
  std::optional<std::int64_t> total; // The total steps, when the output gave one.
};

// What changed in the jobs after a change number a watcher saw (JobStore::job_changes).
struct JobChanges {
  std::int64_t cursor = 0;             // The newest change in these; pass it back for the next ones.
  std::vector<domain::JobRecord> jobs; // Created or changed, each once and as it is now, in change order.
  std::vector<std::int64_t> removed;   // Removed from the store.
  bool complete = true;                // false: removals older than the kept ones may be missing (reload).
};

// A notification to send: one event of one attempt of a job, through one channel, to one recipient.
struct Notification {
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  int attempt = 0;
  std::string event;   // "BEGIN", "END", "FAIL".
  std::string channel; // "brevo", "webhook" or "smtp".
  std::string target;  // The address (brevo), the webhook's index in notify.webhooks, "" (smtp: its own list).
  int tries = 0;       // Sends tried so far, this claim's included.
};

// The store: SQLite (a file, the default) or PostgreSQL (a server a lab shares), one interface and one schema. One
// per process; not shared between threads.
// A write refused because the job changed under the writer: a user cancelled, deleted or cleaned it, or it ended,
// since the writer last read it. The writer reads it again and decides anew.
class JobChangedError : public Error {
public:
  using Error::Error;
};

// Slices counted for fair share: how many of `user`'s records of `kind` hold or ask for a slice of `accelerator` in
// `pricing` (their current attempt's), as JobStore::slices_in_flight reads them. A task's is its worker's slice.
struct SliceUse {
  std::string user;
  domain::JobKind kind = domain::JobKind::job;
  std::string accelerator;
  std::string pricing;
  int count = 0;
};

// A lab's fair share of chips, which the store applies inside the transactions that hand chips out (claim_task, and
// begin_attempt for a new slice), so that supervisors deciding at once never overshoot it. core::FairShare is the one.
class SharePolicy {
public:
  SharePolicy() = default;
  SharePolicy(const SharePolicy&) = delete;
  SharePolicy& operator=(const SharePolicy&) = delete;
  virtual ~SharePolicy() = default;
  // Whether any share or cap is set; without one, and with one user waiting, the store reads nothing more.
  [[nodiscard]] virtual bool limits_anything() const = 0;
  // Why `user`'s record of `kind` may not take a slice of `accelerator` in `pricing` now, "" when it may: a job or a
  // worker asks the cloud for a slice of its own, a task borrows a worker's.
  [[nodiscard]] virtual std::string refusal(const std::vector<SliceUse>& in_flight, const std::string& user,
                                            domain::JobKind kind, const std::string& accelerator,
                                            const std::string& pricing) const = 0;
  // Of `users`, each with tasks waiting for a worker's slice of `accelerator` in `pricing` (in the order their first
  // task was queued), those who may claim it, in the order they claim: the fewest chips in flight first.
  [[nodiscard]] virtual std::vector<std::string> claim_order(const std::vector<SliceUse>& in_flight,
                                                             const std::vector<std::string>& users,
                                                             const std::string& accelerator,
                                                             const std::string& pricing) const = 0;
};

// An attempt refused by the fair share (SharePolicy::refusal, which the message gives): the job waits for chips to
// come free, asking the cloud for nothing.
class ShareExceededError : public Error {
public:
  using Error::Error;
};

// A live lease with the state of the record it covers (JobStore::live_leases).
struct LiveLease {
  std::int64_t job_id = 0;
  std::string owner;
  domain::Phase phase = domain::Phase::pending;
  bool cleanup_pending = false; // A finished record whose slice is still being released.
};

// What JobStore::copy_into did.
struct StoreCopy {
  enum class Into {
    empty,  // The target was empty: everything was copied.
    behind, // The target was an earlier copy of the source: what changed since was brought over.
    ahead,  // The target was a copy of the source used since: only rows it lacked were added (none, usually).
  };
  Into into = Into::empty;
  std::int64_t jobs = 0;                                     // Jobs in the source.
  std::int64_t events = 0;                                   // Events in the source.
  std::vector<std::pair<std::string, std::int64_t>> written; // Rows inserted or updated, by table.
  std::int64_t removed = 0; // Jobs the source removed since the earlier copy, removed from the target too.
  std::string user;         // Whose the source's own jobs are on the target.
};

class JobStore {
public:
  // Opens (creating and migrating) the database at `path`; the file gets mode 0600, its directory 0700.
  static JobStore open(const std::filesystem::path& path);
  // Connects to the PostgreSQL store at `url` (a libpq URI), creating its tables in an empty database (or schema).
  static JobStore open_postgres(const std::string& url);
  // open_postgres for a "postgresql://" location, open for anything else (a path).
  static JobStore open_location(const std::string& location);
  // An in-memory store, for tests.
  static JobStore open_in_memory();

  JobStore(JobStore&&) noexcept;
  JobStore& operator=(JobStore&&) noexcept;
  ~JobStore();

  // The schema version this code writes (PRAGMA user_version after migration).
  static int current_schema_version();
  // The database's schema version (SQLite's PRAGMA user_version, the jobman_schema table on PostgreSQL).
  [[nodiscard]] int schema_version() const;
  // Which database holds the store.
  [[nodiscard]] bool on_postgres() const;
  // The store's clock, in milliseconds since the epoch: the server's for PostgreSQL (supervisors on machines whose
  // clocks differ agree on leases), this machine's for SQLite.
  [[nodiscard]] std::int64_t clock_ms() const;

  // Records new jobs in one transaction; returns their ids (ascending, never reused). `before_commit`, when given,
  // gets the ids while the jobs are still invisible to others; when it throws, nothing is recorded.
  std::vector<std::int64_t>
  create_jobs(const std::vector<domain::NewJob>& jobs,
              const std::function<void(const std::vector<std::int64_t>&)>& before_commit = {});

  // The job, or nullopt.
  [[nodiscard]] std::optional<domain::JobRecord> find_job(std::int64_t id, bool with_config = false) const;
  // The job; throws NoSuchJobError ("no job 000042") when absent.
  [[nodiscard]] domain::JobRecord get_job(std::int64_t id, bool with_config = false) const;
  // Calls `fn` for each matching job in id order, streaming from SQLite. `fn` may read the store but must not
  // write to it (the open read snapshot makes such writes fail once another process has written); to act on
  // jobs, collect them with list_jobs first.
  void for_each_job(const JobFilter& filter, const std::function<void(const domain::JobRecord&)>& fn) const;
  // Collects for_each_job.
  [[nodiscard]] std::vector<domain::JobRecord> list_jobs(const JobFilter& filter) const;
  // for_each_job in one read snapshot; returns that snapshot's change cursor, for job_changes to go on from.
  std::int64_t for_each_job_with_cursor(const JobFilter& filter,
                                        const std::function<void(const domain::JobRecord&)>& fn) const;
  // The number of the newest change to any job (0 before any).
  [[nodiscard]] std::int64_t change_cursor() const;
  // What changed after change `cursor`: one query over two indexes, however many jobs the store holds.
  [[nodiscard]] JobChanges job_changes(std::int64_t cursor) const;

  // Records what the user wants, with an event; returns the updated job.
  domain::JobRecord set_desired_state(std::int64_t id, domain::DesiredState desired, const std::string& reason);
  // Moves the job to `change.to` if it is in `expected` (any phase when nullopt), with an event.
  // Returns false, changing nothing, when the phase was not `expected`.
  bool transition(std::int64_t id, std::optional<domain::Phase> expected, const domain::PhaseChange& change);

  // Records what a listing said of the job's slice (JobRecord::slice_state) with an `observation` event.
  void record_observation(std::int64_t job_id, std::string_view state, std::string_view message,
                          std::string_view data_json);
  // Appends an event.
  void append_event(std::int64_t job_id, std::string_view kind, std::string_view message,
                    std::string_view data_json = {});
  // The job's events, oldest first.
  [[nodiscard]] std::vector<domain::EventRecord> events(std::int64_t job_id) const;

  // Starts the job's next attempt (jobs.attempt + 1) with an event, clearing the last attempt's host0_ip and
  // exit_code; returns it. With `create_pending`, its queued resource is about to be requested (confirm_created()
  // records that the API accepted it), and a fair share set (set_share_policy) may refuse it: ShareExceededError,
  // changing nothing. Throws JobChangedError when the job ended or its desired state is no longer run.
  domain::AttemptRecord begin_attempt(std::int64_t job_id, const domain::Placement& where, bool create_pending = false);
  // begin_attempt on the job's accelerator and hosts.
  domain::AttemptRecord begin_attempt(std::int64_t job_id, const std::string& queued_resource, const std::string& node,
                                      const std::string& zone, bool create_pending = false);
  // begin_attempt (with create_pending) on `where`, and `rivals` requested alongside it, in one transaction
  // (tpu.strategy: first-ready). Each rival's queued resource and node are named by its Placement::queued_resource.
  domain::AttemptRecord begin_race(std::int64_t job_id, const domain::Placement& where,
                                   const std::vector<domain::Placement>& rivals);
  // The job's rivals (every attempt's, `attempt`'s only when given), by attempt then request.
  [[nodiscard]] std::vector<domain::RivalRecord> rivals(std::int64_t job_id, std::optional<int> attempt = {}) const;
  // Records that the API accepted the request for rival `name`. Repeating it changes nothing.
  void confirm_rival_created(std::int64_t job_id, const std::string& name);
  // Rival `name` came up first: it becomes attempt `number`'s slice, and the attempt's slice until now becomes a rival
  // (to be deleted) with `outcome`, in one transaction with an event saying `why`.
  void promote_rival(std::int64_t job_id, int number, const std::string& name, domain::RivalOutcome outcome,
                     const std::string& why);
  // Sets the outcome of a rival still racing (why it leaves the race: outrun, lost, abandoned).
  void end_rival(std::int64_t job_id, const std::string& name, domain::RivalOutcome outcome);
  // Records that the API accepted the request for attempt `number`'s queued resource. Repeating it changes nothing.
  void confirm_created(std::int64_t job_id, int number);
  // Closes an attempt with its outcome.
  void end_attempt(std::int64_t job_id, int number, domain::AttemptOutcome outcome, std::optional<int> exit_code);
  // The job's attempts, oldest first.
  [[nodiscard]] std::vector<domain::AttemptRecord> attempts(std::int64_t job_id) const;
  // Records that `slice` (a queued resource and its node, or a node without one in tpu-vm mode; see
  // AttemptRecord::slice_name) is gone, on every attempt that used it (or on the rival of that name), with an event
  // saying `how`. Repeating it changes nothing.
  void mark_released(std::int64_t job_id, const std::string& slice, const std::string& how);
  // Every slice an attempt or a rival holds: those whose released_ms is null, the names recorded before their request
  // left (one scan of a partial index each).
  [[nodiscard]] std::vector<HeldSlice> held_slices() const;
  // Every zone a job, an attempt or a rival names, sorted, without duplicates.
  [[nodiscard]] std::vector<std::string> zones_in_use() const;
  // Attempt `number`'s slice came up: records when (the first time only), and the physical machine of each of its
  // worker hosts, by worker (empty entries, or none at all, when the cloud did not say).
  void record_slice_active(std::int64_t job_id, int number, const std::vector<std::string>& physical_hosts);
  // Remembers a finding of bad hardware (its id and time are set here), with an event on the job.
  void record_bad_hardware(const domain::BadHardwareRecord& finding);
  // The findings on any of `hosts` (physical machines) since `since_ms`, newest first.
  [[nodiscard]] std::vector<domain::BadHardwareRecord> bad_hardware_on(const std::vector<std::string>& hosts,
                                                                       std::int64_t since_ms) const;
  // The attempts that asked for a slice of their own (not tasks', which borrow one) started since `since_ms`, every
  // job's (removed jobs' too, as remove_job kept them), in `zone` and of `accelerator` when given (empty: all).
  [[nodiscard]] std::vector<PlaceRecord> attempts_since(std::int64_t since_ms, const std::string& zone = {},
                                                        const std::string& accelerator = {}) const;
  // A job's findings, oldest first.
  [[nodiscard]] std::vector<domain::BadHardwareRecord> bad_hardware_of(std::int64_t job_id) const;
  // Records the progress of attempts in one transaction: each attempt's series, and on its job, when it is the job's
  // current attempt, the latest step, the total when given, and when.
  void record_progress(const std::vector<ProgressUpdate>& updates);
  // Calls `fn` with every phase change of the jobs whose ids are in [first, last], by job, oldest first (one range
  // scan of a partial index), without its message.
  void for_each_phase_change(std::int64_t first, std::int64_t last,
                             const std::function<void(const domain::EventRecord&)>& fn) const;
  // Calls `fn` with every attempt of the jobs whose ids are in [first, last], by job and number.
  void for_each_attempt(std::int64_t first, std::int64_t last,
                        const std::function<void(const domain::AttemptRecord&)>& fn) const;
  // The attempts of tasks that borrowed `worker_id`'s slice, oldest first.
  [[nodiscard]] std::vector<domain::AttemptRecord> attempts_on_worker(std::int64_t worker_id) const;
  // Sets or clears JobRecord::cleanup_pending.
  void set_cleanup_pending(std::int64_t job_id, bool pending);

  // The jobs a supervisor has work on, by id: unfinished ones, finished ones with cleanup pending, and delete or
  // clean requests not yet carried out.
  [[nodiscard]] std::vector<domain::JobRecord> jobs_to_drive(bool with_config = false) const;
  // Those of them `owner` may drive at `now_ms`: no other owner's lease on them is live. One query, however many
  // jobs other supervisors drive (a supervisor reads this every second).
  [[nodiscard]] std::vector<domain::JobRecord> jobs_to_drive_by(const std::string& owner, std::int64_t now_ms) const;
  // The zones of the jobs, workers and tasks other owners hold a live lease on at `now_ms`: where another supervisor
  // already lists the cloud, so that a supervisor may leave that zone's new records to it.
  [[nodiscard]] std::set<std::string> zones_driven_by_others(const std::string& owner, std::int64_t now_ms) const;

  // How many jobs of jobs_to_drive() no live lease covers at `now_ms` (none taken, or expired): jobs nobody drives.
  // Three index scans and a lease lookup per such job; cheap enough for `list` to ask every time.
  [[nodiscard]] int count_undriven_jobs(std::int64_t now_ms) const;

  // Claims the first queued task `worker` can run (highest priority first, then queue order) in one transaction: the
  // task moves to SETUP naming the worker, its next attempt begins on the worker's slice, and `owner` takes its lease.
  // With a fair share set (set_share_policy), users take turns as SharePolicy::claim_order says, and priority orders
  // each user's own tasks. nullopt, changing nothing, when no task matches or the worker holds one already. Two
  // supervisors claiming at once never get the same task, and a worker never holds two (the tasks_on_worker index).
  std::optional<std::int64_t> claim_task(const WorkerOffer& worker, const std::string& owner, std::int64_t ttl_ms,
                                         std::int64_t now_ms);
  // The task `worker` would claim now (the queue's first that it can run), changing nothing.
  [[nodiscard]] std::optional<std::int64_t> first_task_for(const WorkerOffer& worker) const;
  // The tasks `status` lists, but of those waiting in the queue only the `head` that would run first (priority, then
  // queue order): every running, paused or recently finished task, and a count of the rest of the queue. Reads ids
  // only for the tasks it leaves out.
  [[nodiscard]] TaskBoard task_board(std::size_t head, std::int64_t now_ms) const;
  // The task that holds the worker's slice now, if any.
  [[nodiscard]] std::optional<std::int64_t> task_of_worker(std::int64_t worker_id) const;
  // How many tasks wait in the queue.
  [[nodiscard]] std::int64_t queued_tasks() const;

  // Records notifications to send for `job_id`'s `attempt` and `event`, one per (channel, target); one already recorded
  // is not recorded twice.
  void enqueue_notifications(std::int64_t job_id, int attempt, const std::string& event,
                             const std::vector<std::pair<std::string, std::string>>& recipients, std::int64_t now_ms);
  // Takes up to `limit` notifications due at `now_ms` for sending: each is moved `retry_ms << tries` into the future
  // first, so that no other supervisor sends it meanwhile (and it is sent again then if this one never reports).
  std::vector<Notification> claim_notifications(std::int64_t now_ms, std::int64_t retry_ms, int limit);
  // A claimed notification went out.
  void notification_sent(std::int64_t id, std::int64_t now_ms);
  // A claimed notification failed with `error`; with `give_up`, it is not tried again.
  void notification_failed(std::int64_t id, const std::string& error, bool give_up);

  // Takes the job's lease if it is free, expired, or already `owner`'s. True when `owner` holds it.
  bool try_acquire_lease(std::int64_t job_id, const std::string& owner, std::int64_t ttl_ms, std::int64_t now_ms);
  // Extends `owner`'s lease; false when `owner` no longer holds it.
  bool renew_lease(std::int64_t job_id, const std::string& owner, std::int64_t ttl_ms, std::int64_t now_ms);
  // Extends each of `owner`'s leases in one transaction; returns the ids `owner` still holds.
  std::vector<std::int64_t> renew_leases(const std::vector<std::int64_t>& job_ids, const std::string& owner,
                                         std::int64_t ttl_ms, std::int64_t now_ms);
  // Gives the lease up if `owner` holds it.
  void release_lease(std::int64_t job_id, const std::string& owner);
  // The current lease, expired or not.
  [[nodiscard]] std::optional<domain::Lease> lease(std::int64_t job_id) const;
  // The owners of the leases still live at `now_ms`, each once: the supervisors that drive something now.
  [[nodiscard]] std::vector<std::string> live_lease_owners(std::int64_t now_ms) const;
  // The leases still live at `now_ms`, by record id, with each record's phase.
  [[nodiscard]] std::vector<LiveLease> live_leases(std::int64_t now_ms) const;
  // Ends every live lease of `owner` at `now_ms` (a supervisor known to be dead), so that another takes its jobs over
  // at once instead of when the leases run out. Returns how many it ended.
  int expire_leases_of(const std::string& owner, std::int64_t now_ms);

  // Removes the job with its attempts, events and lease (`clean`), keeping of its attempts what attempts_since reads
  // (where, when, how each went), in the same transaction. Its id is never handed out again. Throws NoSuchJobError
  // when there is no such job.
  void remove_job(std::int64_t id);
  // remove_job for two removers racing (the clean command and a supervisor carrying out the same clean): false,
  // changing nothing, when the job is already gone.
  bool remove_job_if_present(std::int64_t id);

  // The zone's catalog as last stored, however old; nullopt when none was.
  [[nodiscard]] std::optional<ZoneCatalog> zone_catalog(const std::string& endpoint, const std::string& project,
                                                        const std::string& zone) const;
  // Stores (or replaces) a zone's catalog.
  void put_zone_catalog(const ZoneCatalog& catalog);

  // `PRAGMA integrity_check` says "ok".
  [[nodiscard]] bool integrity_ok() const;

  // Every user with a record in the store.
  [[nodiscard]] std::vector<std::string> users() const;
  // Who this process acts as in the store: on PostgreSQL the database role it logged in as (the server
  // authenticated it), on SQLite the login name (the file is the user's own).
  [[nodiscard]] const std::string& identity() const;
  // The store's admins (its `admins` setting): they may cancel, delete and clean every user's jobs and tasks.
  [[nodiscard]] std::vector<std::string> admins() const;
  // Adds `name` to the admins (true) or removes it (false); returns whether the list changed. Throws
  // jobman::Error unless identity() may manage them (may_manage_admins).
  bool set_admin(const std::string& name, bool admin);
  // On PostgreSQL, the schema's owner or an admin; on SQLite, anyone (the store is one user's).
  [[nodiscard]] bool may_manage_admins() const;
  // Whether identity() may cancel, delete or clean a record of `owner`: its own, any as an admin, and any on a
  // SQLite store (one user's).
  [[nodiscard]] bool may_act_on(const std::string& owner) const;

  // The store's settings (its store_settings table) whose keys begin with `prefix`, by key; "admins" is not one.
  [[nodiscard]] std::map<std::string, std::string> settings(const std::string& prefix) const;
  // Sets `key` to `value`, or removes it (nullopt); returns whether it changed. Throws jobman::Error unless
  // identity() may manage the store (may_manage_admins), and for "admins" (set_admin changes that).
  bool put_setting(const std::string& key, const std::optional<std::string>& value);
  // Every slice held or asked for now, counted by user, kind, accelerator and pricing: the slices of jobs and workers
  // not yet released (whatever their phase: a finished job's slice counts until it is gone), first-ready rivals
  // included, and the workers' slices that tasks run on (by the task's user). Index scans of the unreleased slices
  // and of the unfinished jobs.
  [[nodiscard]] std::vector<SliceUse> slices_in_flight() const;
  // The fair share that claim_task and begin_attempt apply from now on; none (nullptr) by default.
  void set_share_policy(std::shared_ptr<const SharePolicy> policy);

  // Copies this store, history included, into `target` (a store on PostgreSQL), in one transaction of the target's:
  // all of it or nothing. Ids, change numbers and times are kept, and the target's ids go on after the source's
  // highest ever given. Copying again is safe: into a store made by an earlier copy of this one, it brings what
  // changed since (or nothing); into a store with a history of its own it refuses, changing nothing. Throws
  // jobman::Error saying why it refused, and when a supervisor drives jobs of this store (it must be stopped first).
  // The jobs of this store's identity (the login) are recorded as `as_user`, by default the target's identity.
  StoreCopy copy_into(JobStore& target, const std::string& as_user = "") const;

private:
  struct Impl;
  explicit JobStore(std::unique_ptr<Impl> impl);
  // The users whose tasks `worker` may claim, in the order they claim (SharePolicy::claim_order); {""} for the queue's
  // first whoever's, when no share is set or one user waits with nothing limited. Inside the caller's transaction.
  [[nodiscard]] std::vector<std::string> claiming_users(const WorkerOffer& worker) const;

  std::unique_ptr<Impl> impl_;
};

} // namespace jobman::store
