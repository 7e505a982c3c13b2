#include "schema.hpp"

#include <array>

namespace jobman::store::schema {
namespace {

// Version 1: the tables. Never edit a released migration; add a new one.
//
// Config snapshots live in job_configs, not in jobs: inline they would make up most of every jobs row, and
// `list --all` would read ~15 times the pages it needs (230 MB instead of 16 MB for 100,000 jobs with
// 1.5 KB configs). Keep SQL comments out of CREATE TABLE: ALTER TABLE ... DROP COLUMN edits that text and
// trips over them.
constexpr std::string_view v1 = R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  user TEXT NOT NULL,
  accelerator TEXT NOT NULL,
  zone TEXT NOT NULL,
  pricing TEXT NOT NULL,
  tpu_name TEXT NOT NULL,
  hosts INTEGER NOT NULL,
  phase TEXT NOT NULL CHECK (phase IN ('PENDING','QUEUED','PROVISIONING','SETUP','RUNNING','RECOVERING',
                                       'SUCCEEDED','FAILED','CANCELLED','DELETED')),
  desired TEXT NOT NULL CHECK (desired IN ('run','stop','delete','clean')),
  phase_reason TEXT NOT NULL DEFAULT '',
  attempt INTEGER NOT NULL DEFAULT 0,
  preemptions INTEGER NOT NULL DEFAULT 0,
  failures INTEGER NOT NULL DEFAULT 0,
  host0_ip TEXT NOT NULL DEFAULT '',
  exit_code INTEGER,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  phase_since_ms INTEGER NOT NULL,
  finished_ms INTEGER,
  config_path TEXT NOT NULL DEFAULT '',
  sweep_label TEXT NOT NULL DEFAULT ''
);

CREATE TABLE job_configs (
  job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
  config_yaml TEXT NOT NULL
);

CREATE TABLE attempts (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  number INTEGER NOT NULL,
  queued_resource TEXT NOT NULL,
  node TEXT NOT NULL,
  zone TEXT NOT NULL,
  started_ms INTEGER NOT NULL,
  ended_ms INTEGER,
  outcome TEXT NOT NULL DEFAULT '',
  exit_code INTEGER,
  PRIMARY KEY (job_id, number)
) WITHOUT ROWID;

CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  ts_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  from_phase TEXT,
  to_phase TEXT,
  message TEXT NOT NULL DEFAULT '',
  data_json TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_by_job ON events(job_id, id);

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
  SELECT RAISE(ABORT, 'events are append-only');
END;

CREATE TRIGGER events_no_delete BEFORE DELETE ON events
WHEN EXISTS (SELECT 1 FROM jobs WHERE id = OLD.job_id)
BEGIN
  SELECT RAISE(ABORT, 'events are append-only while their job exists');
END;

CREATE TABLE leases (
  job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
  owner TEXT NOT NULL,
  acquired_ms INTEGER NOT NULL,
  heartbeat_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL
);
)sql";

// Version 2: the indexes behind `list`'s default view (unfinished jobs plus recently finished ones),
// so that it reads a handful of rows instead of the whole history.
constexpr std::string_view v2 = R"sql(
CREATE INDEX jobs_unfinished ON jobs(id) WHERE phase NOT IN ('SUCCEEDED','FAILED','CANCELLED','DELETED');
CREATE INDEX jobs_finished ON jobs(finished_ms);
)sql";

// Version 3: what the supervisor needs to finish a job's cleanup. attempts.released_ms is when the attempt's queued
// resource and node were confirmed gone (or never made); jobs.cleanup_pending marks a finished job whose slice
// must still be released. The partial index finds the jobs the supervisor drives besides the unfinished ones.
constexpr std::string_view v3 = R"sql(
ALTER TABLE attempts ADD COLUMN released_ms INTEGER;
ALTER TABLE jobs ADD COLUMN cleanup_pending INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_to_release ON jobs(id) WHERE cleanup_pending = 1 OR desired IN ('delete','clean');
)sql";

