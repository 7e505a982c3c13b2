// The job driver, getting a slice: PENDING and RECOVERING request one (recording its name first), QUEUED and
// PROVISIONING wait until it is ACTIVE and its node READY, then SETUP.
#include "job_driver.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/plan.hpp"
#include "jobman/core/slice_hosts.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/shares.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"

#include <algorithm>
#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

using domain::AttemptOutcome;
using domain::DesiredState;
using domain::Phase;

void JobDriver::acquire_slice(Driven& d) {
  if (const auto* asked = d.current(); asked != nullptr && asked->create_pending && !asked->ended_ms) {
    // Its name was recorded and then the request failed, or the supervisor that made it stopped before the
    // answer was recorded: ask again under the same name (the API answers 409 if the first request got there).
    request_slice(d, *asked);
    return;
  }
  if (const auto* open = d.open_slice()) {
    if (!d.seen.valid) {
      return; // The next listing tells what it is.
    }
    const auto verdict = verdict_of(d.seen.view);
    if (d.job.phase == Phase::pending && verdict != SliceVerdict::lost && verdict != SliceVerdict::deleting) {
      // Resumed with a slice kept: the next attempt runs on it.
      const std::string qr = open->slice_name();
      store().attempts().begin(d.job.id, open->placement());
      reload(d);
      move(d, std::nullopt, domain::change_to(Phase::queued, "resumed on the kept slice " + qr));
      return;
    }
    if (waits_for_run_end(d)) {
      return;
    }
    release(d, [this, &d] { create_slice(d); });
    return;
  }
  release(d, [this, &d] { create_slice(d); }); // Rivals of an earlier race go first.
}

bool JobDriver::waits_for_run_end(Driven& d) {
  const auto* open = d.open_slice();
  const auto* last = d.current();
  if (open == nullptr || last == nullptr || last->outcome != AttemptOutcome::run_ended || !d.run_ends_ms ||
      d.run_ends_attempt != open->number || verdict_of(d.seen.view) != SliceVerdict::active) {
    return false;
  }
  const auto now = host_.now_ms();
  const auto poll = host_.scaled(static_cast<double>(d.config->recovery.poll_interval_seconds)).count();
  if (now >= *d.run_ends_ms + poll) {
    return false; // The cloud has not ended it a poll past its time: jobman does.
  }
  d.dirty = true;
  d.retry_at_ms = now < *d.run_ends_ms ? *d.run_ends_ms : now + poll;
  return true;
}

// Records the next attempt and the name of its slice, then asks for it. The name is in the store before the request
// leaves: a supervisor killed in between leaves a name that the next one asks for again (or deletes, if the user
// cancelled meanwhile), never a slice the store does not know of. A queued resource names its node after itself; in
// tpu-vm mode the node is all there is.
void JobDriver::create_slice(Driven& d) {
  std::string why;
  const auto list = choose_candidates(d, why);
  if (!share_allows(d, list.front())) {
    return;
  }
  if (list.size() > 1 && races(d)) {
    start_race(d, list, why);
    return;
  }
  const auto& candidate = list.front();
  const std::string name = resource_id(d.job.tpu_name, d.job.id, d.job.attempt + 1);
  const bool direct = d.config->tpu.allocation_mode == config::AllocationMode::tpu_vm;
  store().attempts().begin(
      d.job.id,
      domain::Placement{direct ? std::string() : name, name, candidate.zone, candidate.accelerator.name,
                        candidate.accelerator.hosts * d.config->tpu.slices, std::nullopt, candidate.pricing},
      true);
  chips_in_flight_.reset();
  reload(d);
  if (!why.empty()) {
    event(d, "action", "requesting " + candidate.label() + ": " + why,
          {{"zone", candidate.zone},
           {"accelerator", candidate.accelerator.name},
           {"pricing", domain::to_string(candidate.pricing)}});
  }
  request_slice(d, *d.current());
}

void JobDriver::set_fair_share(std::shared_ptr<const FairShare> share) {
  fair_share_ = std::move(share);
  chips_in_flight_.reset();
}

