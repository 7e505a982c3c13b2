// bench/multislice_scale [SLICES] [ACCELERATOR] [ZONES]: one multislice job of SLICES slices (default 199) of
// ACCELERATOR (default v5litepod-256: 64 hosts each, 12,736 hosts in all, the shape of a record v5e run) under one
// supervisor, beside one single-slice job in each of ZONES - 1 other zones (default 4 zones in all). The supervisor is
// jobman's own job driver and observation (src/core/supervisor), in-process; the cloud and the workers are the
// in-memory fakes of tests/supervisor (no child process, no socket), which is what makes 12,736 hosts fit on two
// cores: what is measured is the supervisor's work, not ssh's. Each tick moves the fake clock one second.
//
// It times and counts: the ticks and the wall and CPU time to bring the job from PENDING to RUNNING on every host;
// steady ticks (API listings per tick, CPU per tick); then a preemption of the slices (one queued resource holds them
// all): the ticks and time until the supervisor noticed (RUNNING -> RECOVERING) and until the workload was stopped
// on every host of every slice. Peak RSS at the end. Last line:
// slices=.. hosts=.. zones=.. to_running_ticks=.. to_running_ms=.. to_running_cpu_s=.. steady_lists_per_tick=..
// steady_gets_per_tick=.. steady_cpu_ms_per_tick=.. notice_ticks=.. notice_ms=.. all_stopped_ticks=..
// all_stopped_ms=.. peak_rss_mib=..
#include "jobman/domain/job.hpp"
#include "jobman/remote/workload.hpp"
#include "process_stats.hpp"
#include "rig.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using jobman::domain::Phase;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The zones the jobs run in: the multislice job in the first.
constexpr const char* kZones[] = {"us-central1-a", "us-east5-a", "europe-west4-b", "us-east1-d", "asia-northeast1-b"};

} // namespace

int main(int argc, char** argv) {
  const int slices = argc > 1 ? std::atoi(argv[1]) : 199;
  const std::string accelerator = argc > 2 ? argv[2] : "v5litepod-256";
  const int zones = std::min<int>(argc > 3 ? std::atoi(argv[3]) : 4, static_cast<int>(std::size(kZones)));
  const pid_t self = ::getpid();

  jobman::test::Rig r;
  for (int z = 0; z < zones; ++z) {
    r.slices->set_capacity(kZones[z], true);
  }
  const auto job_yaml = [&](const std::string& zone, int count) {
    return "job:\n  name: bench\ntpu:\n  accelerator: " + accelerator + "\n  slices: " + std::to_string(count) +
           "\n  zone: " + zone + "\n  pricing: spot\ncommand:\n  cmd: train\n  workers: all\n";
  };
  const auto id = r.create(job_yaml(kZones[0], slices)).front();
  for (int z = 1; z < zones; ++z) {
    r.create(job_yaml(kZones[z], 1));
  }
  const int hosts = r.job(id).hosts;
  const auto running_everywhere = [&](int attempt) {
    for (int w = 0; w < hosts; ++w) {
      if (r.workers->workload(jobman::test::Rig::wid(id), attempt, w).state != jobman::remote::WorkloadState::running) {
        return false;
      }
    }
    return true;
  };

  // PENDING to RUNNING on every host.
  auto start = Clock::now();
  double cpu = jobman::bench::cpu_seconds(self);
  int ticks = 0;
  while (!(r.job(id).phase == Phase::running && running_everywhere(1)) && ticks < 200) {
    r.advance(1);
    r.tick();
    ++ticks;
  }
  if (r.job(id).phase != Phase::running) {
    std::fprintf(stderr, "multislice_scale: the job is %s after %d ticks: %s\n",
                 std::string(jobman::domain::to_string(r.job(id).phase)).c_str(), ticks,
                 r.job(id).phase_reason.c_str());
    return 1;
  }
  const int to_running_ticks = ticks;
  const double to_running_ms = ms_since(start);
  const double to_running_cpu = jobman::bench::cpu_seconds(self) - cpu;
  std::printf("RUNNING on %d hosts of %d slices after %d ticks, %.0f ms, %.2f s of CPU\n", hosts, slices, ticks,
              to_running_ms, to_running_cpu);

  // Steady ticks: what running costs.
  constexpr int kSteady = 30;
  const auto lists = r.counters->list_calls.load();
  const auto gets = r.counters->get_calls.load();
  cpu = jobman::bench::cpu_seconds(self);
  for (int i = 0; i < kSteady; ++i) {
    r.advance(1);
    r.tick();
  }
  const double steady_lists = static_cast<double>(r.counters->list_calls.load() - lists) / kSteady;
  const double steady_gets = static_cast<double>(r.counters->get_calls.load() - gets) / kSteady;
  const double steady_cpu_ms = (jobman::bench::cpu_seconds(self) - cpu) * 1000 / kSteady;
  std::printf("steady: %.2f listings and %.2f GETs per tick (%d zones), %.1f ms of CPU per tick\n", steady_lists,
              steady_gets, zones, steady_cpu_ms);

  // The slices are preempted (one queued resource holds them all).
  r.slices->preempt(r.slice_of(id));
  start = Clock::now();
  ticks = 0;
  int notice_ticks = -1;
  double notice_ms = 0;
  const auto stopped_everywhere = [&] {
    for (int w = 0; w < hosts; ++w) {
      if (r.workers->workload(jobman::test::Rig::wid(id), 1, w).state == jobman::remote::WorkloadState::running) {
        return false;
      }
    }
    return true;
  };
  while (!(notice_ticks >= 0 && stopped_everywhere()) && ticks < 100) {
    r.advance(1);
    r.tick();
    ++ticks;
    if (notice_ticks < 0 && r.job(id).phase != Phase::running) {
      notice_ticks = ticks;
      notice_ms = ms_since(start);
    }
  }
  const double stopped_ms = ms_since(start);
  if (!stopped_everywhere()) {
    std::fprintf(stderr, "multislice_scale: the workload still runs somewhere after %d ticks\n", ticks);
    return 1;
  }
  const double rss_mib = static_cast<double>(jobman::bench::status_kib(self, "VmHWM")) / 1024;
  std::printf("preempted: noticed after %d tick(s), %.0f ms; stopped on every host after %d tick(s), %.0f ms\n",
              notice_ticks, notice_ms, ticks, stopped_ms);
  std::printf("slices=%d hosts=%d zones=%d to_running_ticks=%d to_running_ms=%.0f to_running_cpu_s=%.2f "
              "steady_lists_per_tick=%.2f steady_gets_per_tick=%.2f steady_cpu_ms_per_tick=%.1f notice_ticks=%d "
              "notice_ms=%.0f all_stopped_ticks=%d all_stopped_ms=%.0f peak_rss_mib=%.1f\n",
              slices, hosts, zones, to_running_ticks, to_running_ms, to_running_cpu, steady_lists, steady_gets,
              steady_cpu_ms, notice_ticks, notice_ms, ticks, stopped_ms, rss_mib);
  return 0;
}