// Version 4: attempts.create_pending is 1 from the moment the supervisor records the queued resource it is about to
// ask for until the API has accepted that request. The name is recorded first, so that a supervisor killed in
// between leaves a name to re-request or delete, never a slice the store does not know of.
constexpr std::string_view v4 = R"sql(
ALTER TABLE attempts ADD COLUMN create_pending INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 5: an attempt records the accelerator and the number of hosts of its slice, beside its zone and names: the
// attempt row is where a job runs (the job row keeps what was asked for). Attempts recorded before take the job's.
constexpr std::string_view v5 = R"sql(
ALTER TABLE attempts ADD COLUMN accelerator TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN hosts INTEGER NOT NULL DEFAULT 0;
UPDATE attempts SET accelerator = (SELECT accelerator FROM jobs WHERE jobs.id = attempts.job_id),
                    hosts = (SELECT hosts FROM jobs WHERE jobs.id = attempts.job_id);
)sql";

// Version 6: what each zone of a cloud offers (acceleratorTypes.list and runtimeVersions.list, as JSON arrays of
// names), so that validate and create check a config against the cloud without asking it more than once a day.
constexpr std::string_view v6 = R"sql(
CREATE TABLE zone_catalogs (
  endpoint TEXT NOT NULL,
  project TEXT NOT NULL,
  zone TEXT NOT NULL,
  accelerator_types TEXT NOT NULL,
  runtime_versions TEXT NOT NULL,
  fetched_ms INTEGER NOT NULL,
  PRIMARY KEY (endpoint, project, zone)
) WITHOUT ROWID;
)sql";

// Version 7: the slices attempts still hold (released_ms null), for `jobman sync` and the supervisor's orphan sweep:
// a partial index that covers the names, so finding them reads only the unreleased attempts.
constexpr std::string_view v7 = R"sql(
CREATE INDEX attempts_unreleased ON attempts(queued_resource, node, zone) WHERE released_ms IS NULL;
)sql";

// Version 8: pools of slices and a queue of tasks on one state machine. jobs.kind says what a record is: a job (a task
// on a slice of its own), a worker (a slice kept to run tasks on) or a task (run on a worker's slice). A task's
// worker_id names the worker whose slice it holds, from its claim until it lets go; the unique index makes a worker
// hold one task at most, and a task can name one worker only. attempts.worker_id marks a task's attempt, which borrows
// its worker's slice: the worker releases the slice, so such attempts never count as holding one. tasks_queued is the
// queue, in the order tasks are taken; jobs_driven is what a supervisor reads every second, without the queued tasks
// (which no supervisor drives until a worker claims them). jobs.slice_state is what the last listing said of the
// record's slice ("ACTIVE", "SUSPENDED", "gone"), for `status` to show without asking the cloud; jobs.max_failures
// is the config's failure budget (a task's retries), for the same reason.
constexpr std::string_view v8 = R"sql(
ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'job' CHECK (kind IN ('job','worker','task'));
ALTER TABLE jobs ADD COLUMN worker_id INTEGER;
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN queue_order INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN slice_state TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN max_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN worker_id INTEGER;
CREATE UNIQUE INDEX tasks_on_worker ON jobs(worker_id) WHERE worker_id IS NOT NULL;
CREATE INDEX tasks_queued ON jobs(accelerator, priority DESC, queue_order, id)
  WHERE kind = 'task' AND phase = 'PENDING' AND desired = 'run';
CREATE INDEX jobs_driven ON jobs(id)
  WHERE phase NOT IN ('SUCCEEDED','FAILED','CANCELLED','DELETED') AND NOT (kind = 'task' AND phase = 'PENDING' AND desired = 'run');
CREATE INDEX jobs_by_kind ON jobs(kind, id) WHERE kind != 'job';
DROP INDEX attempts_unreleased;
CREATE INDEX attempts_unreleased ON attempts(queued_resource, node, zone) WHERE released_ms IS NULL AND worker_id IS NULL;
)sql";

// Version 9: notifications waiting to go out (mail, webhooks), one row per event, channel and recipient of a job's
// attempt: recorded when the phase changes, sent by whichever supervisor finds them due, retried with backoff until
// sent or given up. The row holds whom to tell, never a key or a webhook's URL (the job's config says how, read when
// sending).
constexpr std::string_view v9 = R"sql(
CREATE TABLE notifications (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL,
  event TEXT NOT NULL,
  channel TEXT NOT NULL,
  target TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  tries INTEGER NOT NULL DEFAULT 0,
  next_ms INTEGER NOT NULL,
  sent_ms INTEGER,
  gave_up INTEGER NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT '',
  UNIQUE (job_id, attempt, event, channel, target)
);
CREATE INDEX notifications_due ON notifications(next_ms) WHERE sent_ms IS NULL AND gave_up = 0;
)sql";

