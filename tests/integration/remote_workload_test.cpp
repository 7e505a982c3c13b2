// The detached workload on a four-host mock slice: launched once however often launch is called, its output arriving
// home line-complete, re-attached from another process without a line repeated or lost, stopped with SIGTERM then
// SIGKILL, and a preemption seen as the streams ending with 255.
#include "jobman/remote/workload.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"
#include "support/mock_cloud.hpp"
#include "support/mock_slice.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <regex>
#include <sys/file.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace remote_workload_test {

namespace fs = std::filesystem;
using jobman::remote::WorkloadState;
using jobman::test::eventually;

constexpr auto kStep = std::chrono::seconds(60);
const std::vector<int> kAll = {0, 1, 2, 3};

class RemoteWorkloadTest : public jobman::test::MockSliceTest {
protected:
  // Puts an `ssh` first on the PATH of the target's children that runs `body` (bash, the arguments in "$@"), then
  // this machine's ssh.
  void put_ssh_first(const std::string& body) {
    const auto wrapper = dir.write("bin/ssh", "#!/bin/bash\n" + body + "exec /usr/bin/ssh \"$@\"\n");
    fs::permissions(wrapper, fs::perms::owner_all);
    const char* path = std::getenv("PATH");
    target.environment.emplace_back("PATH", wrapper.parent_path().string() + ":" + (path != nullptr ? path : "/bin"));
  }

  jobman::remote::LaunchSpec spec(const std::string& command, int attempt = 1) {
    jobman::remote::LaunchSpec out;
    out.id = {"7", attempt};
    out.command = command;
    out.num_workers = 4;
    out.tpu_name = "slice-node";
    out.zone = "us-central2-b";
    out.accelerator = "v4-32";
    return out;
  }

  // The workload's output.log on a worker, read from the mock host's disk.
  std::string remote_log(int worker, int attempt = 1) {
    return jobman::util::read_file(slice.worker_home(worker) / ".jobman/jobs/7" /
                                   ("attempt-" + std::to_string(attempt)) / "output.log");
  }

  std::string local_log(int worker) {
    const auto path = jobman::remote::worker_log_path(attempt_dir, worker);
    return fs::exists(path) ? jobman::util::read_file(path) : std::string();
  }

  std::map<int, jobman::remote::WorkerStatus> by_worker(const std::vector<jobman::remote::WorkerStatus>& all) {
    std::map<int, jobman::remote::WorkerStatus> out;
    for (const auto& status : all) {
      out[status.worker] = status;
    }
    return out;
  }
};

// Every line ends with its newline and is a line systolic-train prints.
void expect_complete_training_lines(const std::string& log, int worker) {
  ASSERT_FALSE(log.empty()) << "worker " << worker;
  EXPECT_EQ(log.back(), '\n') << "worker " << worker << " log ends mid-line";
  static const std::regex line(
      R"(^(starting from step=0 of \d+|step=\d+ loss=\S+ mxu_util=\S+ cycles=\d+|checkpoint step=\d+ path=\S+|checksum=[0-9a-f]{16}|terminated at step=\d+ by SIGTERM)$)");
  std::size_t start = 0;
  while (start < log.size()) {
    const auto end = log.find('\n', start);
    const auto text = log.substr(start, end == std::string::npos ? std::string::npos : end - start);
    EXPECT_TRUE(std::regex_match(text, line)) << "worker " << worker << ": torn or foreign line '" << text << "'";
    if (end == std::string::npos) {
      break;
    }
    start = end + 1;
  }
}

