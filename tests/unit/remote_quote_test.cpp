// Quoting for the remote shell and the gcloud command line jobman runs on workers.
#include "jobman/remote/gcloud.hpp"
#include "support/run.hpp"

#include <gtest/gtest.h>

namespace {

using jobman::remote::shell_quote;

TEST(RemoteShellQuote, EveryStringComesBackFromAShellUnchanged) {
  const std::vector<std::string> hostile = {
      "",
      "plain",
      "two words",
      "a'b\"c $(touch /tmp/jobman-quote-x) ;",
      "`id` ${HOME} $HOME \\ \\' '' \"\"",
      "line one\nline two\n",
      "tab\there",
      "unicode: ünïcødé ✓ 日本",
      "-n",
      "*",
      "; rm -rf / #",
      "'",
      "''''",
  };
  for (const auto& text : hostile) {
    auto result = jobman::test::run_program({"/bin/sh", "-c", "printf %s " + shell_quote(text)});
    EXPECT_EQ(result.exit_code, 0) << text;
    EXPECT_EQ(result.out, text) << shell_quote(text);
  }
}

TEST(RemoteSshArgv, TheCommandIsOneArgumentAndTheTargetIsComplete) {
  jobman::remote::SliceTarget target{"/opt/gcloud", "proj", "us-central2-b", "job-7-a1", "alice", ""};
  const auto argv = jobman::remote::ssh_argv(target, 3, "echo 'hi'; exit 2");
  const std::vector<std::string> expected = {"/opt/gcloud",
                                             "compute",
                                             "tpus",
                                             "tpu-vm",
                                             "ssh",
                                             "alice@job-7-a1",
                                             "--zone=us-central2-b",
                                             "--project=proj",
                                             "--worker=3",
                                             "--quiet",
                                             "--command=echo 'hi'; exit 2"};
  EXPECT_EQ(argv, expected);
  target.user.clear();
  target.project.clear();
  const auto plain = jobman::remote::ssh_argv(target, 0, "true");
  EXPECT_EQ(plain[5], "job-7-a1");
  EXPECT_EQ(std::count_if(plain.begin(), plain.end(), [](const auto& a) { return a.rfind("--project", 0) == 0; }), 0);
}

} // namespace