// Version 10: what `status` reads of ten thousand queued tasks, from indexes alone. tasks_listed holds what places a
// task among those `status` lists (its id, phase, desired state and finish time; and its kind, which SQLite must find
// in the index to read nothing else), so the pass that numbers them never reads the table; tasks_queue_head is the
// queue in its order across accelerators, so the head `status` shows is read, not sorted.
constexpr std::string_view v10 = R"sql(
CREATE INDEX tasks_listed ON jobs(id, phase, desired, finished_ms, kind) WHERE kind = 'task';
CREATE INDEX tasks_queue_head ON jobs(priority DESC, queue_order, id)
  WHERE kind = 'task' AND phase = 'PENDING' AND desired = 'run';
)sql";

// Version 11: bad hardware. jobs.bad_hardware counts the slices a job found bad (its own budget, never the failure
// budget); attempts.active_ms is when the slice came up and attempts.physical_hosts the machine of each worker host (a
// comma-separated list by worker, as the cloud told it); bad_hardware remembers every finding beyond the job's life (no
// foreign key: `clean` keeps what was learnt of the machine), indexed by machine for the check of each new slice.
constexpr std::string_view v11 = R"sql(
ALTER TABLE jobs ADD COLUMN bad_hardware INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN active_ms INTEGER;
ALTER TABLE attempts ADD COLUMN physical_hosts TEXT NOT NULL DEFAULT '';
CREATE TABLE bad_hardware (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  ts_ms INTEGER NOT NULL,
  job_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  zone TEXT NOT NULL,
  accelerator TEXT NOT NULL,
  node TEXT NOT NULL,
  worker INTEGER NOT NULL,
  physical_host TEXT NOT NULL DEFAULT '',
  signal TEXT NOT NULL,
  detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX bad_hardware_by_host ON bad_hardware(physical_host, ts_ms) WHERE physical_host != '';
CREATE INDEX bad_hardware_by_job ON bad_hardware(job_id);
)sql";

// Version 12: where capacity comes from. attempts.pricing is the tier an attempt's slice was asked in (a job may fall
// back from spot to on-demand); older attempts take their job's. attempts_by_place serves `jobman availability` and the
// supervisor's ranking of candidates: each zone, accelerator and tier's attempts by time.
constexpr std::string_view v12 = R"sql(
ALTER TABLE attempts ADD COLUMN pricing TEXT NOT NULL DEFAULT '';
UPDATE attempts SET pricing = (SELECT pricing FROM jobs WHERE jobs.id = attempts.job_id);
CREATE INDEX attempts_by_place ON attempts(zone, accelerator, pricing, started_ms);
)sql";

// Version 13: first-ready races. A rival is a queued resource requested alongside an attempt's own; the first of them
// to come up becomes the attempt's slice (its row swaps places with the attempt's), the others are deleted. Unreleased
// rivals are held slices, as attempts are (rivals_unreleased serves the orphan sweep and the supervisor).
constexpr std::string_view v13 = R"sql(
CREATE TABLE rivals (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL,
  name TEXT NOT NULL,
  zone TEXT NOT NULL,
  accelerator TEXT NOT NULL,
  hosts INTEGER NOT NULL,
  pricing TEXT NOT NULL,
  requested_ms INTEGER NOT NULL,
  create_pending INTEGER NOT NULL DEFAULT 1,
  released_ms INTEGER,
  outcome TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, name)
) WITHOUT ROWID;
CREATE INDEX rivals_unreleased ON rivals(job_id, name, zone) WHERE released_ms IS NULL;
)sql";

// Version 14: training progress. jobs.step, step_total and step_ms are the latest step a job's workers printed (what
// `list` shows); attempts.progress is each attempt's bounded series of steps and times (domain::ProgressSeries), what
// `show` derives a rate from and `report` the work done again after a resume. events_phases serves `report`, which
// reads the phase changes of many jobs at once; attempts_by_worker, a worker's account (the tasks it ran).
constexpr std::string_view v14 = R"sql(
CREATE INDEX events_phases ON events(job_id, id) WHERE kind = 'phase';
CREATE INDEX attempts_by_worker ON attempts(worker_id, started_ms) WHERE worker_id IS NOT NULL;
ALTER TABLE jobs ADD COLUMN step INTEGER;
ALTER TABLE jobs ADD COLUMN step_total INTEGER;
ALTER TABLE jobs ADD COLUMN step_ms INTEGER;
ALTER TABLE attempts ADD COLUMN progress TEXT NOT NULL DEFAULT '';
)sql";