bool JobDriver::share_allows(Driven& d, const config::Candidate& candidate) {
  if (!fair_share_ || !fair_share_->limits_anything()) {
    return true;
  }
  if (!chips_in_flight_) {
    chips_in_flight_.emplace(store().shares().in_flight());
  }
  const auto why =
      fair_share_->refusal(*chips_in_flight_, d.job.user, d.job.kind, candidate.accelerator.name, candidate.pricing);
  if (why.empty()) {
    return true;
  }
  wait_for_share(d, why);
  return false;
}

void JobDriver::wait_for_share(Driven& d, const std::string& why) {
  // A look every few seconds costs no store access until the loop reads the share again (once a second at most).
  constexpr double kShareLookSeconds = 5;
  const std::string reason = std::string(kShareWaitReason) + why;
  if (d.job.phase_reason != reason) {
    move(d, d.job.phase, domain::change_to(d.job.phase, reason));
  }
  d.retry_at_ms = host_.now_ms() + host_.scaled(kShareLookSeconds).count();
  d.dirty = true;
}

void JobDriver::with_ssh_key(const Driven& d, nlohmann::json& body) const {
  if (access_->settings.transport != config::Transport::ssh) {
    return;
  }
  try {
    add_ssh_key(body, ssh_keys_entry(ssh_identity(*d.config), remote_user(*d.config)));
  } catch (const std::exception& e) {
    spdlog::warn("{}: no SSH key goes with the request: {}", job_label(d.job.id), e.what());
  }
}

void JobDriver::request_slice(Driven& d, const domain::AttemptRecord& attempt) {
  const SliceRef slice = SliceRef::of(attempt);
  const int number = attempt.number;
  // The body asks for the attempt's candidate: its zone, accelerator and tier.
  const auto candidate = candidate_at(d, attempt.zone, attempt.accelerator, attempt.pricing);
  auto body = create_request_body(config::candidate_config(*d.config, candidate), access_->project, d.job.id,
                                  d.job.user, number, attempt.node);
  with_ssh_key(d, body);
  const auto id = d.job.id;
  d.create_again = false;
  host_.dispatch(d, [this, slices = slices_, counters = counters_, slice, number, body, id]() -> std::function<void()> {
    std::string operation;
    try {
      ++counters->mutations;
      if (slice.node_only) {
        const auto created = slices->create_node(slice.zone, slice.name, body);
        if (created.operation) {
          operation = created.operation->name;
        }
        if (created.existing) {
          refuse_another_stores_resource(slice.name, created.existing->labels, body.value("labels", nlohmann::json()));
        }
      } else {
        const auto created = slices->create_queued_resource(slice.zone, slice.name, body);
        if (created.existing) {
          refuse_another_stores_resource(slice.name, created.existing->node_labels, request_node_labels(body));
        }
      }
    } catch (const cloud::ApiError& e) {
      // A request the API will never accept (bad argument, no permission) ends the job; one refused for quota (429
      // RESOURCE_EXHAUSTED, once the client's retries are spent) gives way to the next candidate, or waits for the
      // backoff with one; the rest is retried.
      const int status = e.http_status();
      const bool permanent = status == 400 || status == 403 || status == 404;
      const bool quota = status == 429;
      return [this, id, permanent, quota, slice, number, message = std::string(e.what())] {
        Driven* live = host_.find(id);
        if (live == nullptr) {
          return;
        }
        if ((quota || permanent) && promote_after_refusal(*live, slice.name, message)) {
          return; // A rival races on in its place; the next step requests it if it was not yet.
        }
        if (permanent && several_candidates(*live)) {
          // Not offered there (or not allowed): a candidate that failed, unless every one has been refused.
          store().attempts().end(id, number, AttemptOutcome::refused, std::nullopt);
          store().attempts().mark_released(id, slice.name, "the TPU API refused to create it");
          reload(*live);
          if (refused_everywhere(*live)) {
            move(*live, std::nullopt,
                 domain::change_to(Phase::failed, "the TPU API refused every candidate; the last: " + message));
            return;
          }
          const double wait = backoff(*live);
          move(*live, std::nullopt,
               domain::change_to(Phase::pending, "refused in " + slice.zone + ": " + message +
                                                     "; trying the next candidate in " +
                                                     util::format_duration(static_cast<long long>(wait))));
          return;
        }
        if (quota) {
          store().attempts().end(id, number, AttemptOutcome::quota, std::nullopt);
          store().attempts().mark_released(id, slice.name, "the TPU API refused it for quota");
          reload(*live);
          const double wait = backoff(*live);
          move(*live, std::nullopt,
               domain::change_to(Phase::pending,
                                 "refused for quota in " + slice.zone + ": " + message + "; " +
                                     (several_candidates(*live) ? "trying the next candidate" : "asking again") +
                                     " in " + util::format_duration(static_cast<long long>(wait))));
          return;
        }
        if (permanent) {
          store().attempts().end(id, number, AttemptOutcome::failed, std::nullopt);
          store().attempts().mark_released(id, slice.name, "the TPU API refused to create it");
          reload(*live);
          move(*live, std::nullopt, domain::change_to(Phase::failed, "the TPU API refused the slice: " + message));
        } else {
          error_event(*live, "requesting a slice: " + message);
          backoff(*live);
        }
      };
    }
    return [this, id, slice, number, operation] { slice_created(id, slice, number, operation); };
  });
}