TEST_F(RemoteWorkloadTest, EveryWorkerSeesTheContractVariables) {
  auto launched = jobman::remote::launch(target, kAll, spec("env | grep ^JOBMAN_ | sort; pwd"), kStep);
  for (const auto& status : launched) {
    EXPECT_TRUE(status.launched) << status.diagnostic;
  }
  auto ends = jobman::remote::attach(target, kAll, {"7", 1}, attempt_dir);
  for (const auto& end : ends) {
    EXPECT_EQ(end.exit_code, 0) << end.diagnostic;
    const auto w = std::to_string(end.worker);
    EXPECT_EQ(local_log(end.worker),
              "JOBMAN_ACCELERATOR=v4-32\nJOBMAN_ATTEMPT=1\nJOBMAN_JOB_ID=7\nJOBMAN_NUM_SLICES=1\n"
              "JOBMAN_NUM_WORKERS=4\nJOBMAN_RESUME=0\nJOBMAN_SLICE_ID=0\n"
              "JOBMAN_TPU_NAME=slice-node\n"
              "JOBMAN_WORKER_ID=" +
                  w + "\nJOBMAN_ZONE=us-central2-b\n" +
                  slice.remote_home(end.worker, jobman::util::current_user()).string() + "\n");
  }
  for (const auto& status : jobman::remote::query(target, kAll, {"7", 1}, kStep)) {
    EXPECT_EQ(status.state, WorkloadState::exited);
    EXPECT_EQ(status.exit_code, 0);
  }
  // A second attempt resumes.
  jobman::remote::launch(target, {2}, spec("echo resume=$JOBMAN_RESUME attempt=$JOBMAN_ATTEMPT", 2), kStep);
  fs::create_directories(dir / "a2");
  jobman::remote::attach(target, {2}, {"7", 2}, dir / "a2");
  EXPECT_EQ(jobman::util::read_file(jobman::remote::worker_log_path(dir / "a2", 2)), "resume=1 attempt=2\n");
}

TEST_F(RemoteWorkloadTest, TheCommandTravelsOnStdinAndNeverInAnArgumentList) {
  // An ssh first on the children's PATH that records every argument it is given, then does its job.
  const auto log = dir / "ssh-argv.log";
  put_ssh_first("printf '%s\\n' \"$@\" >> " + log.string() + "\n");
  auto command = spec("echo token=s3cr3t-launch-value");
  command.extra_env["API_TOKEN"] = "s3cr3t-env-value";
  for (const auto& status : jobman::remote::launch(target, kAll, command, kStep)) {
    EXPECT_TRUE(status.launched) << status.diagnostic;
  }
  jobman::remote::attach(target, kAll, {"7", 1}, attempt_dir);
  EXPECT_EQ(local_log(2), "token=s3cr3t-launch-value\n");
  const auto arguments = jobman::util::read_file(log);
  EXPECT_NE(arguments.find("HostKeyAlias="), std::string::npos) << arguments;
  EXPECT_EQ(arguments.find("s3cr3t"), std::string::npos) << arguments;
}

TEST_F(RemoteWorkloadTest, ExitCodesAreKeptPerWorkerAndALastLineWithoutNewlineArrives) {
  jobman::remote::launch(target, kAll, spec("printf 'no newline'; exit $((JOBMAN_WORKER_ID + 3))"), kStep);
  for (const auto& end : jobman::remote::attach(target, kAll, {"7", 1}, attempt_dir)) {
    EXPECT_EQ(end.exit_code, 0) << end.diagnostic;
    EXPECT_EQ(local_log(end.worker), "no newline");
  }
  for (const auto& status : jobman::remote::query(target, kAll, {"7", 1}, kStep)) {
    EXPECT_EQ(status.state, WorkloadState::exited);
    EXPECT_EQ(status.exit_code, status.worker + 3);
  }
  // Attaching again after the end adds nothing.
  for (const auto& end : jobman::remote::attach(target, kAll, {"7", 1}, attempt_dir)) {
    EXPECT_EQ(end.bytes, 0U);
  }
  EXPECT_EQ(local_log(1), "no newline");
}

TEST_F(RemoteWorkloadTest, LaunchIsIdempotentAndUnknownAttemptsAreAbsent) {
  const auto command = spec("exec sleep 600");
  auto first = by_worker(jobman::remote::launch(target, kAll, command, kStep));
  auto again = by_worker(jobman::remote::launch(target, kAll, command, kStep));

  for (int w : kAll) {
    EXPECT_TRUE(first[w].launched);
    EXPECT_EQ(first[w].state, WorkloadState::running) << first[w].diagnostic;
    EXPECT_FALSE(again[w].launched) << "a second copy was started on worker " << w;
    EXPECT_EQ(again[w].state, WorkloadState::running);
    EXPECT_EQ(again[w].pid, first[w].pid);
  }
  EXPECT_EQ(slice.processes_running(), 8) << "one workload per worker: its recorder and its command";
  for (const auto& status : jobman::remote::query(target, kAll, {"7", 5}, kStep)) {
    EXPECT_EQ(status.state, WorkloadState::absent);
  }
  auto stopped = jobman::remote::stop(target, kAll, {"7", 1}, std::chrono::seconds(5), kStep);
  for (const auto& status : stopped) {
    EXPECT_EQ(status.state, WorkloadState::exited);
    EXPECT_EQ(status.exit_code, 143) << "sleep ends on SIGTERM";
  }
  EXPECT_TRUE(eventually([&] { return slice.processes_running() == 0; }));
}