// Version 15: a change number for watchers (`jobman ui`). Every insert or update of a job row gives it the next
// number (change_seq), and every removal leaves one in job_removals, so "what changed after N" is one range scan of
// two indexes. Writers are serialized, so numbers become visible in order. Only the newest 10,000 removals are kept
// (n numbers them); a watcher further behind reloads.
constexpr std::string_view v15 = R"sql(
ALTER TABLE jobs ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET change_seq = id;
CREATE INDEX jobs_by_change ON jobs(change_seq);
CREATE TABLE job_removals (
  n INTEGER PRIMARY KEY,
  seq INTEGER NOT NULL UNIQUE,
  job_id INTEGER NOT NULL
);
CREATE VIEW next_change(seq) AS
  SELECT MAX(COALESCE((SELECT MAX(change_seq) FROM jobs), 0), COALESCE((SELECT MAX(seq) FROM job_removals), 0)) + 1;
CREATE TRIGGER jobs_changed_on_insert AFTER INSERT ON jobs
BEGIN
  UPDATE jobs SET change_seq = (SELECT seq FROM next_change) WHERE id = NEW.id;
END;
CREATE TRIGGER jobs_changed_on_update AFTER UPDATE ON jobs WHEN NEW.change_seq = OLD.change_seq
BEGIN
  UPDATE jobs SET change_seq = (SELECT seq FROM next_change) WHERE id = NEW.id;
END;
CREATE TRIGGER jobs_changed_on_delete AFTER DELETE ON jobs
BEGIN
  INSERT INTO job_removals(seq, job_id) VALUES ((SELECT seq FROM next_change), OLD.id);
  DELETE FROM job_removals WHERE n <= (SELECT MAX(n) FROM job_removals) - 10000;
END;
)sql";

// Version 16: a removal is numbered before its row goes. Numbered after (version 15), the removal of the job holding
// the highest change number took a number at or below that job's own, behind a watcher's cursor: the watcher never
// heard of it, and the store's cursor went backwards.
constexpr std::string_view v16 = R"sql(
DROP TRIGGER jobs_changed_on_delete;
CREATE TRIGGER jobs_changed_on_delete BEFORE DELETE ON jobs
BEGIN
  INSERT INTO job_removals(seq, job_id) VALUES ((SELECT seq FROM next_change), OLD.id);
  DELETE FROM job_removals WHERE n <= (SELECT MAX(n) FROM job_removals) - 10000;
END;
)sql";

// Version 17: the store's own settings, such as who may act on everyone's jobs (`jobman store admins`). One row
// per key; a list is a JSON array. The same DDL on both backends.
constexpr std::string_view v17 = R"sql(
CREATE TABLE store_settings (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
)sql";

// Version 18: the phase changes a report reads (hundreds of thousands over a year) come from their index alone: it
// holds each change's time and phases besides its job and id. The same DDL on both backends.
constexpr std::string_view v18 = R"sql(
CREATE INDEX events_phase_changes ON events(job_id, id, ts_ms, from_phase, to_phase) WHERE kind = 'phase';
DROP INDEX events_phases;
)sql";

// Version 19: what `clean` keeps of a removed job's attempts. Removing a job deletes its attempts (and events, config,
// lease), which were all `jobman availability` and the learned ranking of candidates knew of where capacity came
// from. attempt_history keeps, for each attempt of a removed job that asked for a slice of its own, the facts those
// read: where (zone, accelerator, tier), when it was asked for, when the slice came up, when and how it ended. No
// foreign key: the rows outlive their job, as bad_hardware's do; job_id and number (never reused) are the key.
// Nothing of the job's config, logs or events is kept. Jobs removed before this version left nothing to recover.
constexpr std::string_view v19 = R"sql(
CREATE TABLE attempt_history (
  job_id INTEGER NOT NULL,
  number INTEGER NOT NULL,
  zone TEXT NOT NULL,
  accelerator TEXT NOT NULL,
  pricing TEXT NOT NULL,
  started_ms INTEGER NOT NULL,
  active_ms INTEGER,
  ended_ms INTEGER,
  outcome TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, number)
) WITHOUT ROWID;
CREATE INDEX attempt_history_by_place ON attempt_history(zone, accelerator, pricing, started_ms);
)sql";

