// Building the model, part one: the job, tpu (its gcloud flags included), command.workers and recovery sections,
// each by a function of its own.
#include "accelerator_shapes.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/util/line_patterns.hpp"
#include "loader_parts.hpp"
#include "schema.hpp"

#include <algorithm>
#include <climits>
#include <set>

namespace jobman::config::detail {

namespace {

// Splits "k=v,k2=v2" (gcloud's --labels and --metadata form).
std::vector<std::pair<std::string, std::string>> key_values(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& item : util::split(text, ',')) {
    const auto eq = item.find('=');
    out.emplace_back(std::string(util::trim(item.substr(0, eq))),
                     eq == std::string::npos ? std::string() : std::string(util::trim(item.substr(eq + 1))));
  }
  return out;
}

// Moves the gcloud flags that have a TPU API equivalent into the model; names the rest in one warning.
void apply_tpu_flags(Problems& p, const Section& tpu, TpuSection& out) {
  const Node* node = tpu.get("flags");
  if (node == nullptr || node->is_null() || node->unresolved) {
    return;
  }
  if (!node->is_sequence()) {
    p.error(node->origin, tpu.path("flags"), "expected a list of gcloud flags, got " + detail::describe_kind(*node));
    return;
  }
  static const std::set<std::string, std::less<>> with_value{
      "--network", "--subnetwork", "--service-account", "--reservation", "--tags", "--labels", "--metadata"};
  static const std::set<std::string, std::less<>> switches{"--reserved", "--internal-ips"};
  const std::string path = tpu.path("flags");
  std::vector<std::string> rest;
  const auto set_string = [&](std::string& field, const std::string& key, const std::string& value, const Node& at,
                              const std::string& item_path) {
    if (!field.empty() && field != value) {
      p.error(at.origin, item_path, "conflicts with " + tpu.path(key) + " '" + field + "'");
      return;
    }
    field = value;
  };
  for (std::size_t i = 0; i < node->items.size(); ++i) {
    const Node& item = node->items[i];
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    const auto text = as_string(p, item, item_path);
    if (!text) {
      continue;
    }
    std::string name = *text;
    std::optional<std::string> value;
    if (const auto sep = text->find_first_of("= "); sep != std::string::npos && text->starts_with("--")) {
      name = text->substr(0, sep);
      value = std::string(util::trim(text->substr(sep + 1)));
    }
    if (switches.contains(name)) {
      if (value && !value->empty() && util::to_lower(*value) != "true") {
        p.error(item.origin, item_path, name + " takes no value");
        continue;
      }
      (name == "--reserved" ? out.reserved : out.internal_ips) = true;
      continue;
    }
    if (!with_value.contains(name)) {
      rest.push_back(*text);
      continue;
    }
    if (!value) {
      const bool next_is_value =
          i + 1 < node->items.size() && node->items[i + 1].is_scalar() && !node->items[i + 1].text.starts_with("-");
      if (!next_is_value) {
        p.error(item.origin, item_path, name + " needs a value");
        continue;
      }
      value = node->items[++i].text;
    }
    if (name == "--network") {
      set_string(out.network, "network", *value, item, item_path);
    } else if (name == "--subnetwork") {
      set_string(out.subnetwork, "subnetwork", *value, item, item_path);
    } else if (name == "--service-account") {
      set_string(out.service_account, "service_account", *value, item, item_path);
    } else if (name == "--reservation") {
      set_string(out.reservation, "reservation", *value, item, item_path);
    } else if (name == "--tags") {
      for (const auto& tag : util::split(*value, ',')) {
        const std::string trimmed(util::trim(tag));
        check_tag(p, item.origin, item_path, trimmed);
        if (std::find(out.tags.begin(), out.tags.end(), trimmed) == out.tags.end()) {
          out.tags.push_back(trimmed);
        }
      }
    } else {
      auto& target = name == "--labels" ? out.labels : out.metadata;
      for (const auto& [key, entry_value] : key_values(*value)) {
        if (name == "--labels") {
          check_label(p, item.origin, item.origin, item_path, key, entry_value);
        } else if (key.empty()) {
          p.error(item.origin, item_path, "--metadata needs KEY=VALUE pairs");
          continue;
        }
        if (auto it = target.find(key); it != target.end() && it->second != entry_value) {
          p.error(item.origin, item_path,
                  "conflicts with " + tpu.path(name == "--labels" ? "labels" : "metadata") + "." + key + " '" +
                      it->second + "'");
          continue;
        }
        target[key] = entry_value;
      }
    }
  }
  if (!rest.empty()) {
    p.warn(node->origin, path,
           "jobman creates slices through the TPU API, which has no equivalent of " + util::join(rest, ", ") +
               "; not applied");
  }
  out.flags = rest;
}

} // namespace