TEST_F(RemoteWorkloadTest, AScriptCutOffOnTheWayStartsNothingAndTheNextLaunchRunsItWhole) {
  // The first launch's script loses all but its first 40 bytes on the way, as when the supervisor sending it is
  // killed mid-write. Before, the truncated run.sh ran, ended at once with status 0, and a job SUCCEEDED with
  // empty logs (RELIABILITY bug 35).
  const auto marker = dir / "cut-once";
  put_ssh_first("if [ ! -e " + marker.string() + " ]; then touch " + marker.string() +
                "; head -c 40 | /usr/bin/ssh \"$@\"; exit $?; fi\n");
  const auto command = spec("echo trained whole");
  const auto cut = jobman::remote::launch(target, {1}, command, kStep);
  ASSERT_EQ(cut.size(), 1U);
  EXPECT_FALSE(cut[0].launched);
  EXPECT_NE(cut[0].diagnostic.find("did not arrive whole"), std::string::npos) << cut[0].diagnostic;
  for (const auto& status : jobman::remote::query(target, {1}, {"7", 1}, kStep)) {
    EXPECT_EQ(status.state, WorkloadState::absent) << "a workload was left from part of a script";
  }
  const auto whole = jobman::remote::launch(target, {1}, command, kStep);
  ASSERT_EQ(whole.size(), 1U);
  EXPECT_TRUE(whole[0].launched) << whole[0].diagnostic;
  jobman::remote::attach(target, {1}, {"7", 1}, attempt_dir);
  EXPECT_EQ(local_log(1), "trained whole\n");
}

TEST_F(RemoteWorkloadTest, StopKillsWhatIgnoresSigterm) {
  jobman::remote::launch(target, {0, 1}, spec("trap '' TERM; echo armed; sleep 600 & wait; sleep 600"), kStep);
  auto stopped = jobman::remote::stop(target, {0, 1}, {"7", 1}, std::chrono::milliseconds(300), kStep);
  for (const auto& status : stopped) {
    EXPECT_EQ(status.state, WorkloadState::exited) << status.diagnostic;
    EXPECT_EQ(status.exit_code, 137);
  }
  EXPECT_TRUE(eventually([&] { return slice.processes_running() == 0; }));
  // Stopping what has ended changes nothing.
  for (const auto& status : jobman::remote::stop(target, {0, 1}, {"7", 1}, std::chrono::seconds(1), kStep)) {
    EXPECT_EQ(status.exit_code, 137);
  }
}

TEST_F(RemoteWorkloadTest, TrainingStreamsHomeIsReattachedFromAnotherProcessAndStopped) {
  const std::string train =
      "exec systolic-train --steps 100000 --step-time-ms 10 --ckpt-every 50 --ckpt-dir \"$HOME/ckpt\"";
  for (const auto& status : jobman::remote::launch(target, kAll, spec(train), kStep)) {
    ASSERT_EQ(status.state, WorkloadState::running) << status.diagnostic;
  }
  const auto every_log_has = [&](const std::string& text) {
    return std::all_of(kAll.begin(), kAll.end(), [&](int w) { return local_log(w).find(text) != std::string::npos; });
  };
  // The first watcher streams a while and is stopped mid-run.
  std::stop_source stop;
  std::vector<jobman::remote::StreamEnd> first;
  std::thread watcher([&] { first = jobman::remote::attach(target, kAll, {"7", 1}, attempt_dir, stop.get_token()); });
  EXPECT_TRUE(eventually([&] { return every_log_has("step=20 "); }, std::chrono::seconds(30)));
  stop.request_stop();
  watcher.join();
  for (const auto& end : first) {
    EXPECT_TRUE(end.cancelled);
    EXPECT_GT(end.bytes, 0U);
    expect_complete_training_lines(local_log(end.worker), end.worker);
  }
  EXPECT_EQ(jobman::remote::query(target, {0}, {"7", 1}, kStep)[0].state, WorkloadState::running)
      << "the workload outlives its watcher";

  // A second process picks up where the local logs end and follows until the workload ends.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 0;
    try {
      for (const auto& end : jobman::remote::attach(target, kAll, {"7", 1}, attempt_dir)) {
        code |= end.exit_code == 0 ? 0 : 1;
      }
    } catch (...) {
      code = 2;
    }
    ::_exit(code);
  }
  // Once it has streamed past a checkpoint, the workload is stopped: SIGTERM, and worker 0 saves its last step.
  EXPECT_TRUE(eventually([&] { return every_log_has("step=60 "); }, std::chrono::seconds(30)));
  for (const auto& status : jobman::remote::stop(target, kAll, {"7", 1}, std::chrono::seconds(10), kStep)) {
    EXPECT_EQ(status.state, WorkloadState::exited) << status.diagnostic;
    EXPECT_EQ(status.exit_code, 143) << "worker " << status.worker;
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  for (int w : kAll) {
    const auto log = local_log(w);
    EXPECT_EQ(log, remote_log(w)) << "worker " << w << ": the local log is not the workload's output byte for byte";
    expect_complete_training_lines(log, w);
    EXPECT_NE(log.find("terminated at step="), std::string::npos) << "worker " << w;
  }
  EXPECT_TRUE(fs::exists(slice.worker_home(0) / "ckpt")) << "worker 0 checkpointed";
  EXPECT_EQ(slice.processes_running(), 0);
}