// Version 19 on PostgreSQL: the same table, translated as schema_postgres.cpp says (BIGINT, no WITHOUT ROWID).
constexpr std::string_view v19_postgres = R"sql(
CREATE TABLE attempt_history (
  job_id BIGINT NOT NULL,
  number BIGINT NOT NULL,
  zone TEXT NOT NULL,
  accelerator TEXT NOT NULL,
  pricing TEXT NOT NULL,
  started_ms BIGINT NOT NULL,
  active_ms BIGINT,
  ended_ms BIGINT,
  outcome TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, number)
);
CREATE INDEX attempt_history_by_place ON attempt_history(zone, accelerator, pricing, started_ms);
)sql";

// Version 20: the step of a loss spike an attempt was rolled back for (recovery.loss_spike): the attempts after it
// resume from before that step (JOBMAN_RESUME_BEFORE_STEP) until the run passes it. The same DDL on both backends.
constexpr std::string_view v20 = R"sql(
ALTER TABLE attempts ADD COLUMN rollback_step BIGINT;
)sql";

// Version 21: where each bucket a job mounts is (Cloud Storage's buckets.get: location, location type, storage
// class), so that validate and create compare it with the slice's zone without asking more than once a day, and the
// supervisor ranks zones by it without asking at all. The same DDL on both backends.
constexpr std::string_view v21 = R"sql(
CREATE TABLE bucket_places (
  endpoint TEXT NOT NULL,
  bucket TEXT NOT NULL,
  location TEXT NOT NULL,
  location_type TEXT NOT NULL,
  storage_class TEXT NOT NULL,
  fetched_ms BIGINT NOT NULL,
  PRIMARY KEY (endpoint, bucket)
);
)sql";

// Version 22: what each attempt read through its gcsfuse mount of a bucket, as the workers' gcsfuse counted it at the
// attempt's end, for the cost of reading across regions (the report, `jobman buckets`). The same DDL on both backends.
constexpr std::string_view v22 = R"sql(
CREATE TABLE attempt_transfers (
  job_id BIGINT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  attempt BIGINT NOT NULL,
  bucket TEXT NOT NULL,
  zone TEXT NOT NULL,
  read_bytes BIGINT NOT NULL,
  write_ops BIGINT NOT NULL,
  workers_read BIGINT NOT NULL,
  workers BIGINT NOT NULL,
  recorded_ms BIGINT NOT NULL,
  PRIMARY KEY (job_id, attempt, bucket)
);
CREATE INDEX attempt_transfers_by_bucket ON attempt_transfers(bucket, zone);
)sql";

constexpr std::array<Migration, 22> all{{
    {1, "create the jobs, job_configs, attempts, events and leases tables", v1},
    {2, "index unfinished and recently finished jobs for list", v2},
    {3, "record released slices and pending cleanups for the supervisor", v3},
    {4, "record a queued resource's name before it is requested", v4},
    {5, "record each attempt's accelerator and hosts", v5},
    {6, "cache what each zone of a cloud offers", v6},
    {7, "index the attempts whose slice is not released", v7},
    {8, "add workers and a queue of tasks", v8},
    {9, "queue notifications", v9},
    {10, "index the task listing and the queue's head for status", v10},
    {11, "remember bad hardware", v11},
    {12, "record each attempt's tier and index attempts by place", v12},
    {13, "record the queued resources raced for an attempt (first-ready)", v13},
    {14, "record training progress and index phase changes", v14},
    {15, "number every change of a job for watchers", v15},
    {16, "number a job's removal above its last change", v16},
    {17, "keep the store's own settings (admins)", v17, v17},
    {18, "read phase changes from their index alone", v18, v18},
    {19, "keep the attempts of removed jobs for availability", v19, v19_postgres},
    {20, "record the step an attempt was rolled back for", v20, v20},
    {21, "keep where the buckets jobs mount are", v21, v21},
    {22, "record what each attempt read from its buckets", v22, v22},
}};

} // namespace

std::span<const Migration> migrations() {
  return all;
}

int latest_version() {
  return all.back().version;
}

std::string_view v1_sql() {
  return v1;
}

} // namespace jobman::store::schema
