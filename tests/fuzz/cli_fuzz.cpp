// libFuzzer target: the command-line parser. The input, split at NUL bytes, is argv after "jobman"; it is parsed
// as `jobman` would parse it, and the command it names is never run. Usage errors are outcomes, not exceptions:
// any exception escaping the parser is a bug.
#include "jobman/cli/app.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> words{"jobman"};
  std::string word;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      words.push_back(word);
      word.clear();
    } else {
      word.push_back(static_cast<char>(data[i]));
    }
  }
  if (!word.empty()) {
    words.push_back(word);
  }
  std::vector<const char*> argv;
  argv.reserve(words.size() + 1);
  for (const auto& w : words) {
    argv.push_back(w.c_str());
  }
  argv.push_back(nullptr);
  const jobman::cli::CommandLine line(static_cast<int>(words.size()), argv.data());
  (void)line.outcome();
  return 0;
}