WorkerSelection build_workers(Problems& p, const Node* node, const std::string& path,
                              const std::optional<AcceleratorType>& accelerator) {
  WorkerSelection out;
  if (node == nullptr || node->is_null() || node->unresolved) {
    return out;
  }
  std::vector<const Node*> items;
  if (node->is_scalar() && node->text == "all") {
    return out;
  }
  if (node->is_scalar()) {
    items.push_back(node);
  } else if (node->is_sequence()) {
    for (const auto& item : node->items) {
      items.push_back(&item);
    }
    if (items.empty()) {
      p.error(node->origin, path, "the list of workers is empty", "write \"all\" or at least one worker index");
      return out;
    }
  } else {
    p.error(node->origin, path,
            "expected \"all\", a worker index or a list of indices, got " + detail::describe_kind(*node));
    return out;
  }
  out.all = false;
  for (const Node* item : items) {
    if (item->is_scalar() && !util::parse_int(item->text)) {
      p.error(item->origin, path, "expected \"all\", a worker index or a list of indices, got '" + item->text + "'");
      continue;
    }
    const auto index = as_int(p, *item, path, INT_MIN, INT_MAX);
    if (!index) {
      continue;
    }
    if (accelerator && (*index < 0 || *index >= accelerator->hosts)) {
      p.error(item->origin, path, "worker " + std::to_string(*index) + " does not exist on " + accelerator->name,
              hosts_text(accelerator->hosts));
      continue;
    }
    if (*index < 0) {
      p.error(item->origin, path, "worker " + std::to_string(*index) + " does not exist", "worker indices start at 0");
      continue;
    }
    if (std::find(out.indices.begin(), out.indices.end(), static_cast<int>(*index)) != out.indices.end()) {
      p.error(item->origin, path, "worker " + std::to_string(*index) + " is listed twice");
      continue;
    }
    out.indices.push_back(static_cast<int>(*index));
  }
  std::sort(out.indices.begin(), out.indices.end());
  return out;
}

void build_job(Problems& p, const Section& s, JobSection& out) {
  out.name = s.str("name", Presence::required).value_or("");
  out.env_type =
      s.choice<EnvType>(
           "env_type",
           {{"none", EnvType::none}, {"venv", EnvType::venv}, {"conda", EnvType::conda}, {"docker", EnvType::docker}})
          .value_or(EnvType::none);
  // The Python jobman loops when job.loop is true in Python's sense: any other word than these (not empty) too.
  const Node* loop = s.get("loop");
  static const std::set<std::string> words{"true", "false", "yes", "no", "on", "off"};
  if (loop != nullptr && loop->is_scalar() && !loop->unresolved && loop->origin.file != "--set" &&
      !words.contains(util::to_lower(loop->text)) && !util::parse_int(loop->text)) {
    out.loop = !loop->text.empty();
    p.warn(loop->origin, s.path("loop"),
           "'" + loop->text + "' is not true or false: " + (out.loop ? "looping" : "not looping") +
               ", as the Python jobman reads it (write true or false)");
  } else {
    out.loop = s.boolean("loop").value_or(true);
  }
  out.remote_user = s.str("remote_user").value_or("");
  if (const Node* progress = s.get("progress"); progress != nullptr && !progress->unresolved) {
    if (auto pattern = s.str("progress")) {
      if (auto why = util::ProgressPattern::check(*pattern); why && !pattern->empty()) {
        p.error(progress->origin, s.path("progress"),
                "'" + *pattern + "' cannot read the step: " + *why +
                    " (the first group of digits is the step, a "
                    "later one the total; \"\" turns progress off)");
      } else {
        out.progress = *pattern;
      }
    }
  }
  if (const Node* loss = s.get("loss"); loss != nullptr && !loss->unresolved) {
    if (auto pattern = s.str("loss")) {
      if (auto why = util::LossPattern::check(*pattern); why && !pattern->empty()) {
        p.error(loss->origin, s.path("loss"),
                "'" + *pattern + "' cannot read the loss: " + *why +
                    " (the first group that holds a number is the loss; \"\" turns loss reading off)");
      } else {
        out.loss = *pattern;
      }
    }
  }
  out.experiment = s.str("experiment").value_or("");
}

