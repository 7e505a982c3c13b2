// The job driver racing its candidates (tpu.strategy: first-ready): every candidate is requested at once, the first
// to come up becomes the attempt's slice, and the others are deleted as soon as a listing shows it up. A rival's name
// is in the store before its request leaves, as an attempt's is, so no supervisor ever loses track of one; and a
// rival is a held slice until its deletion is confirmed, so at most one slice outlives the race.
#include "job_driver.hpp"
#include "jobman/core/plan.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/rivals.hpp"
#include "jobman/util/strings.hpp"

#include <algorithm>

namespace jobman::core::supervision {

using domain::RivalOutcome;

namespace {

// "v5litepod-16 spot in us-east1-d".
std::string describe_rival(const domain::RivalRecord& r) {
  return r.accelerator + " " + domain::to_string(r.pricing) + " in " + r.zone;
}

// A rival's slice, as an attempt's.
SliceRef slice_of(const domain::RivalRecord& r) {
  return {r.name, r.zone, false};
}

// How a rival's create went.
struct RivalCreate {
  std::string name;
  bool created = false; // The API has it (a 409 included: an earlier request got there).
  bool refused = false; // The API will never accept it (bad argument, no permission, quota).
  std::string error;
};

} // namespace

bool JobDriver::races(const Driven& d) {
  return d.config->tpu.strategy == config::CandidateStrategy::first_ready &&
         d.config->tpu.allocation_mode == config::AllocationMode::queued_resources && several_candidates(d);
}

config::Candidate JobDriver::candidate_at(const Driven& d, const std::string& zone, const std::string& accelerator,
                                          domain::Pricing pricing) {
  config::Candidate candidate{zone, d.config->tpu.accelerator, pricing};
  if (auto found = config::find_accelerator(accelerator)) {
    candidate.accelerator = *found;
  }
  return candidate;
}

void JobDriver::start_race(Driven& d, const std::vector<config::Candidate>& list, const std::string& why) {
  const int number = d.job.attempt + 1;
  auto placement = [&](std::size_t i) {
    const auto name = resource_id(d.job.tpu_name, d.job.id, number, static_cast<int>(i) + 1);
    return domain::Placement{name,
                             name,
                             list[i].zone,
                             list[i].accelerator.name,
                             list[i].accelerator.hosts * d.config->tpu.slices,
                             std::nullopt,
                             list[i].pricing};
  };
  std::vector<domain::Placement> rivals;
  std::vector<std::string> labels{list.front().label()};
  for (std::size_t i = 1; i < list.size(); ++i) {
    rivals.push_back(placement(i));
    labels.push_back(list[i].label());
  }
  store().rivals().begin_race(d.job.id, placement(0), rivals);
  reload(d);
  d.rival_seen.clear();
  event(d, "action",
        "requesting " + std::to_string(list.size()) + " candidates at once, keeping the first to come up (" +
            util::join(labels, "; ") + ")" + (why.empty() ? std::string() : ": " + why),
        {{"strategy", "first-ready"}, {"candidates", labels}});
  request_slice(d, *d.current());
}

bool JobDriver::run_race(Driven& d) {
  const auto* open = d.open_slice();
  if (open == nullptr || d.rivals.empty()) {
    return false;
  }
  // Rivals whose request has not left yet (or whose answer was never recorded): ask, all in one operation.
  std::vector<domain::RivalRecord> unasked;
  for (const auto& r : d.rivals) {
    if (r.create_pending && r.outcome == RivalOutcome::racing) {
      unasked.push_back(r);
    }
  }
  if (!unasked.empty()) {
    request_rivals(d, unasked);
    return true;
  }
  auto racing = [&d] {
    std::vector<domain::RivalRecord> out;
    for (const auto& r : d.rivals) {
      if (r.outcome == RivalOutcome::racing) {
        out.push_back(r);
      }
    }
    return out;
  };
  const auto waited = [this](std::int64_t since) {
    return util::format_duration(std::max<std::int64_t>(0, host_.now_ms() - since) / 1000);
  };
  if (!racing().empty()) {
    if (d.seen.valid && verdict_of(d.seen.view) == SliceVerdict::active) {
      outrun_rivals(d, open->slice_name() + " (" + open->accelerator + " " + domain::to_string(open->pricing) + " in " +
                           open->zone + ") came up first, " + waited(open->started_ms) + " after the request");
    } else {
      for (const auto& r : racing()) {
        const auto seen = d.rival_seen.find(r.name);
        if (seen != d.rival_seen.end() && seen->second.valid && verdict_of(seen->second.view) == SliceVerdict::active) {
          const std::string why = r.name + " (" + describe_rival(r) + ") came up first, " + waited(r.requested_ms) +
                                  " after the request; it becomes attempt " + std::to_string(open->number) + "'s slice";
          promote(d, r.name, RivalOutcome::outrun, why);
          outrun_rivals(d, why);
          break;
        }
      }
    }
  }
  // Rivals that failed (or vanished) before they came up leave the race.
  for (const auto& r : racing()) {
    const auto seen = d.rival_seen.find(r.name);
    if (seen != d.rival_seen.end() && seen->second.valid && seen->second.once &&
        verdict_of(seen->second.view) == SliceVerdict::lost) {
      store().rivals().end(d.job.id, r.name, RivalOutcome::lost);
      event(d, "action", r.name + " (" + describe_rival(r) + ") is " + seen->second.state + "; it leaves the race",
            {{"queued_resource", r.name}, {"state", seen->second.state}});
      reload(d);
    }
  }
  // The attempt's own request failed before it came up while a rival still races: the first of them takes its place.
  if (const auto* now_open = d.open_slice(); now_open != nullptr && !now_open->active_ms && d.seen.valid &&
                                             d.seen.once && verdict_of(d.seen.view) == SliceVerdict::lost) {
    if (const auto left = racing(); !left.empty()) {
      promote(d, left.front().name, RivalOutcome::lost,
              now_open->slice_name() + " is " + d.seen.state + slice_error(d) + "; " + left.front().name + " (" +
                  describe_rival(left.front()) + ") races on as attempt " + std::to_string(now_open->number) +
                  "'s slice");
    }
  }
  return delete_rivals(d);
}

void JobDriver::promote(Driven& d, const std::string& name, RivalOutcome outcome, const std::string& why) {
  const auto* open = d.open_slice();
  const std::string old_name = open->slice_name();
  store().rivals().promote(d.job.id, open->number, name, outcome, why);
  // What the listings said of each swaps with the names.
  const SliceSeen was_primary = d.seen;
  d.seen = d.rival_seen[name];
  d.seen.delete_sent_ms = 0;
  d.rival_seen.erase(name);
  d.rival_seen[old_name] = was_primary;
  d.node_health.reset();
  reload(d);
}

void JobDriver::outrun_rivals(Driven& d, const std::string& why) {
  std::vector<std::string> others;
  for (const auto& r : d.rivals) {
    if (r.outcome == RivalOutcome::racing) {
      const auto seen = d.rival_seen.find(r.name);
      others.push_back(r.name + " (" + r.zone + ", " +
                       (seen != d.rival_seen.end() && !seen->second.state.empty() ? seen->second.state : "requested") +
                       ")");
      store().rivals().end(d.job.id, r.name, RivalOutcome::outrun);
    }
  }
  event(d, "action", why + (others.empty() ? std::string() : "; deleting " + util::join(others, ", ")),
        {{"strategy", "first-ready"}, {"deleting", others}});
  reload(d);
}

bool JobDriver::let_rivals_go(Driven& d) {
  if (d.rivals.empty()) {
    return true;
  }
  bool abandoned = false;
  for (const auto& r : d.rivals) {
    if (r.outcome == RivalOutcome::racing) {
      store().rivals().end(d.job.id, r.name, RivalOutcome::abandoned);
      abandoned = true;
    }
  }
  if (abandoned) {
    reload(d);
  }
  delete_rivals(d);
  return d.rivals.empty();
}

bool JobDriver::delete_rivals(Driven& d) {
  std::vector<domain::RivalRecord> to_delete;
  bool released = false;
  for (const auto& r : d.rivals) {
    if (r.outcome == RivalOutcome::racing) {
      continue;
    }
    auto& seen = d.rival_seen[r.name];
    if (seen.valid && !seen.view && (seen.once || seen.delete_sent_ms > 0)) {
      store().attempts().mark_released(d.job.id, r.name, seen.delete_sent_ms > 0 ? "deleted" : "gone from the cloud");
      d.rival_seen.erase(r.name);
      released = true;
      continue;
    }
    const bool deleting = seen.valid && seen.view && seen.view->verdict == SliceVerdict::deleting;
    const bool resend = seen.delete_sent_ms > 0 && host_.now_ms() - seen.delete_sent_ms > host_.scaled(600).count();
    if (seen.delete_sent_ms == 0 || (resend && !deleting)) {
      to_delete.push_back(r);
    }
  }
  if (released) {
    reload(d);
  }
  if (to_delete.empty()) {
    return false;
  }
  const auto id = d.job.id;
  host_.dispatch(d, [this, slices = slices_, counters = counters_, id, to_delete]() -> std::function<void()> {
    // Per rival: nullopt when the delete was sent, else "" (already gone) or the error.
    std::vector<std::pair<std::string, std::optional<std::string>>> results;
    for (const auto& r : to_delete) {
      try {
        ++counters->mutations;
        const bool gone = !slice_of(r).remove(*slices).has_value();
        results.emplace_back(r.name, gone ? std::optional<std::string>("") : std::nullopt);
      } catch (const std::exception& e) {
        results.emplace_back(r.name, std::string(e.what()));
      }
    }
    return [this, id, results] {
      Driven* live = host_.find(id);
      if (live == nullptr) {
        return;
      }
      for (const auto& [name, problem] : results) {
        if (!problem) {
          auto& seen = live->rival_seen[name];
          seen.delete_sent_ms = host_.now_ms();
          seen.valid = false;
        } else if (problem->empty()) {
          store().attempts().mark_released(id, name, "already gone");
          live->rival_seen.erase(name);
        } else {
          error_event(*live, "deleting " + name + ": " + *problem);
        }
      }
      reload(*live);
    };
  });
  return true;
}

void JobDriver::request_rivals(Driven& d, const std::vector<domain::RivalRecord>& rivals) {
  std::vector<std::pair<domain::RivalRecord, nlohmann::json>> requests;
  for (const auto& r : rivals) {
    const auto candidate = candidate_at(d, r.zone, r.accelerator, r.pricing);
    requests.emplace_back(r, create_request_body(config::candidate_config(*d.config, candidate), access_->project,
                                                 d.job.id, d.job.user, r.attempt, r.name));
    with_ssh_key(d, requests.back().second);
  }
  const auto id = d.job.id;
  host_.dispatch(d, [this, slices = slices_, counters = counters_, id, requests]() -> std::function<void()> {
    std::vector<RivalCreate> results;
    for (const auto& [r, body] : requests) {
      RivalCreate result;
      result.name = r.name;
      try {
        ++counters->mutations;
        const auto created = slices->create_queued_resource(r.zone, r.name, body);
        if (created.existing) {
          refuse_another_stores_resource(r.name, created.existing->node_labels, request_node_labels(body));
        }
        result.created = true;
      } catch (const cloud::ApiError& e) {
        const int status = e.http_status();
        result.created = status == 409;
        result.refused = status == 400 || status == 403 || status == 404 || status == 429;
        result.error = e.what();
      }
      results.push_back(std::move(result));
    }
    return [this, id, results] {
      Driven* live = host_.find(id);
      if (live == nullptr) {
        return;
      }
      bool retry = false;
      for (const auto& result : results) {
        if (result.created) {
          store().rivals().confirm_created(id, result.name);
        } else if (result.refused) {
          // Never created: it leaves the race with nothing to delete.
          store().rivals().end(id, result.name, RivalOutcome::lost);
          store().attempts().mark_released(id, result.name, "the TPU API refused it: " + result.error);
        } else {
          error_event(*live, "requesting " + result.name + ": " + result.error);
          retry = true;
        }
      }
      reload(*live);
      if (retry) {
        backoff(*live);
      }
    };
  });
}

bool JobDriver::promote_after_refusal(Driven& d, const std::string& refused, const std::string& message) {
  const auto next =
      std::find_if(d.rivals.begin(), d.rivals.end(), [](const auto& r) { return r.outcome == RivalOutcome::racing; });
  if (next == d.rivals.end()) {
    return false;
  }
  const domain::RivalRecord rival = *next; // promote() reloads d.rivals.
  promote(d, rival.name, RivalOutcome::lost,
          refused + " was refused (" + message + "); " + rival.name + " (" + describe_rival(rival) +
              ") races on as the attempt's slice");
  store().attempts().mark_released(d.job.id, refused, "the TPU API refused it");
  reload(d);
  return true;
}

} // namespace jobman::core::supervision
