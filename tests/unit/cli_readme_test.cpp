// The README's "Using it" block against the command-line definition: every command it shows parses, with every flag
// it gives, and every flag its comment names is one of each of the line's commands, so the README cannot promise a
// flag a command refuses.
#include "jobman/cli/app.hpp"
#include "jobman/util/strings.hpp"
#include "support/temp_dir.hpp"

#include <filesystem>
#include <gtest/gtest.h>
#include <sstream>

namespace jobman::cli {
namespace cli_readme_test {

// One line of the block: its commands (a line of alternatives, `jobman cancel 42 | delete 42`, has several), each
// split into words, and its comment with the comment lines that continue it.
struct UsingItLine {
  std::vector<std::vector<std::string>> commands;
  std::string comment;
};

// The lines of the first ```sh block after "## Using it".
std::vector<UsingItLine> using_it_lines() {
  const std::string readme = test::file_text(std::filesystem::path(JOBMAN_SOURCE_DIR) / "README.md");
  const auto section = readme.find("## Using it");
  const auto start = readme.find("```sh\n", section);
  const auto end = readme.find("```", start + 6);
  if (section == std::string::npos || start == std::string::npos || end == std::string::npos) {
    return {};
  }
  std::vector<UsingItLine> lines;
  std::istringstream block(readme.substr(start + 6, end - start - 6));
  for (std::string line; std::getline(block, line);) {
    const auto hash = line.find(" #");
    const std::string comment = hash == std::string::npos ? std::string() : line.substr(hash + 2);
    if (!line.starts_with("jobman ")) {
      if (!lines.empty()) {
        lines.back().comment += " " + comment; // A comment's continuation.
      }
      continue;
    }
    lines.emplace_back();
    lines.back().comment = comment;
    line = line.substr(0, hash);
    for (const auto& alternative : util::split(line, '|')) {
      std::vector<std::string> words = {"jobman"};
      std::istringstream in(alternative);
      for (std::string word; in >> word;) {
        if (words.size() > 1 || word != "jobman") {
          words.push_back(word);
        }
      }
      lines.back().commands.push_back(words);
    }
  }
  return lines;
}

// The `--flags` a comment names.
std::vector<std::string> flags_in(const std::string& comment) {
  std::vector<std::string> flags;
  std::istringstream in(comment);
  for (std::string word; in >> word;) {
    if (word.starts_with("--")) {
      const auto end = word.find_first_not_of("abcdefghijklmnopqrstuvwxyz-", 2);
      flags.push_back(word.substr(0, end));
    }
  }
  return flags;
}

// What parsing `words` decided; the error's text when it refused them.
std::string parse_problem(const std::vector<std::string>& words) {
  std::vector<const char*> argv;
  argv.reserve(words.size());
  for (const auto& word : words) {
    argv.push_back(word.c_str());
  }
  const CommandLine line(static_cast<int>(argv.size()), argv.data());
  return line.outcome() == CommandLine::Outcome::error ? line.text() : std::string();
}

// The help `words` (a command path) print.
std::string help_of(std::vector<std::string> words) {
  words.emplace_back("--help");
  std::vector<const char*> argv;
  argv.reserve(words.size());
  for (const auto& word : words) {
    argv.push_back(word.c_str());
  }
  const CommandLine line(static_cast<int>(argv.size()), argv.data());
  return line.outcome() == CommandLine::Outcome::print ? line.text() : std::string();
}

// Whether `help` lists the option `flag` (and not just a longer one that starts with it).
bool lists_option(const std::string& help, const std::string& flag) {
  for (auto at = help.find(flag); at != std::string::npos; at = help.find(flag, at + 1)) {
    const char after = at + flag.size() < help.size() ? help[at + flag.size()] : ' ';
    if (after != '-' && (after < 'a' || after > 'z')) {
      return true;
    }
  }
  return false;
}

TEST(CliReadme, EveryCommandOfUsingItParsesWithTheFlagsItShows) {
  std::vector<std::vector<std::string>> commands;
  for (const auto& line : using_it_lines()) {
    commands.insert(commands.end(), line.commands.begin(), line.commands.end());
  }
  ASSERT_GE(commands.size(), 25U) << "the README's \"Using it\" block was not found";
  // The files the commands name, where options check that they exist.
  test::TempDir dir;
  for (const std::string name : {"train.yaml", "setup.sh", "train.sh"}) {
    dir.write(name, "");
  }
  const auto before = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  for (const auto& words : commands) {
    EXPECT_EQ(parse_problem(words), "") << util::join(words, " ");
  }
  std::filesystem::current_path(before);
}

// A flag a line's comment names ("several ids; --no-wait to return at once") is an option of each command of the line.
TEST(CliReadme, EveryFlagAUsingItCommentNamesIsAnOptionOfEachCommandOfItsLine) {
  const std::string top = help_of({"jobman"});
  int checked = 0;
  for (const auto& line : using_it_lines()) {
    for (const auto& flag : flags_in(line.comment)) {
      for (const auto& words : line.commands) {
        std::vector<std::string> path = {"jobman"};
        std::string help = top;
        // Down the command path: each word that the help above it lists as a command.
        for (std::size_t i = 1; i < words.size() && !words[i].starts_with("-"); ++i) {
          if (help.find("\n  " + words[i] + " ") == std::string::npos &&
              help.find("\n  " + words[i] + ",") == std::string::npos) {
            break;
          }
          path.push_back(words[i]);
          help = help_of(path);
        }
        EXPECT_TRUE(lists_option(help, flag))
            << util::join(path, " ") << " has no " << flag << ", which the README's comment names: " << line.comment;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 3) << "the comments name flags, such as --no-wait";
}

// The README says which of cancel, resume, delete and clean take --all-finished and --no-wait.
TEST(CliReadme, AllFinishedIsForDeleteAndCleanAndNoWaitForAllButResume) {
  for (const std::string command : {"delete", "clean"}) {
    EXPECT_EQ(parse_problem({"jobman", command, "--all-finished", "--no-wait"}), "") << command;
  }
  for (const std::string command : {"cancel", "resume"}) {
    EXPECT_NE(parse_problem({"jobman", command, "--all-finished"}), "") << command;
  }
  EXPECT_EQ(parse_problem({"jobman", "cancel", "42", "--no-wait"}), "");
  EXPECT_NE(parse_problem({"jobman", "resume", "42", "--no-wait"}), "");
}

} // namespace cli_readme_test
} // namespace jobman::cli