namespace {

// tpu.pricing as the Python jobman reads it: spot and preemptible ask for those tiers, and anything else (null, a
// misspelling, another case) asks for neither, which is on-demand. The usual ways of writing on-demand are taken as
// they are; the others are taken as the Python jobman takes them, with a warning. Absent, the job is spot (the Python
// jobman cannot run without the key).
Pricing build_pricing(Problems& p, const Section& s) {
  const Node* value = s.get("pricing");
  if (value == nullptr || value->unresolved) {
    return Pricing::spot;
  }
  if (value->is_null()) {
    p.warn(s.origin("pricing"), s.path("pricing"),
           "null: on-demand, as the Python jobman reads it (write spot or preemptible for those tiers)");
    return Pricing::ondemand;
  }
  const auto text = as_string(p, *value, s.path("pricing"));
  if (!text) {
    return Pricing::spot;
  }
  if (const auto pricing = domain::parse_pricing(*text)) {
    return *pricing;
  }
  std::vector<std::string> names;
  for (const auto pricing : domain::all_pricings()) {
    names.push_back(to_string(pricing));
  }
  const std::string hint = detail::suggestion(util::to_lower(*text), names);
  p.warn(value->origin, s.path("pricing"),
         "'" + *text +
             "' is not spot, preemptible, flex-start, reserved or best-effort: on-demand, as the Python jobman reads "
             "it" +
             (hint.empty() ? "" : " (" + hint + ")"));
  return Pricing::ondemand;
}

// tpu.pricing as a list, jobman's own: the tiers a job may fail over between, in the order written, each a name
// parse_pricing takes (no Python jobman reads a list, so an unknown one is an error, not on-demand).
std::vector<Pricing> build_pricing_list(Problems& p, const Section& s, const Node& list) {
  std::vector<Pricing> out;
  if (list.items.empty()) {
    p.error(list.origin, s.path("pricing"), "an empty list: name at least one pricing");
  }
  std::vector<std::string> names;
  for (const auto pricing : domain::all_pricings()) {
    names.push_back(to_string(pricing));
  }
  for (std::size_t i = 0; i < list.items.size(); ++i) {
    const std::string path = s.path("pricing") + "[" + std::to_string(i) + "]";
    const auto text = as_string(p, list.items[i], path);
    if (!text) {
      continue;
    }
    const auto pricing = domain::parse_pricing(*text);
    if (!pricing) {
      const std::string hint = detail::suggestion(util::to_lower(*text), names);
      p.error(list.items[i].origin, path,
              "'" + *text + "' is not a pricing" + (hint.empty() ? " (" + util::join(names, ", ") + ")" : "; " + hint));
    } else if (std::find(out.begin(), out.end(), *pricing) != out.end()) {
      p.error(list.items[i].origin, path, display_name(*pricing) + " is listed twice");
    } else {
      out.push_back(*pricing);
    }
  }
  return out;
}

// tpu.pricing, one value (as the Python jobman reads it) or a list: out.pricing is the first, out.pricings all.
void build_pricings(Problems& p, const Section& s, TpuSection& out) {
  const Node* value = s.get("pricing");
  out.pricings.clear();
  if (value != nullptr && !value->unresolved && value->is_sequence()) {
    out.pricings = build_pricing_list(p, s, *value);
  }
  if (out.pricings.empty()) {
    out.pricings = {build_pricing(p, s)};
  }
  out.pricing = out.pricings.front();
}

} // namespace