void JobDriver::slice_created(std::int64_t id, const SliceRef& slice, int number, const std::string& operation) {
  Driven* d = host_.find(id);
  if (d == nullptr) {
    // Cleaned while the request was in flight: the resource must not outlive the job. (A job whose lease went to
    // another supervisor meanwhile keeps it: that one requests the same name and finds it.)
    if (!store().jobs().find(id)) {
      orphan_delete(slice);
    }
    return;
  }
  try {
    store().attempts().confirm_created(id, number);
  } catch (const domain::NoSuchJobError&) {
    orphan_delete(slice);
    throw;
  }
  reload(*d);
  if (!slice.node_only) {
    // A node's create may still fail for capacity: its backoff grows until the node is READY.
    d->retry_step = 0;
  }
  d->seen = SliceSeen{};
  d->node_health.reset();
  d->create_operation = operation;
  if (d->job.desired == DesiredState::run && !domain::is_terminal(d->job.phase)) {
    move(*d, std::nullopt,
         slice.node_only
             ? domain::change_to(Phase::provisioning, "creating node " + slice.name + " in " + slice.zone)
             : domain::change_to(Phase::queued, "requested queued resource " + slice.name + " in " + slice.zone));
  } else if (domain::is_terminal(d->job.phase)) {
    store().jobs().set_cleanup_pending(id, true);
    reload(*d);
  }
}

void JobDriver::orphan_delete(const SliceRef& slice) {
  host_.dispatch_detached([slices = slices_, counters = counters_, slice] {
    try {
      ++counters->mutations;
      (void)slice.remove(*slices);
      spdlog::info("deleted {}: its job was removed while it was being requested", slice.label());
    } catch (const std::exception& e) {
      spdlog::error("{} outlived its job and could not be deleted: {}", slice.label(), e.what());
    }
  });
}

void JobDriver::await_slice(Driven& d) {
  const auto* open = d.open_slice();
  if (open == nullptr) {
    move(d, std::nullopt, domain::change_to(Phase::pending, "no slice recorded for the attempt; requesting one"));
    return;
  }
  if (!d.seen.valid) {
    return;
  }
  if (open->node_only() && !d.seen.view) {
    if (!d.create_operation.empty()) {
      check_create(d, *open);
      return;
    }
    if (!d.seen.once || d.create_again) {
      // Its create failed for capacity, or was made by a supervisor that stopped before learning how it went: ask
      // again under the same name (a 409 finds the node if the create got there after all).
      request_slice(d, *open);
      return;
    }
  }
  if (!d.seen.view && !d.seen.once) {
    confirm_absent(d, *open);
    return;
  }
  if (!d.rivals.empty() && run_race(d)) {
    return;
  }
  open = d.open_slice(); // A rival may have taken the attempt's place.
  if (open == nullptr) {
    return;
  }
  const SliceRef slice = SliceRef::of(*open);
  const auto verdict = verdict_of(d.seen.view);
  if (verdict != SliceVerdict::active && outwaited(d, *open)) {
    return;
  }
  if (verdict == SliceVerdict::lost && !open->active_ms && several_candidates(d)) {
    // It failed before it ever came up (its queueingPolicy ran out, say): the next candidate, not a preemption.
    give_up_candidate(d, AttemptOutcome::timed_out, slice.label() + " is " + d.seen.state + slice_error(d));
    return;
  }
  if (auto phase = waiting_phase(verdict)) {
    if (*phase != d.job.phase) {
      move(d, d.job.phase, domain::change_to(*phase, slice.name + " is " + d.seen.state));
    }
    return;
  }
  if (verdict == SliceVerdict::active) {
    activate(d, *open);
    return;
  }
  preempted(d, slice.label() + " is " + d.seen.state + slice_error(d), 143);
}

