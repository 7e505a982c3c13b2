// jobman-chaos: runs jobman against the mock cloud while things go wrong, and checks that its promises hold.
//
//   jobman-chaos trials --short            the CI run: three fixed seeds
//   jobman-chaos trials --long             at least 200 supervisor kills and 500 preemptions
//   jobman-chaos trials --seed 17          one trial, as a failing run printed it
//   jobman-chaos store                     64 processes on one store for a minute, two supervisors driving
//   jobman-chaos store --postgres --kill-every 10 --restart-server-at 30 --drain 120
//                                          the same on PostgreSQL, two machines' supervisors killed and the server
//                                          restarted under them; then every job ends and the cloud is left empty
//
// Exit 0 when every invariant held; 1 when one did not (each failing seed is printed with the command that repeats
// it); 2 on a usage error.
#include "store_stress.hpp"
#include "trials.hpp"
#include "world.hpp"

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

namespace {

using namespace jobman::chaos;

int run_trials(TrialOptions options, int trials, bool until_targets, const std::string& json_file) {
  nlohmann::json summary = {{"trials", nlohmann::json::array()}};
  std::map<std::string, std::int64_t> totals;
  std::vector<std::string> failed;
  const auto first_seed = options.seed;
  for (int i = 0;; ++i) {
    const bool targets_met = totals["supervisor_kills"] >= 200 && totals["preemptions"] >= 500;
    if (until_targets ? targets_met && i >= trials : i >= trials) {
      break;
    }
    options.seed = first_seed + static_cast<std::uint64_t>(i);
    say("trial " + std::to_string(i + 1) + ": seed " + std::to_string(options.seed));
    const auto report = run_trial(options);
    for (const auto& [key, value] : report.counts) {
      totals[key] += value;
    }
    totals["trials"] += 1;
    nlohmann::json counts(report.counts);
    say("trial " + std::to_string(i + 1) + ": seed " + std::to_string(options.seed) + " " +
        (report.passed ? "passed" : "FAILED") + " in " + std::to_string(static_cast<int>(report.seconds)) + " s " +
        counts.dump());
    if (!report.passed) {
      failed.push_back("seed " + std::to_string(options.seed) + " (kept in " + report.directory +
                       "): " + rerun_command(options));
    }
    summary["trials"].push_back(report.to_json());
  }
  summary["totals"] = totals;
  summary["failed"] = failed;
  say("totals: " + nlohmann::json(totals).dump());
  if (!json_file.empty()) {
    std::ofstream(json_file) << summary.dump(2) << '\n';
  }
  for (const auto& line : failed) {
    std::cerr << "FAILED " << line << '\n';
  }
  return failed.empty() ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs jobman against the mock cloud while things go wrong, and checks its invariants", "jobman-chaos"};
  app.require_subcommand(1);

  auto* trials_command = app.add_subcommand("trials", "Jobs on the mock through supervisor kills, preemptions, API "
                                                      "faults, dropped connections, capacity cuts and user commands");
  TrialOptions options;
  int trials = 1;
  bool short_mode = false;
  bool long_mode = false;
  std::string json_file;
  trials_command->add_option("--seed", options.seed, "Seed of the first trial (the next ones count up)");
  trials_command->add_option("--trials", trials, "How many trials (with --long: at least this many)");
  trials_command->add_flag("--short", short_mode, "The CI run: seeds 1 to 3, 30 s of chaos each");
  trials_command->add_flag("--long", long_mode,
                           "Trials until at least 200 supervisor kills and 500 preemptions, more events per trial");
  trials_command->add_option("--jobs", options.initial_jobs, "Jobs created before the chaos");
  trials_command->add_option("--max-jobs", options.max_jobs, "Jobs at most (more are created during the chaos)");
  trials_command->add_option("--seconds", options.window_seconds, "Seconds of chaos per trial");
  trials_command->add_option("--supervisors", options.supervisors, "Supervisors at the start");
  trials_command->add_option("--kill-every", options.kill_every, "Mean seconds between supervisor kills (0: none)");
  trials_command->add_option("--preempt-every", options.preempt_every, "Mean seconds between preemptions");
  trials_command->add_option("--faults-every", options.faults_every, "Mean seconds between API fault windows");
  trials_command->add_option("--drops-every", options.drops_every, "Mean seconds between dropped-connection windows");
  trials_command->add_option("--capacity-every", options.capacity_every, "Mean seconds between capacity cuts");
  trials_command->add_option("--command-every", options.command_every,
                             "Mean seconds between cancel/resume/delete from other processes");
  trials_command->add_option("--create-every", options.create_every, "Mean seconds between new jobs");
  trials_command->add_option("--faulty-fraction", options.faulty_fraction,
                             "Each new machine of the mock is faulty (NaN loss) with this probability");
  trials_command->add_option("--json", json_file, "Write every trial's counts and findings to FILE");
  trials_command->add_flag("--keep", options.keep, "Keep every trial's directory (failed ones are always kept)");

  auto* store_command =
      app.add_subcommand("store", "Many processes creating, listing, showing, cancelling, resuming and deleting "
                                  "jobs in one store while supervisors drive them");
  StoreStressOptions stress;
  store_command->add_option("--processes", stress.processes, "Concurrent client processes");
  store_command->add_option("--seconds", stress.seconds, "How long they run");
  store_command->add_option("--supervisors", stress.supervisors, "Supervisors driving the jobs");
  store_command->add_option("--seed", stress.seed, "Seed of the clients' choices");
  store_command->add_option("--json", stress.json_file, "Write the counts and findings to FILE");
  store_command->add_flag("--postgres", stress.postgres,
                          "The store on a private PostgreSQL server, each supervisor in a home of its own");
  store_command->add_option("--kill-every", stress.kill_every,
                            "Mean seconds between SIGKILLs of a random supervisor, replaced at once (0: none)");
  store_command
      ->add_option("--restart-server-at", stress.restart_server_at,
                   "Seconds into the run at which the PostgreSQL server restarts (0: never)")
      ->needs("--postgres");
  store_command->add_option("--drain", stress.drain_seconds,
                            "Then wait up to this many seconds for every job to end, and check the cloud is empty");

  CLI11_PARSE(app, argc, argv);

  if (*store_command) {
    return run_store_stress(stress) ? 0 : 1;
  }
  if (short_mode) {
    options.seed = 1;
    trials = 3;
  }
  if (long_mode) {
    options.initial_jobs = 5;
    options.max_jobs = 8;
    options.window_seconds = 40;
    options.supervisors = 2;
    options.kill_every = 4;
    options.preempt_every = 1.2;
  }
  return run_trials(options, trials, long_mode, json_file);
}