namespace {

// tpu.max_run_duration and the provisioning model's other needs: flex-start runs for a set time (required, at most
// seven days) and, like best-effort, exists only as a queued resource; tpu.reserved (gcloud's --reserved) asks for a
// reservation, which spot, preemptible, flex-start and best-effort capacity cannot use (without tpu.pricing, it or
// tpu.reservation makes the job reserved).
void build_provisioning(Problems& p, const Section& s, TpuSection& out) {
  out.max_run_duration_seconds = s.duration("max_run_duration", 1);
  if (s.get("pricing") == nullptr && (out.reserved || !out.reservation.empty())) {
    out.pricing = Pricing::reserved; // A reservation asked for, and no pricing written: the reservation's.
    out.pricings = {Pricing::reserved};
  }
  const auto has = [&](Pricing pricing) {
    return std::find(out.pricings.begin(), out.pricings.end(), pricing) != out.pricings.end();
  };
  const std::string model = display_name(out.pricing);
  if (has(Pricing::flex_start)) {
    if (!out.max_run_duration_seconds) {
      if (s.get("max_run_duration") == nullptr) {
        p.error(s.origin("pricing"), s.path("pricing"),
                "flex-start needs tpu.max_run_duration: how long each slice runs before the cloud ends it (at most "
                "7d, e.g. 3h)");
      }
    } else if (*out.max_run_duration_seconds > kMaxRunDurationSeconds) {
      p.error(s.origin("max_run_duration"), s.path("max_run_duration"),
              detail::exact_duration(*out.max_run_duration_seconds) +
                  " is longer than a flex-start slice may run (at most 7d)");
      out.max_run_duration_seconds.reset();
    }
  } else if (out.max_run_duration_seconds) {
    p.warn(s.origin("max_run_duration"), s.path("max_run_duration"),
           "ignored: only a flex-start slice has a run duration (pricing is " + model + ")");
    out.max_run_duration_seconds.reset();
  }
  for (const auto only_queued : {Pricing::flex_start, Pricing::best_effort}) {
    if (has(only_queued) && out.allocation_mode == AllocationMode::tpu_vm) {
      p.error(s.origin("allocation_mode"), s.path("allocation_mode"),
              display_name(only_queued) +
                  " capacity comes only through a queued resource: remove allocation_mode tpu-vm");
      break;
    }
  }
  // Where tpu.reserved and tpu.reservation were given: their key, else the gcloud flag in tpu.flags that set them.
  const auto given_in = [&](const std::string& key) {
    return s.get(key) == nullptr && s.get("flags") != nullptr ? std::string("flags") : key;
  };
  for (const char* key : {"reserved", "reservation"}) {
    const Origin& at = s.origin(given_in(key));
    out.origins[key] = SourceLocation{at.file, at.line, at.column, s.path(given_in(key))};
    const bool asked = std::string_view(key) == "reserved" ? out.reserved : !out.reservation.empty();
    if (asked && !has(Pricing::reserved) && !has(Pricing::ondemand)) {
      p.error(at, s.path(given_in(key)),
              "a reservation cannot hold " + model +
                  " capacity: write pricing: reserved (with tpu.reservation: NAME for one reservation), or drop " +
                  key);
    }
  }
  // A reservation's full name must be one, in a zone the job asks for a slice in (a bare name is the project's own in
  // the job's zone).
  if (out.reservation.find('/') != std::string::npos) {
    const auto parts = util::split(out.reservation, '/');
    const std::string key = given_in("reservation");
    if (parts.size() != 6 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "reservations" ||
        std::any_of(parts.begin(), parts.end(), [](const std::string& part) { return part.empty(); })) {
      p.error(s.origin(key), s.path(key),
              "'" + out.reservation +
                  "' is not a reservation's name: write NAME, or projects/PROJECT/locations/ZONE/reservations/NAME");
    } else if (std::find(out.zones.begin(), out.zones.end(), parts[3]) == out.zones.end()) {
      p.error(s.origin(key), s.path(key),
              "reservation '" + out.reservation + "' is in " + parts[3] +
                  ", where the job asks for no slice (tpu.zone: " + util::join(out.zones, ", ") + ")");
    }
  }
}

// tpu.slices: how many slices of the accelerator the job runs on at once, 1 to kMaxSlices; more than one only through
// a queued resource (nodes.create makes one slice).
void build_slices(Problems& p, const Section& s, TpuSection& out) {
  const auto slices = s.integer("slices", 1, INT_MAX);
  if (!slices) {
    return;
  }
  if (*slices > kMaxSlices) {
    p.error(s.origin("slices"), s.path("slices"),
            std::to_string(*slices) + " slices is more than one queued resource may ask for (at most " +
                std::to_string(kMaxSlices) + ")");
    return;
  }
  out.slices = static_cast<int>(*slices);
  if (out.slices > 1 && out.allocation_mode == AllocationMode::tpu_vm) {
    p.error(s.origin("slices"), s.path("slices"),
            std::to_string(out.slices) +
                " slices come only through a queued resource, and allocation_mode tpu-vm creates one node",
            "remove allocation_mode tpu-vm, or ask for one slice");
  }
}

} // namespace