std::string JobDriver::slice_error(const Driven& d) {
  if (d.seen.view && !d.seen.view->error.empty()) {
    return " (" + d.seen.view->error + ")";
  }
  return {};
}

// A new resource missing from a listing: ask for it by name before calling it lost (listings may lag creates).
void JobDriver::confirm_absent(Driven& d, const domain::AttemptRecord& open) {
  const auto id = d.job.id;
  host_.dispatch(
      d, [this, slices = slices_, counters = counters_, id, slice = SliceRef::of(open)]() -> std::function<void()> {
        ++counters->get_calls;
        auto got = slice.get(*slices);
        return [this, id, got] {
          if (Driven* live = host_.find(id)) {
            live->seen.view = got;
            live->seen.once = true;
            live->seen.state = got ? got->state : "gone";
          }
        };
      });
}

void JobDriver::check_create(Driven& d, const domain::AttemptRecord& open) {
  const auto id = d.job.id;
  host_.dispatch(d,
                 [this, slices = slices_, counters = counters_, id, slice = SliceRef::of(open),
                  operation = d.create_operation]() -> std::function<void()> {
                   ++counters->get_calls;
                   cloud::Operation op;
                   try {
                     op = slices->get_operation(operation);
                   } catch (const cloud::ApiError& e) {
                     if (e.http_status() != 404) {
                       throw;
                     }
                     // The API forgot the operation: the node's name decides (asked for again, a 409 finds it).
                     return [this, id] {
                       if (Driven* live = host_.find(id)) {
                         live->create_operation.clear();
                         live->dirty = true;
                       }
                     };
                   }
                   std::optional<SliceView> got;
                   if (op.done && !op.error) {
                     // Created: the node must be there; ask for it by name, as for any new resource a listing missed.
                     ++counters->get_calls;
                     got = slice.get(*slices);
                   }
                   return [this, id, slice, op, got] {
                     Driven* live = host_.find(id);
                     if (live == nullptr) {
                       return;
                     }
                     if (!op.done) {
                       // Still being created: look again shortly.
                       live->retry_at_ms = host_.now_ms() + host_.scaled(kCreatePollSeconds).count();
                       live->dirty = true;
                       return;
                     }
                     live->create_operation.clear();
                     if (op.error) {
                       create_failed(*live, slice, *op.error);
                       return;
                     }
                     live->seen.view = got;
                     live->seen.once = true;
                     live->seen.state = got ? got->state : "gone";
                     live->dirty = true;
                   };
                 });
}

void JobDriver::create_failed(Driven& d, const SliceRef& slice, const cloud::RpcStatus& error) {
  // google.rpc codes: RESOURCE_EXHAUSTED (no capacity in the zone), ABORTED, INTERNAL, UNAVAILABLE pass; the rest
  // (a bad argument, no permission, no quota for the accelerator at all) will not.
  constexpr int kResourceExhausted = 8;
  const bool transient = error.code == kResourceExhausted || error.code == 10 || error.code == 13 || error.code == 14;
  const std::string why =
      "creating " + slice.label() + " failed: " + error.message + " (code " + std::to_string(error.code) + ")";
  if (!transient) {
    domain::PhaseChange c = domain::change_to(Phase::failed, why);
    c.cleanup_pending = true; // Whatever the failed create left behind is deleted.
    end_open_attempt(d, AttemptOutcome::failed, std::nullopt);
    move(d, std::nullopt, c);
    return;
  }
  d.create_again = true;
  const double wait = backoff(d);
  const std::string reason = why + "; asking again in " + util::format_duration(static_cast<long long>(wait)) +
                             (error.code == kResourceExhausted ? " (waiting for capacity)" : "");
  if (d.job.phase != Phase::queued) {
    move(d, std::nullopt, domain::change_to(Phase::queued, reason));
  } else {
    event(d, "observation", reason, {{"node", slice.name}, {"error", error.message}});
  }
  d.dirty = true;
}

