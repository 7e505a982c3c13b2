// The job store: jobs, attempts, events and leases (the domain model, jobman/domain/job.hpp) in SQLite (WAL) or
// PostgreSQL, shaped for the supervisor. JobStore opens and migrates the store and gives its clock and identity; what
// it holds is read and written through a view per area, each in a header of its own (jobs.hpp, attempts.hpp, ...), so
// that a file includes the areas it uses.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace jobman::store {

class Access;
class Attempts;
class BadHardware;
class Events;
class Jobs;
class Leases;
class Notifications;
class Queue;
class Rivals;
class Settings;
class Shares;
class ZoneCatalogs;
struct StoreCopy;

// The store: SQLite (a file, the default) or PostgreSQL (a server a lab shares), one interface and one schema. One
// per process; not shared between threads.
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
  // Who this process acts as in the store: on PostgreSQL the database role it logged in as (the server
  // authenticated it), on SQLite the login name (the file is the user's own).
  [[nodiscard]] const std::string& identity() const;
  // `PRAGMA integrity_check` says "ok".
  [[nodiscard]] bool integrity_ok() const;
  // From now on this handle drives jobs as the supervisor `owner`: each write that acts on a job for it
  // (Jobs::transition and remove_if_present, Attempts::begin and end, Rivals::begin_race and promote,
  // Events::append_as_driver) first checks, in its own transaction, that the job's lease still names `owner`, and
  // throws LeaseLostError (leases.hpp), writing nothing, when another supervisor took it. Writes are serialized
  // (SQLite's one writer, the write lock on PostgreSQL), so a supervisor that took a job over reads all the old one
  // wrote, and the old one writes nothing more, however late its lease renewals were (a frozen machine, a server
  // restart).
  void drive_as(std::string owner);

  // The views, one per area; each lives as long as the store.
  Jobs& jobs(); // jobs.hpp: the jobs, their phases, what users want of them.
  [[nodiscard]] const Jobs& jobs() const;
  Events& events(); // events.hpp: each job's history.
  [[nodiscard]] const Events& events() const;
  Attempts& attempts(); // attempts.hpp: each job's attempts, their slices and progress.
  [[nodiscard]] const Attempts& attempts() const;
  Rivals& rivals(); // rivals.hpp: the slices a first-ready attempt races.
  [[nodiscard]] const Rivals& rivals() const;
  BadHardware& bad_hardware(); // bad_hardware.hpp: machines found faulty.
  [[nodiscard]] const BadHardware& bad_hardware() const;
  Leases& leases(); // leases.hpp: which supervisor drives which job.
  [[nodiscard]] const Leases& leases() const;
  Queue& queue(); // queue.hpp: the task queue.
  [[nodiscard]] const Queue& queue() const;
  Notifications& notifications(); // notifications.hpp: messages to send.
  [[nodiscard]] const Notifications& notifications() const;
  ZoneCatalogs& zone_catalogs(); // zone_catalogs.hpp: what each zone offers.
  [[nodiscard]] const ZoneCatalogs& zone_catalogs() const;
  Access& access(); // access.hpp: the admins, and who may act on whose jobs.
  [[nodiscard]] const Access& access() const;
  Settings& settings(); // settings.hpp: the store's settings.
  [[nodiscard]] const Settings& settings() const;
  Shares& shares(); // shares.hpp: slices in flight, and the fair share applied to them.
  [[nodiscard]] const Shares& shares() const;

  // The connection and its statements, which the views share (src/store/store_impl.hpp).
  struct Impl;

private:
  explicit JobStore(std::unique_ptr<Impl> impl);
  friend StoreCopy copy_store(const JobStore& from, JobStore& target, const std::string& as_user);

  std::unique_ptr<Impl> impl_;
};

// What every view is: a handle on the store's shared implementation, owned by the store and never copied.
class StoreView {
public:
  explicit StoreView(JobStore::Impl& impl) : impl_(&impl) {}
  StoreView(const StoreView&) = delete;
  StoreView& operator=(const StoreView&) = delete;
  StoreView(StoreView&&) = delete;
  StoreView& operator=(StoreView&&) = delete;

protected:
  ~StoreView() = default;
  JobStore::Impl* impl_;
};

} // namespace jobman::store