namespace {

// A key that may hold one string or a list of them (tpu.zone, tpu.accelerator): its strings, each once.
std::vector<std::string> string_or_list(Problems& p, const Section& s, const std::string& key,
                                        Presence presence = Presence::optional) {
  const Node* node = s.get(key, presence);
  std::vector<std::string> out;
  if (node == nullptr || node->is_null() || node->unresolved) {
    return out;
  }
  if (!node->is_sequence()) {
    if (auto text = as_string(p, *node, s.path(key))) {
      out.push_back(*text);
    }
    return out;
  }
  if (node->items.empty()) {
    p.error(node->origin, s.path(key), "an empty list: give at least one");
  }
  for (std::size_t i = 0; i < node->items.size(); ++i) {
    const std::string path = s.path(key) + "[" + std::to_string(i) + "]";
    if (auto text = as_string(p, node->items[i], path)) {
      if (std::find(out.begin(), out.end(), *text) != out.end()) {
        p.error(node->items[i].origin, path, "'" + *text + "' is listed twice");
      } else {
        out.push_back(*text);
      }
    }
  }
  return out;
}

// tpu.accelerator: one type, or a list of equivalents to take whichever has capacity.
std::vector<AcceleratorType> build_accelerators(Problems& p, const Section& s) {
  std::vector<AcceleratorType> out;
  const Node* node = s.get("accelerator");
  const bool listed = node != nullptr && node->is_sequence();
  const auto names = string_or_list(p, s, "accelerator", Presence::required);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string path = listed ? s.path("accelerator") + "[" + std::to_string(i) + "]" : s.path("accelerator");
    const Origin& at = listed ? node->items[i].origin : s.origin("accelerator");
    std::string why;
    bool off_catalog = false;
    auto accelerator = detail::find_accelerator(names[i], &why, &off_catalog);
    if (!accelerator) {
      p.error(at, path, why);
      continue;
    }
    // The Python jobman sends any size to the cloud, which knows the shapes it offers.
    if (off_catalog) {
      p.warn(at, path,
             why + ": it is requested as written, with " + std::to_string(accelerator->hosts) +
                 " hosts, and the cloud's list of the zone's accelerator types decides");
    }
    if (std::any_of(out.begin(), out.end(), [&](const auto& a) { return a.name == accelerator->name; })) {
      p.error(at, path, "'" + accelerator->name + "' is listed twice");
      continue;
    }
    out.push_back(*accelerator);
  }
  return out;
}

} // namespace