namespace {

// The key jobman connects to a job's hosts with: its public half, and its line in the `ssh-keys` metadata.
struct SshKeyUse {
  std::string public_key; // "TYPE BASE64"; "" when there is none (jobman then leaves the hosts' access alone).
  std::string entry;      // "USER:TYPE BASE64 USER".
};

// What activate learns of a slice's READY nodes and their hosts, on an action thread.
struct HostsFound {
  bool ready = false;                // Every node of the slice is READY.
  std::string waiting_for;           // Otherwise the first node that is not, with its state.
  std::vector<std::string> machines; // The machines under the hosts, by worker (across the slices).
  int hosts = 0;                     // The hosts of every node.
  std::string host0_ip;              // Worker 0's internal address (slice 0's, for a multislice job).
  int without_keys = 0;              // Hosts that have not published their SSH host key yet.
  bool usable = false;               // The hosts can be set up now.
  std::string key_added;             // What was done so that jobman's key opens the hosts; "" when nothing was.
  std::string problem;               // Why the hosts cannot be reached yet, when something failed.
};

// Makes sure jobman's key opens `node`'s hosts, as Google's guest agent decides who may log in: through OS Login when
// it is enabled for the node (`hosts.user` becomes the account OS Login gives the key's owner); otherwise through the
// node's `ssh-keys`, or the project's unless the node blocks them. A node whose metadata lacks the key, in a project
// whose metadata lacks it too, gets it added to its metadata (nodes.patch). Returns what it did ("" when nothing was
// needed); throws what the API said when a call fails.
std::string open_hosts_to(SliceOps& slices, Counters& counters, const std::string& zone, const cloud::Node& node,
                          const SshKeyUse& key, SliceHosts& hosts) {
  std::map<std::string, std::string> project;
  try {
    project = slices.project_metadata();
  } catch (const std::exception& e) {
    // Reading it needs the Compute API: without it, the node's own metadata decides.
    spdlog::warn("reading the project's metadata: {}; going by node {}'s own", e.what(), node.name);
  }
  if (os_login_enabled(node.metadata, project)) {
    hosts.user = slices.os_login_user(key.public_key);
    return {};
  }
  const auto block = node.metadata.find("block-project-ssh-keys");
  const bool project_keys_apply =
      block == node.metadata.end() || util::to_lower(std::string(util::trim(block->second))) != "true";
  if (has_ssh_keys_entry(node.metadata, key.entry) || (project_keys_apply && has_ssh_keys_entry(project, key.entry))) {
    return {};
  }
  auto metadata = node.metadata;
  metadata["ssh-keys"] = with_ssh_keys_entry(metadata["ssh-keys"], key.entry);
  ++counters.mutations;
  const auto id = resource_name_id(node.name);
  slices.set_node_metadata(zone, id, metadata);
  return "added jobman's SSH key (" + key.entry.substr(0, key.entry.find(':')) + ") to the metadata of node " + id +
         ", which lacked it";
}

// What the activation of a slice's READY `nodes` finds: their machines and hosts (kept in `dir`; the hosts of several
// nodes, a multislice job's, as one target's), and whether jobman's key opens them.
HostsFound find_hosts(SliceOps& slices, Counters& counters, const std::string& zone,
                      const std::vector<cloud::Node>& nodes, const SshKeyUse& key, bool over_ssh, bool internal,
                      const std::filesystem::path& dir, const std::string& label) {
  HostsFound found;
  found.ready = true;
  std::vector<std::pair<std::string, SliceHosts>> per_node;
  bool unread = false;
  for (const auto& node : nodes) {
    const auto id = resource_name_id(node.name);
    // One call tells the machines under the hosts and the hosts' keys.
    std::vector<WorkerAttributes> attributes;
    try {
      ++counters.get_calls;
      attributes = slices.guest_attributes(zone, id);
    } catch (const std::exception& e) {
      // The identity only sharpens what is remembered; the slice is used without it. OpenSSH needs the keys; gcloud,
      // left without them, takes the key each host shows the first time.
      spdlog::warn("{}: reading the guest attributes of {}: {}", label, id, e.what());
      unread = true;
    }
    // For either transport: OpenSSH connects with them; gcloud is given the hosts' keys, so that it checks them
    // strictly from the first connection, and their ports. A host publishes its key once it has booted and listens,
    // so both wait for every host's.
    auto hosts = slice_hosts_of(node, attributes, internal);
    for (std::size_t w = 0; w < std::max(hosts.hosts.size(), attributes.size()); ++w) {
      const auto machine = w < attributes.size() ? attributes[w].find(kPhysicalHostAttribute)
                                                 : std::map<std::string, std::string>::const_iterator{};
      found.machines.push_back(w < attributes.size() && machine != attributes[w].end() ? machine->second
                                                                                       : std::string());
    }
    // gcloud opens the hosts to its own key itself.
    if (over_ssh && !key.public_key.empty() && !unread) {
      try {
        const auto added = open_hosts_to(slices, counters, zone, node, key, hosts);
        if (!added.empty()) {
          found.key_added += (found.key_added.empty() ? "" : "; ") + added;
        }
      } catch (const std::exception& e) {
        found.problem = std::string("jobman's SSH key cannot be given access to the hosts: ") + e.what();
      }
    }
    if (found.host0_ip.empty() && !node.network_endpoints.empty()) {
      found.host0_ip = node.network_endpoints.front().ip_address;
    }
    per_node.emplace_back(id, std::move(hosts));
  }
  // Workers at the end that name no machine say nothing about one.
  while (!found.machines.empty() && found.machines.back().empty()) {
    found.machines.pop_back();
  }
  const auto hosts = per_node.size() == 1 ? per_node.front().second : join_slice_hosts(per_node);
  found.hosts = static_cast<int>(hosts.hosts.size());
  found.without_keys = static_cast<int>(
      std::count_if(hosts.host_keys.begin(), hosts.host_keys.end(), [](const std::string& k) { return k.empty(); }));
  save_slice_hosts(dir, hosts);
  // A node just patched is read again: its hosts take the key from the metadata it then has.
  found.usable = unread ? !over_ssh : hosts.complete() && found.key_added.empty() && found.problem.empty();
  return found;
}

} // namespace

