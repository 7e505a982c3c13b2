// Shell completions: the committed scripts match the CLI definition, and each shell accepts them.
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

namespace jobman::test {
namespace cli_completion_test {

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::filesystem::path kCompletions = std::filesystem::path(JOBMAN_SOURCE_DIR) / "completions";

struct Shell {
  std::string name;
  std::string file;
};

void PrintTo(const Shell& shell, std::ostream* os) {
  *os << shell.name;
}

class Completions : public ::testing::TestWithParam<Shell> {};

TEST_P(Completions, CommittedScriptMatchesTheCliDefinition) {
  const auto r = run_jobman({"completion", GetParam().name});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read(kCompletions / GetParam().file), r.out)
      << "completions/" << GetParam().file << " is out of date: run 'cmake --build build --target completions'";
  for (const std::string cmd : {"create", "validate", "list", "show", "resume", "cancel", "delete", "clean"}) {
    EXPECT_NE(r.out.find(cmd), std::string::npos) << cmd;
  }
}

INSTANTIATE_TEST_SUITE_P(AllShells, Completions,
                         ::testing::Values(Shell{"bash", "jobman.bash"}, Shell{"zsh", "_jobman"},
                                           Shell{"fish", "jobman.fish"}),
                         [](const auto& param_info) { return param_info.param.name; });

// Runs the bash completion function for a command line and returns COMPREPLY, one word per line.
std::string bash_complete(const TempDir& dir, const std::string& line) {
  const std::string script = "source '" + (kCompletions / "jobman.bash").string() + "'\n" + "COMP_WORDS=(" + line +
                             ")\n" + "COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n" +
                             "_jobman\n"
                             "printf '%s\\n' \"${COMPREPLY[@]}\"\n";
  RunOptions options;
  options.env["JOBMAN_HOME"] = (dir / "home").string();
  options.env["PATH"] = std::filesystem::path(jobman_binary()).parent_path().string() + ":/usr/bin:/bin";
  options.cwd = dir.path().string();
  const auto r = run_program({"/bin/bash", "-c", script}, options);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

TEST(BashCompletion, CompletesCommandsOptionsPhasesAndJobIds) {
  TempDir dir;
  EXPECT_EQ(bash_complete(dir, "jobman cr"), "create\n");
  EXPECT_EQ(bash_complete(dir, "jobman list --st"), "--status\n");
  EXPECT_EQ(bash_complete(dir, "jobman list --status RUN"), "RUNNING\n");
  EXPECT_EQ(bash_complete(dir, "jobman completion f"), "fish\n");
  // Job ids come from the store.
  RunOptions options;
  options.env["JOBMAN_HOME"] = (dir / "home").string();
  options.env["JOBMAN_ZONE"] = "";
  const auto created = run_jobman({"create", std::string(JOBMAN_TEST_DATA_DIR) + "/cli/train.yaml"}, options);
  ASSERT_EQ(created.exit_code, 0) << created.err;
  EXPECT_EQ(bash_complete(dir, "jobman show 0"), "000001\n");
}

TEST(FishCompletion, CompletesCommandsAndOptions) {
  TempDir dir;
  const auto r = run_program({"/usr/bin/fish", "--no-config", "-c",
                              "source '" + (kCompletions / "jobman.fish").string() +
                                  "'; complete -C 'jobman cre'; complete -C 'jobman list --al'"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("create\t"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--all\t"), std::string::npos) << r.out;
}

TEST(ZshCompletion, ParsesAndDefinesTheFunction) {
  const auto script = (kCompletions / "_jobman").string();
  const auto syntax = run_program({"/usr/bin/zsh", "-n", script});
  EXPECT_EQ(syntax.exit_code, 0) << syntax.err;
  // Loading it in a real zsh with compinit defines _jobman and binds it to jobman.
  TempDir dir;
  std::filesystem::copy_file(script, dir / "_jobman");
  const auto r = run_program({"/usr/bin/zsh", "-f", "-c",
                              "fpath=('" + dir.path().string() +
                                  "' $fpath); autoload -U compinit; compinit -u -D; "
                                  "print -r -- ${_comps[jobman]}"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "_jobman\n");
}

TEST(InstalledCompletions, CmakeInstallPutsEachShellsScriptWhereTheShellLooks) {
  TempDir dir;
  const auto r = run_program({JOBMAN_CMAKE_COMMAND, "--install", JOBMAN_BUILD_DIR, "--prefix", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "bin/jobman"));
  EXPECT_EQ(read(dir / "share/bash-completion/completions/jobman"), read(kCompletions / "jobman.bash"));
  EXPECT_EQ(read(dir / "share/zsh/vendor-completions/_jobman"), read(kCompletions / "_jobman"));
  EXPECT_EQ(read(dir / "share/fish/vendor_completions.d/jobman.fish"), read(kCompletions / "jobman.fish"));
}

} // namespace cli_completion_test
} // namespace jobman::test