std::optional<AcceleratorType> build_tpu(Problems& p, const Section& s, const BuildContext& ctx, const JobSection& job,
                                         TpuSection& out) {
  out.allocation_mode =
      s.choice<AllocationMode>("allocation_mode", {{"queued-resources", AllocationMode::queued_resources},
                                                   {"tpu-vm", AllocationMode::tpu_vm}})
          .value_or(AllocationMode::queued_resources);
  out.accelerators = build_accelerators(p, s);
  std::optional<AcceleratorType> accelerator;
  if (!out.accelerators.empty()) {
    out.accelerator = out.accelerators.front();
    accelerator = out.accelerator;
  }
  out.name = s.str("name").value_or(job.name);
  out.zones = string_or_list(p, s, "zone");
  if (out.zones.size() == 1 && out.zones.front().empty()) {
    out.zones.clear(); // A task's snapshot writes "" for any zone.
  }
  if (!out.zones.empty()) {
    out.zone = out.zones.front();
  } else if (!ctx.default_zone.empty()) {
    out.zone = ctx.default_zone;
    out.zones = {out.zone};
  } else if (const Node* node = s.get("zone"); !ctx.zone_optional && (node == nullptr || !node->unresolved)) {
    s.missing("zone", "set tpu.zone, or a default zone in settings.yaml (zone:) or JOBMAN_ZONE");
  }
  for (const auto& zone : out.zones) {
    if (auto problem = detail::zone_problem(zone)) {
      p.error(s.origin("zone"), s.path("zone"), problem->first, problem->second);
      continue;
    }
    // A single pair is checked against the catalog of zones (advisory); lists are the user's deliberate choice.
    if (accelerator && out.zones.size() == 1 && out.accelerators.size() == 1) {
      const auto& zones = accelerator->generation->zones;
      if (std::find(zones.begin(), zones.end(), zone) == zones.end()) {
        p.warn(s.origin("zone"), s.path("zone"),
               accelerator->generation->name + " is not offered in " + zone +
                   " as far as jobman knows (known: " + util::join(zones, ", ") + ")");
      }
    }
  }
  out.order = s.choice<CandidateOrder>(
                   "order", {{"learned", CandidateOrder::learned}, {"as-written", CandidateOrder::as_written}})
                  .value_or(CandidateOrder::learned);
  out.strategy = s.choice<CandidateStrategy>("strategy", {{"sequential", CandidateStrategy::sequential},
                                                          {"first-ready", CandidateStrategy::first_ready}})
                     .value_or(CandidateStrategy::sequential);
  if (out.strategy == CandidateStrategy::first_ready && out.allocation_mode == AllocationMode::tpu_vm) {
    p.error(s.origin("strategy"), s.path("strategy"),
            "first-ready races queued resources, and tpu.allocation_mode is tpu-vm (nodes created directly)",
            "use allocation_mode: queued-resources, or strategy: sequential");
  }
  if (auto version = s.str("version")) {
    out.version = *version;
    out.version_given = true;
    std::set<std::string> generations;
    for (const auto& a : out.accelerators) {
      generations.insert(a.generation->name);
    }
    if (generations.size() > 1) {
      p.error(s.origin("version"), s.path("version"),
              "one runtime version for accelerators of " + std::to_string(generations.size()) + " generations (" +
                  util::join(std::vector<std::string>(generations.begin(), generations.end()), ", ") + ")",
              "leave tpu.version out: each accelerator then runs its generation's usual runtime");
    }
    if (accelerator) {
      const auto& mine = accelerator->generation->runtime_versions;
      if (std::find(mine.begin(), mine.end(), out.version) == mine.end()) {
        for (const auto& other : tpu_generations()) {
          const auto& theirs = other.runtime_versions;
          if (std::find(theirs.begin(), theirs.end(), out.version) != theirs.end()) {
            p.warn(s.origin("version"), s.path("version"),
                   "runtime version '" + out.version + "' is meant for " + other.name + ", not " +
                       accelerator->generation->name + " (" + accelerator->generation->name + " usually runs " +
                       mine.front() + ")");
            break;
          }
        }
      }
    }
  } else if (accelerator) {
    out.version = accelerator->generation->runtime_versions.front();
  }
  for (const char* key : {"accelerator", "zone", "version", "pricing", "slices"}) {
    const Origin& at = s.origin(key);
    out.origins[key] = SourceLocation{at.file, at.line, at.column, s.path(key)};
  }
  build_pricings(p, s, out);
  out.startup_script = s.str("startup_script");
  out.tags = s.str_list("tags");
  for (std::size_t i = 0; i < out.tags.size(); ++i) {
    check_tag(p, s.get("tags")->items[i].origin, s.path("tags") + "[" + std::to_string(i) + "]", out.tags[i]);
  }
  out.metadata = s.str_map("metadata");
  if (out.startup_script && out.metadata.contains("startup-script")) {
    p.error(s.origin("startup_script"), s.path("startup_script"),
            "conflicts with tpu.metadata.startup-script; give the script once");
  }
  out.labels = s.str_map("labels");
  if (const Node* labels = s.get("labels"); labels != nullptr && labels->is_mapping()) {
    for (const auto& entry : labels->entries) {
      if (auto it = out.labels.find(entry.key); it != out.labels.end()) {
        check_label(p, entry.key_origin, entry.value.origin, join_path(s.path("labels"), entry.key), entry.key,
                    it->second);
      }
    }
  }
  out.queue_timeout_seconds = s.duration("queue_timeout", 1);
  if (out.queue_timeout_seconds && out.allocation_mode == AllocationMode::tpu_vm) {
    p.warn(s.origin("queue_timeout"), s.path("queue_timeout"),
           "ignored: allocation_mode tpu-vm creates the slice directly, without a queue");
  }
  out.network = s.str("network").value_or("");
  out.subnetwork = s.str("subnetwork").value_or("");
  out.service_account = s.str("service_account").value_or("");
  out.reservation = s.str("reservation").value_or("");
  out.preflight = s.str("preflight").value_or("");
  out.reserved = s.boolean("reserved").value_or(false);
  out.internal_ips = s.boolean("internal_ips").value_or(false);
  out.keep_on_success = s.boolean("keep_on_success").value_or(false);
  out.idle_release_seconds = s.duration("idle_release", 1);
  apply_tpu_flags(p, s, out);
  build_provisioning(p, s, out);
  build_slices(p, s, out);
  // command.workers must fit the smallest of the equivalents.
  for (const auto& a : out.accelerators) {
    if (accelerator && a.hosts < accelerator->hosts) {
      accelerator = a;
    }
  }
  return accelerator;
}

