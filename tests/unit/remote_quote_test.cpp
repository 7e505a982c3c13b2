// Quoting for the remote shell and the gcloud command line jobman runs on workers.
#include "jobman/remote/gcloud.hpp"
#include "jobman/util/error.hpp"
#include "support/run.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

namespace remote_quote_test {

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

// Random byte strings, weighted towards what shells treat specially, come back from /bin/sh and bash unchanged,
// alone and inside a larger command line as jobman builds them (an assignment, then the value used quoted).
TEST(RemoteShellQuote, RandomBytesComeBackFromShellsUnchanged) {
  std::mt19937 random(20261123);
  const std::string special = "'\"`$\\;&|<>(){}[]*?!~#=%^ \t\n\r-.,:/@+";
  const auto random_text = [&] {
    std::string text;
    const auto length = std::uniform_int_distribution<int>(0, 24)(random);
    for (int i = 0; i < length; ++i) {
      const auto kind = std::uniform_int_distribution<int>(0, 9)(random);
      if (kind < 5) {
        text += special[std::uniform_int_distribution<std::size_t>(0, special.size() - 1)(random)];
      } else if (kind < 8) {
        text += static_cast<char>(std::uniform_int_distribution<int>('a', 'z')(random));
      } else {
        text += static_cast<char>(std::uniform_int_distribution<int>(1, 255)(random)); // Any byte but NUL.
      }
    }
    return text;
  };
  for (const std::string shell : {"/bin/sh", "/bin/bash"}) {
    for (int batch = 0; batch < 10; ++batch) {
      // 60 strings a run: each printed after a NUL, first as a word, then through a variable.
      std::vector<std::string> texts;
      std::string script = "set -e\n";
      for (int i = 0; i < 60; ++i) {
        texts.push_back(random_text());
        if (i % 7 == 0) {
          texts.back().insert(0, i % 2 == 0 ? "-" : "--"); // Leading dashes, which a command could take for options.
        }
        script += "printf '\\000%s' " + shell_quote(texts.back()) + "\n";
        script += "v=" + shell_quote(texts.back()) + "; printf '\\000%s' \"$v\"\n";
      }
      auto result = jobman::test::run_program({shell, "-c", script});
      ASSERT_EQ(result.exit_code, 0) << shell << ": " << result.err;
      std::vector<std::string> printed;
      std::size_t at = 0;
      while (at < result.out.size()) {
        ASSERT_EQ(result.out[at], '\0') << shell;
        const auto next = result.out.find('\0', at + 1);
        printed.push_back(result.out.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1));
        at = next == std::string::npos ? result.out.size() : next;
      }
      ASSERT_EQ(printed.size(), 2 * texts.size()) << shell;
      for (std::size_t i = 0; i < texts.size(); ++i) {
        EXPECT_EQ(printed[2 * i], texts[i]) << shell << " " << shell_quote(texts[i]);
        EXPECT_EQ(printed[2 * i + 1], texts[i]) << shell << " " << shell_quote(texts[i]);
      }
    }
  }
}

TEST(RemoteSshArgv, TheCommandIsOneArgumentAndTheTargetIsComplete) {
  jobman::remote::SliceTarget target{"/opt/gcloud", "proj", "us-central2-b", "job-7-a1", "alice", "", {}};
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

TEST(RemoteSshArgv, OverOpenSshEachWorkerIsItsOwnAddressCheckedAgainstItsKeyOnOneSharedConnection) {
  jobman::remote::SliceTarget target{"gcloud", "proj", "us-central2-b", "job-7-a1", "alice", "/keys/id", {}};
  target.transport = jobman::config::Transport::ssh;
  target.hosts = {{"127.200.0.1", 22, "tpu.42-0"}, {"127.200.0.2", 2222, "tpu.42-1"}};
  target.known_hosts = "/home/a/.jobman/jobs/000007/attempt-1/known_hosts";
  target.control_dir = "/home/a/.jobman/cm";
  const auto argv = jobman::remote::ssh_argv(target, 1, "echo 'hi'; exit 2");
  ASSERT_GE(argv.size(), 4U);
  EXPECT_EQ(argv.front(), "ssh");
  // The host comes after "--", the command last and whole: ssh hands it to the remote shell as it is.
  EXPECT_EQ(argv[argv.size() - 2], "127.200.0.2");
  EXPECT_EQ(argv[argv.size() - 3], "--");
  EXPECT_EQ(argv.back(), "echo 'hi'; exit 2");
  const auto has = [&argv](const std::string& word) { return std::find(argv.begin(), argv.end(), word) != argv.end(); };
  for (const auto* option :
       {"StrictHostKeyChecking=yes", "BatchMode=yes", "HostKeyAlias=tpu.42-1", "ControlMaster=auto",
        "UserKnownHostsFile=/home/a/.jobman/jobs/000007/attempt-1/known_hosts", "ControlPath=/home/a/.jobman/cm/%C",
        "User=alice", "IdentitiesOnly=yes"}) {
    EXPECT_TRUE(has(option)) << option;
  }
  const auto port = std::find(argv.begin(), argv.end(), "-p");
  ASSERT_NE(port, argv.end());
  EXPECT_EQ(*(port + 1), "2222");
  const auto key = std::find(argv.begin(), argv.end(), "-i");
  ASSERT_NE(key, argv.end());
  EXPECT_EQ(*(key + 1), "/keys/id");

  // A copy goes over the same connection: scp with the same options, the port as -P, the destination last.
  const auto copy = jobman::remote::scp_argv(target, 0, {"/tmp/a b", "/tmp/c"}, ".jobman/files");
  EXPECT_EQ(copy.front(), "scp");
  EXPECT_EQ(copy.back(), "127.200.0.1:.jobman/files");
  EXPECT_EQ(*(std::find(copy.begin(), copy.end(), "-P") + 1), "22");
  EXPECT_NE(std::find(copy.begin(), copy.end(), "HostKeyAlias=tpu.42-0"), copy.end());
  // A worker the target has no address for is an error, not a connection to somewhere else.
  EXPECT_THROW(jobman::remote::ssh_argv(target, 2, "true"), jobman::Error);
}

} // namespace remote_quote_test