// The slice is ACTIVE: find worker 0's address and the machines of its hosts (of every slice, for a multislice job),
// make sure jobman's key opens them, reject the slice if one of its machines is known to be bad or its hosts never
// boot, and go on to SETUP.
void JobDriver::activate(Driven& d, const domain::AttemptRecord& open) {
  const auto id = d.job.id;
  const auto node = open.node;
  const auto zone = open.zone;
  const int number = open.number;
  const auto node_ids = slice_node_ids(node, open.node_only() ? 1 : d.config->tpu.slices);
  const bool over_ssh = access_->settings.transport == config::Transport::ssh;
  const bool internal = reached_internally(*d.config);
  const auto dir = attempt_directory(id, number);
  SshKeyUse key;
  if (over_ssh) {
    try {
      const auto identity = ssh_identity(*d.config);
      key = {ssh_public_key(identity), ssh_keys_entry(identity, remote_user(*d.config))};
    } catch (const std::exception& e) {
      spdlog::warn("{}: jobman's SSH key: {}", job_label(id), e.what());
    }
  }
  host_.dispatch(d,
                 [this, slices = slices_, counters = counters_, id, node, node_ids, zone, number, over_ssh, internal,
                  dir, key]() -> std::function<void()> {
                   std::vector<cloud::Node> nodes;
                   HostsFound found;
                   for (const auto& node_id : node_ids) {
                     ++counters->get_calls;
                     auto got = slices->get_node(zone, node_id);
                     if (!got || got->state != cloud::NodeState::ready) {
                       found.waiting_for = node_id + (got ? " is " + std::string(cloud::to_string(got->state))
                                                          : std::string(" is not there"));
                       break;
                     }
                     nodes.push_back(std::move(*got));
                   }
                   if (found.waiting_for.empty()) {
                     found = find_hosts(*slices, *counters, zone, nodes, key, over_ssh, internal, dir, job_label(id));
                   }
                   return [this, id, node, node_ids, number, found] {
                     Driven* live = host_.find(id);
                     if (live == nullptr) {
                       return;
                     }
                     if (!found.ready) {
                       // Not up yet (or already going away): the next listing decides.
                       live->host_keys_since_ms = 0;
                       live->seen.valid = false;
                       return;
                     }
                     if (!found.key_added.empty()) {
                       event(*live, "observation", found.key_added, {{"node", node}});
                     }
                     if (!found.usable) {
                       hosts_not_ready(*live, node, number, found.without_keys, found.problem);
                       return;
                     }
                     live->host_keys_since_ms = 0;
                     store().attempts().record_slice_active(id, number, found.machines);
                     reload(*live);
                     if (const auto* current = live->current(); current != nullptr && current->number == number &&
                                                                rejects_known_bad(*live, *current, found.machines)) {
                       return;
                     }
                     live->create_operation.clear();
                     live->create_again = false;
                     live->retry_step = 0;
                     const auto what =
                         node_ids.size() == 1
                             ? "node " + node + " is READY with " + std::to_string(found.hosts) + " host(s)"
                             : std::to_string(node_ids.size()) + " slices (nodes " + node_ids.front() + " to " +
                                   node_ids.back() + ") are READY with " + std::to_string(found.hosts) +
                                   " hosts in all";
                     domain::PhaseChange c = domain::change_to(Phase::setup, what);
                     if (!found.host0_ip.empty()) {
                       c.host0_ip = found.host0_ip;
                     }
                     move(*live, std::nullopt, c);
                   };
                 });
}