namespace {

// recovery.loss_spike: a mapping of its settings (each with a default), or null or false for none.
void build_loss_spike(Problems& p, const Section& s, RecoverySection& out) {
  const Node* node = s.get("loss_spike");
  if (node == nullptr || node->is_null() || node->unresolved) {
    return;
  }
  if (node->is_scalar()) {
    if (const auto off = s.boolean("loss_spike"); off && !*off) {
      return;
    }
    p.error(node->origin, s.path("loss_spike"),
            "expected a mapping (factor, window, min_steps, max_rollbacks, skip_steps) or false, got '" + node->text +
                "'");
    return;
  }
  const Section spike(p, node, s.path("loss_spike"), s.origin("loss_spike"), "recovery.loss_spike");
  RecoverySection::LossSpike settings;
  if (const Node* factor = spike.get("factor"); factor != nullptr && !factor->is_null()) {
    const auto value = as_double(p, *factor, spike.path("factor"), 1.0);
    if (value && *value <= 1.0) {
      p.error(factor->origin, spike.path("factor"),
              "must be above 1: a loss above factor times the recent median is a spike");
    } else if (value) {
      settings.factor = *value;
    }
  }
  settings.window = static_cast<int>(spike.integer("window", 1, 100'000).value_or(settings.window));
  settings.min_steps = spike.integer("min_steps", 0, INT64_MAX / 2).value_or(settings.min_steps);
  settings.max_rollbacks =
      static_cast<int>(spike.integer("max_rollbacks", 0, INT_MAX).value_or(settings.max_rollbacks));
  settings.skip_steps = spike.integer("skip_steps", 0, INT64_MAX / 2).value_or(settings.skip_steps);
  out.loss_spike = settings;
}

} // namespace

void build_recovery(Problems& p, const Section& s, const Origin& file_origin, bool loop, RecoverySection& out) {
  bool explicit_preemptions = false;
  if (const Node* node = s.get("max_preemptions")) {
    explicit_preemptions = true;
    if (node->is_null() || (node->is_scalar() && util::to_lower(node->text) == "unlimited")) {
      out.max_preemptions = std::nullopt;
    } else if (node->is_scalar() && !util::parse_int(node->text) && !node->text.empty() &&
               node->text.find_first_not_of("-+0123456789") != std::string::npos) {
      p.error(node->origin, s.path("max_preemptions"),
              "expected a number of preemptions or \"unlimited\", got '" + node->text + "'");
    } else if (auto value = as_int(p, *node, s.path("max_preemptions"), 0, INT_MAX)) {
      out.max_preemptions = static_cast<int>(*value);
    }
  }
  if (!loop && !explicit_preemptions) {
    out.max_preemptions = 0;
  }
  out.max_failures = static_cast<int>(s.integer("max_failures", 0, INT_MAX).value_or(0));
  if (const Node* codes = s.get("restart_exit_codes")) {
    out.restart_exit_codes.clear();
    if (codes->is_sequence()) {
      for (std::size_t i = 0; i < codes->items.size(); ++i) {
        const std::string path = s.path("restart_exit_codes") + "[" + std::to_string(i) + "]";
        if (auto code = as_int(p, codes->items[i], path, 1, 255)) {
          if (std::find(out.restart_exit_codes.begin(), out.restart_exit_codes.end(), *code) !=
              out.restart_exit_codes.end()) {
            p.error(codes->items[i].origin, path, "exit code " + std::to_string(*code) + " is listed twice");
          } else {
            out.restart_exit_codes.push_back(static_cast<int>(*code));
          }
        }
      }
    } else if (!codes->is_null() && !codes->unresolved) {
      p.error(codes->origin, s.path("restart_exit_codes"),
              "expected a list of exit codes (1-255), got " + detail::describe_kind(*codes));
    }
  }
  out.poll_interval_seconds = s.duration("poll_interval", 1).value_or(30);
  const Node* backoff_node = s.get("backoff");
  const Section backoff(p, backoff_node, s.path("backoff"), s.present() ? s.origin("backoff") : file_origin,
                        "recovery.backoff");
  out.backoff_initial_seconds = backoff.duration("initial", 0).value_or(10);
  out.backoff_max_seconds = backoff.duration("max", 0).value_or(600);
  if (const Node* multiplier = backoff.get("multiplier"); multiplier != nullptr && !multiplier->is_null()) {
    out.backoff_multiplier = as_double(p, *multiplier, backoff.path("multiplier"), 1.0).value_or(2.0);
  }
  out.max_bad_hardware = static_cast<int>(s.integer("max_bad_hardware", 0, INT_MAX).value_or(3));
  out.maintenance_lead_seconds = s.duration("maintenance_lead", 0).value_or(600);
  out.deadline_lead_seconds = s.duration("deadline_lead", 0).value_or(300);
  if (const Node* node = s.get("max_runs"); node != nullptr) {
    if (node->is_null() || (node->is_scalar() && util::to_lower(node->text) == "unlimited")) {
      out.max_runs = std::nullopt;
    } else if (auto value = as_int(p, *node, s.path("max_runs"), 1, INT_MAX)) {
      out.max_runs = static_cast<int>(*value);
    }
  }
  if (const Node* fallback_node = s.get("fallback"); fallback_node != nullptr && !fallback_node->is_null()) {
    const Section fallback(p, fallback_node, s.path("fallback"), s.origin("fallback"), "recovery.fallback");
    if (fallback.present()) {
      if (auto n = fallback.integer("after_preemptions", 0, INT_MAX)) {
        out.fallback_after_preemptions = static_cast<int>(*n);
      }
      out.fallback_after_waiting_seconds = fallback.duration("after_waiting", 1);
      if (!out.fallback_after_preemptions && !out.fallback_after_waiting_seconds) {
        p.error(fallback_node->origin, s.path("fallback"),
                "give after_preemptions, after_waiting or both (when to fall back to on-demand)");
      }
    }
  }
  if (const Node* patterns = s.get("bad_hardware")) {
    out.bad_hardware.clear();
    if (patterns->is_sequence()) {
      for (std::size_t i = 0; i < patterns->items.size(); ++i) {
        const std::string path = s.path("bad_hardware") + "[" + std::to_string(i) + "]";
        auto pattern = as_string(p, patterns->items[i], path);
        if (!pattern) {
          continue;
        }
        if (*pattern != "default") {
          if (auto why = util::LinePatterns::check(*pattern)) {
            p.error(patterns->items[i].origin, path,
                    "'" + *pattern + "' is not a valid extended regular expression: " + *why);
            continue;
          }
        }
        out.bad_hardware.push_back(*pattern);
      }
    } else if (!patterns->is_null() && !patterns->unresolved) {
      p.error(patterns->origin, s.path("bad_hardware"),
              "expected a list of regular expressions (\"default\" for the built-in ones, [] for none), got " +
                  detail::describe_kind(*patterns));
    }
  }
  out.stall_timeout_seconds = s.duration("stall_timeout", 0).value_or(out.stall_timeout_seconds);
  out.stall_first_line_seconds = s.duration("stall_first_line", 0).value_or(out.stall_first_line_seconds);
  build_loss_spike(p, s, out);
  if (out.backoff_max_seconds < out.backoff_initial_seconds) {
    p.error(backoff.origin("max"), backoff.path("max"),
            "must be at least backoff.initial (" + std::to_string(out.backoff_initial_seconds) + "s)");
  }
}

} // namespace jobman::config::detail