TEST_F(RemoteWorkloadTest, OneLogHasOneWatcher) {
  jobman::remote::launch(target, {0}, spec("exec sleep 600"), kStep);
  std::stop_source stop;
  std::vector<jobman::remote::StreamEnd> ends;
  std::thread watcher([&] { ends = jobman::remote::attach(target, {0}, {"7", 1}, attempt_dir, stop.get_token()); });
  // Wait until the first watcher holds the log's lock.
  const auto log = jobman::remote::worker_log_path(attempt_dir, 0);
  EXPECT_TRUE(eventually([&] {
    const int fd = ::open(log.c_str(), O_RDONLY | O_CLOEXEC);
    const bool held = fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0;
    if (fd >= 0) {
      ::close(fd);
    }
    return held;
  }));
  try {
    jobman::remote::attach(target, {0}, {"7", 1}, attempt_dir);
    ADD_FAILURE() << "a second watcher was let in";
  } catch (const jobman::Error& e) {
    EXPECT_NE(std::string(e.what()).find("already being streamed"), std::string::npos) << e.what();
  }
  stop.request_stop();
  watcher.join();
  ASSERT_EQ(ends.size(), 1U);
  EXPECT_TRUE(ends[0].cancelled);
  jobman::remote::stop(target, {0}, {"7", 1}, std::chrono::seconds(5), kStep);
}

TEST_F(RemoteWorkloadTest, APreemptionEndsTheStreamsWith255AndLeavesCompleteLines) {
  const std::string train = "exec systolic-train --steps 100000 --step-time-ms 5";
  jobman::remote::launch(target, kAll, spec(train), kStep);
  std::vector<jobman::remote::StreamEnd> ends;
  std::thread watcher([&] { ends = jobman::remote::attach(target, kAll, {"7", 1}, attempt_dir); });
  // Every worker's stream has brought lines home before the preemption (not worker 3's alone: on a loaded machine
  // another's stream may not have begun yet, and then its log is rightly empty).
  EXPECT_TRUE(eventually(
      [&] {
        for (const int worker : kAll) {
          if (local_log(worker).find("step=30 ") == std::string::npos) {
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(30)));
  ASSERT_TRUE(slice.preempt());
  watcher.join();
  // Either the host went away under the stream (255), or the stream saw the workload end on the preemption's
  // SIGTERM first: then its last line says so, and the run's status was 143 while the host still answered.
  for (const auto& end : ends) {
    const auto log = local_log(end.worker);
    EXPECT_FALSE(end.cancelled);
    if (end.exit_code != 255) {
      EXPECT_EQ(end.exit_code, 0) << "worker " << end.worker << ": " << end.diagnostic;
      EXPECT_NE(log.find("terminated at step="), std::string::npos)
          << log.substr(log.size() > 200 ? log.size() - 200 : 0);
    }
    expect_complete_training_lines(log, end.worker);
  }
  EXPECT_TRUE(eventually([&] {
    auto states = jobman::remote::query(target, kAll, {"7", 1}, kStep);
    return std::all_of(states.begin(), states.end(), [](const auto& status) {
      return status.state == WorkloadState::unreachable && status.exit_code == 255;
    });
  }));
}

} // namespace remote_workload_test
