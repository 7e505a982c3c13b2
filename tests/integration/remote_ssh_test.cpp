// Commands on a mock slice's workers over OpenSSH, as jobman runs them: in parallel, each worker's output apart,
// hostile text quoted end to end, and a step that outlives its timeout stopped.
#include "jobman/remote/gcloud.hpp"
#include "support/mock_cloud.hpp"
#include "support/mock_slice.hpp"
#include "support/temp_dir.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <memory>
#include <vector>

namespace remote_ssh_test {

using jobman::remote::run_on_workers;
using jobman::remote::shell_quote;
using jobman::test::eventually;
namespace fs = std::filesystem;

using RemoteSshTest = jobman::test::MockSliceTest;

TEST_F(RemoteSshTest, HostileTextArrivesIntactOnEveryWorkerAndRunsNothing) {
  const auto canary = dir / "pwned";
  const std::string hostile = "a'b\"c $(touch " + canary.string() + ") ; `touch " + canary.string() +
                              "` ${HOME} \\\n ünïcødé ✓ | touch " + canary.string();
  auto runs =
      run_on_workers(target, {0, 1, 2, 3}, "printf %s " + shell_quote(hostile) + "; echo; echo w${MOCK_TPU_HOST##*/}",
                     std::chrono::seconds(60));
  ASSERT_EQ(runs.size(), 4U);
  for (const auto& run : runs) {
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_FALSE(run.timed_out);
    // Each worker's output is its own: the text, then its own index.
    EXPECT_EQ(run.output, hostile + "\nw" + std::to_string(run.worker) + "\n");
  }
  EXPECT_FALSE(fs::exists(canary)) << "something in the text was executed";
}

TEST_F(RemoteSshTest, ExitCodesComeBackPerWorker) {
  auto runs = run_on_workers(target, {1, 3}, "exit $(( ${MOCK_TPU_HOST##*/} + 10 ))", std::chrono::seconds(60));
  ASSERT_EQ(runs.size(), 2U);
  EXPECT_EQ(runs[0].worker, 1);
  EXPECT_EQ(runs[0].exit_code, 11);
  EXPECT_EQ(runs[1].worker, 3);
  EXPECT_EQ(runs[1].exit_code, 13);
  // A host that takes no connection is ssh's 255. (The address is on this machine's loopback, where nothing listens.)
  target.hosts[0].address = "127.255.255.254";
  auto missing = run_on_workers(target, {0}, "true", std::chrono::seconds(60));
  EXPECT_EQ(missing[0].exit_code, 255);
  EXPECT_NE(missing[0].output.find("Connection refused"), std::string::npos) << missing[0].output;
}

TEST_F(RemoteSshTest, AStepPastItsTimeoutIsStoppedOnTheWorkersToo) {
  // Time enough for both sessions to start and print on a loaded machine; far less than the sleep.
  auto runs = run_on_workers(target, {0, 1}, "echo started; sleep 600", std::chrono::seconds(3));
  ASSERT_EQ(runs.size(), 2U);
  for (const auto& run : runs) {
    EXPECT_TRUE(run.timed_out);
    EXPECT_NE(run.exit_code, 0);
    EXPECT_EQ(run.output.rfind("started\n", 0), 0U) << run.output;
  }
  // (The remote sleeps outlive their sessions: without a terminal, sshd sends a command no signal when its client
  // goes, on Google's TPU VMs as here.)
}

TEST_F(RemoteSshTest, CopiesLandOnTheirWorkerOnlyAndAHostKeyThatDiffersIsRefused) {
  const auto file = dir / "payload.txt";
  std::ofstream(file) << "payload\n";
  ASSERT_EQ(run_on_workers(target, {0, 1}, "mkdir -p uploads", std::chrono::seconds(60))[1].exit_code, 0);
  const auto copies =
      jobman::remote::copy_to_workers(target, {{1, {file.string()}}}, "uploads", std::chrono::seconds(60));
  ASSERT_EQ(copies.size(), 1U);
  EXPECT_EQ(copies[0].exit_code, 0) << copies[0].output;
  EXPECT_EQ(run_on_workers(target, {1}, "cat uploads/payload.txt", std::chrono::seconds(60))[0].output, "payload\n");
  EXPECT_NE(run_on_workers(target, {0}, "cat uploads/payload.txt", std::chrono::seconds(60))[0].exit_code, 0);
  // Host key checking stays on: worker 2 under worker 3's alias is another host, and ssh refuses it.
  auto swapped = target;
  swapped.control_dir.clear(); // A fresh connection, so that the key is checked now.
  swapped.hosts[2].host_key_alias = target.hosts[3].host_key_alias;
  const auto refused = run_on_workers(swapped, {2}, "echo reached", std::chrono::seconds(60));
  EXPECT_EQ(refused[0].exit_code, 255);
  EXPECT_EQ(refused[0].output.find("reached"), std::string::npos) << refused[0].output;
  EXPECT_NE(refused[0].output.find("Host key verification failed"), std::string::npos) << refused[0].output;
}

} // namespace remote_ssh_test
