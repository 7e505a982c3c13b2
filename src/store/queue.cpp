// The store's task queue: a worker claims the first task it can run, in one transaction with the task's first step
// (its phase, its attempt on the worker's slice, its lease), so that no task ever runs on two workers at once.
#include "jobman/store/queue.hpp"

#include "job_queries.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/shares.hpp"
#include "jobman/util/system.hpp"
#include "schema.hpp"
#include "store_impl.hpp"

#include <nlohmann/json.hpp>
#include <set>

namespace jobman::store {

using sql::Transaction;

namespace {

// The tasks a worker can run: of its accelerator, and of its zone and pricing where they name one.
constexpr std::string_view kRunnableBy =
    " AND accelerator = ?1 AND (zone = '' OR zone = ?2) AND (pricing = '' OR pricing = ?3)";

// The queue's first task a worker can run: highest priority, then queue order.
const std::string& pick_query() {
  static const std::string pick = "SELECT id, phase_since_ms FROM jobs INDEXED BY tasks_queued WHERE " +
                                  std::string(schema::queued_condition) + std::string(kRunnableBy) +
                                  " ORDER BY priority DESC, queue_order, id LIMIT 1";
  return pick;
}

// The same, of one user's tasks (?4).
const std::string& pick_of_user_query() {
  static const std::string pick = "SELECT id, phase_since_ms FROM jobs INDEXED BY tasks_queued WHERE " +
                                  std::string(schema::queued_condition) + std::string(kRunnableBy) +
                                  " AND user = ?4 ORDER BY priority DESC, queue_order, id LIMIT 1";
  return pick;
}

// The users with tasks the worker can run, in the order their first such task was queued.
const std::string& waiting_users_query() {
  static const std::string users =
      "SELECT user, min(queue_order) AS head_order FROM jobs INDEXED BY tasks_queued WHERE " +
      std::string(schema::queued_condition) + std::string(kRunnableBy) + " GROUP BY user ORDER BY head_order, user";
  return users;
}

// The users whose tasks `worker` may claim, in the order they claim (SharePolicy::claim_order); {""} for the queue's
// first whoever's, when no share is set or one user waits with nothing limited. Inside the caller's transaction.
std::vector<std::string> claiming_users(JobStore::Impl& store, const WorkerOffer& worker) {
  // Without a fair share, or with one user waiting and nothing limited, the queue's first task, whoever's ("").
  const auto& policy = store.share_policy;
  if (!policy) {
    return {std::string()};
  }
  std::vector<std::string> users;
  {
    auto query = store.statements.get(waiting_users_query());
    query->bind(1, worker.accelerator);
    query->bind(2, worker.zone);
    query->bind(3, domain::to_string(worker.pricing));
    while (query->step()) {
      users.push_back(query->column_text(0));
    }
  }
  if (users.size() <= 1 && !policy->limits_anything()) {
    return {std::string()};
  }
  return policy->claim_order(store.slices_in_flight(), users, worker.accelerator, worker.pricing);
}

} // namespace

std::optional<std::int64_t> Queue::first_for(const WorkerOffer& worker) const {
  auto peek = impl_->statements.get(pick_query());
  peek->bind(1, worker.accelerator);
  peek->bind(2, worker.zone);
  peek->bind(3, domain::to_string(worker.pricing));
  if (!peek->step()) {
    return std::nullopt;
  }
  return peek->column_int64(0);
}

std::optional<std::int64_t> Queue::claim(const WorkerOffer& worker, const std::string& owner, std::int64_t ttl_ms,
                                         std::int64_t now_ms) {
  // A read first: an empty queue, the common case of an idle worker, costs no write transaction; nor does a queue
  // whose users all hold their share.
  if (!first_for(worker)) {
    return std::nullopt;
  }
  if (impl_->share_policy) {
    const sql::ReadTransaction snapshot(impl_->db);
    if (claiming_users(*impl_, worker).empty()) {
      return std::nullopt;
    }
  }
  const std::string& pick = pick_query();
  Transaction transaction(impl_->db);
  if (task_of_worker(worker.worker_id)) {
    transaction.commit();
    return std::nullopt;
  }
  std::int64_t id = 0;
  std::int64_t queued_since = 0;
  auto users = claiming_users(*impl_, worker);
  if (users.empty()) {
    transaction.commit();
    return std::nullopt; // Every waiting user holds their share.
  }
  for (const auto& user : users) {
    auto query = impl_->statements.get(user.empty() ? pick : pick_of_user_query());
    query->bind(1, worker.accelerator);
    query->bind(2, worker.zone);
    query->bind(3, domain::to_string(worker.pricing));
    if (!user.empty()) {
      query->bind(4, user);
    }
    if (query->step()) {
      id = query->column_int64(0);
      queued_since = query->column_int64(1);
      break;
    }
  }
  if (id == 0) {
    transaction.commit();
    return std::nullopt; // Another supervisor's worker took it between the read and the transaction.
  }
  const std::string reason = "claimed by worker " + domain::format_job_id(worker.worker_id);
  {
    auto update = impl_->statements.get(
        "UPDATE jobs SET phase = 'SETUP', phase_reason = ?2, phase_since_ms = ?3, updated_ms = ?3, worker_id = ?4 "
        "WHERE id = ?1 AND phase = 'PENDING' AND worker_id IS NULL");
    update->bind(1, id);
    update->bind(2, reason);
    update->bind(3, now_ms);
    update->bind(4, worker.worker_id);
    update->run();
  }
  {
    // The lease is taken over from an earlier holder whatever its age: a queued task has nothing running anywhere.
    auto lease = impl_->statements.get(
        "INSERT INTO leases (job_id, owner, acquired_ms, heartbeat_ms, expires_ms) VALUES (?1, ?2, ?3, ?3, ?4) "
        "ON CONFLICT (job_id) DO UPDATE SET owner = excluded.owner, acquired_ms = excluded.acquired_ms, "
        "heartbeat_ms = excluded.heartbeat_ms, expires_ms = excluded.expires_ms");
    lease->bind(1, id);
    lease->bind(2, owner);
    lease->bind(3, now_ms);
    lease->bind(4, now_ms + ttl_ms);
    lease->run();
  }
  const nlohmann::json data = {{"worker_id", worker.worker_id}, {"queued_ms", now_ms - queued_since}};
  impl_->insert_event(id, now_ms, "phase", Phase::pending, Phase::setup, reason, data.dump());
  Placement where = worker.placement;
  where.worker_id = worker.worker_id;
  impl_->insert_attempt(id, where, false, now_ms);
  transaction.commit();
  return id;
}

namespace queries {

std::string queue_head_sql() {
  return "SELECT id FROM jobs INDEXED BY tasks_queue_head WHERE " + std::string(schema::queued_condition) +
         " ORDER BY priority DESC, queue_order, id LIMIT ?1";
}

std::string task_places_sql() {
  return "SELECT id, phase = 'PENDING' AND desired = 'run' FROM jobs INDEXED BY tasks_listed WHERE kind = 'task' "
         "AND (phase NOT IN " +
         std::string(schema::terminal_phase_list) + " OR finished_ms >= ?1) ORDER BY id";
}

} // namespace queries

TaskBoard Queue::board(std::size_t head, std::int64_t now_ms) const {
  const sql::ReadTransaction snapshot(impl_->db); // The places, the head and the rows shown agree.
  std::set<std::int64_t> first;
  {
    auto query = impl_->statements.get(queries::queue_head_sql());
    query->bind(1, static_cast<std::int64_t>(head));
    while (query->step()) {
      first.insert(query->column_int64(0));
    }
  }
  // Every listed task counts towards the places, from the index alone; only the shown ones are read whole.
  TaskBoard board;
  std::vector<std::pair<std::size_t, std::int64_t>> shown;
  {
    auto query = impl_->statements.get(queries::task_places_sql());
    query->bind(1, now_ms - std::int64_t{24} * 3600 * 1000);
    std::size_t index = 0;
    while (query->step()) {
      ++index;
      const auto id = query->column_int64(0);
      const bool waiting = query->column_int(1) != 0;
      board.queued += waiting ? 1 : 0;
      if (waiting && !first.contains(id)) {
        continue;
      }
      board.queued_shown += waiting ? 1 : 0;
      shown.emplace_back(index, id);
    }
  }
  board.shown.reserve(shown.size());
  for (const auto& [index, id] : shown) {
    if (auto job = impl_->find(id, false)) {
      board.shown.emplace_back(index, std::move(*job));
    }
  }
  return board;
}

std::optional<std::int64_t> Queue::task_of_worker(std::int64_t worker_id) const {
  auto query = impl_->statements.get("SELECT id FROM jobs WHERE worker_id = ?1");
  query->bind(1, worker_id);
  if (!query->step()) {
    return std::nullopt;
  }
  return query->column_int64(0);
}

std::int64_t Queue::queued() const {
  auto query = impl_->statements.get("SELECT COUNT(*) FROM jobs INDEXED BY tasks_queued WHERE " +
                                     std::string(schema::queued_condition));
  return query->step() ? query->column_int64(0) : 0;
}

} // namespace jobman::store