void JobDriver::hosts_not_ready(Driven& d, const std::string& node, int number, int without_keys,
                                const std::string& problem) {
  // The next listing looks again.
  d.seen.valid = false;
  const auto now = host_.now_ms();
  if (d.host_keys_since_ms == 0) {
    d.host_keys_since_ms = now;
  }
  const auto* current = d.current();
  if (without_keys > 0 && current != nullptr && current->number == number &&
      now - d.host_keys_since_ms >= static_cast<std::int64_t>(kHostKeySeconds * 1000)) {
    // A host that has not booted in ten minutes never will: the slice is replaced, as one on bad hardware is.
    d.host_keys_since_ms = 0;
    const auto what = "node " + node + " is READY but " + std::to_string(without_keys) +
                      " of its hosts published no SSH host key in " +
                      util::format_duration(static_cast<long long>(kHostKeySeconds)) + "; replacing it";
    end_open_attempt(d, AttemptOutcome::rejected, std::nullopt);
    move(d, std::nullopt, domain::change_to(Phase::recovering, what));
    backoff(d);
    return;
  }
  // Said once, in the phase's reason (`jobman show` and `list` tell it), while it lasts: a problem at once, hosts that
  // have not booted once they are late (most publish their keys within seconds of READY).
  const bool late = now - d.host_keys_since_ms >= static_cast<std::int64_t>(kHostKeyLateSeconds * 1000);
  const auto reason = !problem.empty() ? "node " + node + " is READY; " + problem
                      : without_keys > 0 && late
                          ? "node " + node + " is READY; waiting for " + std::to_string(without_keys) +
                                " of its hosts to publish their SSH host keys"
                          : std::string();
  if (!reason.empty() && d.job.phase_reason != reason) {
    move(d, d.job.phase, domain::change_to(d.job.phase, reason));
  }
}

} // namespace jobman::core::supervision
