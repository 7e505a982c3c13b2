#include "fanout_scan.hpp"

#include "jobman/util/strings.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace jobman::config {

namespace {

// Finds the first `gcloud ... tpu-vm ssh ... --worker=all` in shell code: commands are split at unquoted ; & | ( )
// and newlines, words at unquoted blanks with their quotes removed; comments, backslash-newlines and the quoted text
// of a word that spans lines are read as the shell reads them. Here-document bodies are read line by line, each
// alone.
class FanoutScan {
public:
  // The line of the `gcloud` word of the first such call in `text`, whose first line is `first_line`; 0 when none.
  static int find(std::string_view text, int first_line, bool here_documents) {
    FanoutScan scan(text, first_line, here_documents);
    scan.run();
    return scan.found_;
  }

private:
  struct Word {
    std::string text;
    int line = 0;
  };
  struct HereDocument {
    std::string delimiter;
    bool strip_tabs = false; // <<-
  };

  FanoutScan(std::string_view text, int first_line, bool here_documents)
      : text_(text), line_(first_line), here_documents_(here_documents) {}

  void run() {
    std::size_t i = 0;
    while (i < text_.size() && found_ == 0) {
      i = step(i);
    }
    end_command();
  }

  // Reads what starts at text_[i]; returns where to go on.
  std::size_t step(std::size_t i) {
    const char c = text_[i];
    const bool has_next = i + 1 < text_.size();
    const char next = has_next ? text_[i + 1] : '\0';
    if (quote_ == '\'') {
      close_or_add(c, '\'');
      return i + 1;
    }
    if (quote_ == '"') {
      if (c == '\\' && has_next && (next == '"' || next == '\\' || next == '$' || next == '`' || next == '\n')) {
        if (next == '\n') {
          ++line_;
        } else {
          word_.text += next;
        }
        return i + 2;
      }
      close_or_add(c, '"');
      return i + 1;
    }
    if (c == '\\') {
      if (next == '\n') {
        ++line_;
      } else if (has_next) {
        start_word();
        word_.text += next;
      }
      return i + 2;
    }
    if (c == '\'' || c == '"') {
      start_word();
      quote_ = c;
      return i + 1;
    }
    if (c == '#' && !in_word_) {
      const auto end = text_.find('\n', i);
      return end == std::string_view::npos ? text_.size() : end;
    }
    if (c == '\n') {
      end_command();
      ++line_;
      return here_document_bodies(i + 1);
    }
    if (is_blank(c)) {
      end_word();
      return i + 1;
    }
    if (c == ';' || c == '&' || c == '|' || c == '(' || c == ')') {
      end_command();
      return i + 1;
    }
    if (c == '<' && next == '<') {
      end_word();
      return here_document_operator(i + 2);
    }
    start_word();
    word_.text += c;
    return i + 1;
  }

  // Inside quotes: the closing quote ends them; anything else is text of the word.
  void close_or_add(char c, char closing) {
    if (c == closing) {
      quote_ = '\0';
      return;
    }
    if (c == '\n') {
      ++line_;
    }
    word_.text += c;
  }

  void start_word() {
    if (!in_word_) {
      in_word_ = true;
      word_ = Word{{}, line_};
    }
  }

  void end_word() {
    if (in_word_) {
      words_.push_back(std::move(word_));
      word_ = Word{};
      in_word_ = false;
    }
  }

  void end_command() {
    end_word();
    if (found_ == 0) {
      found_ = fanout_in(words_);
    }
    words_.clear();
  }

  // The line of the gcloud word when `words` are a gcloud tpu-vm ssh to every worker; 0 otherwise.
  static int fanout_in(const std::vector<Word>& words) {
    for (std::size_t g = 0; g < words.size(); ++g) {
      const std::string& program = words[g].text;
      if (program != "gcloud" && !program.ends_with("/gcloud")) {
        continue;
      }
      bool tpu_vm = false;
      bool ssh = false;
      bool all_workers = false;
      for (std::size_t i = g + 1; i < words.size(); ++i) {
        const std::string word = util::to_lower(words[i].text);
        if (word == "tpu-vm") {
          tpu_vm = true;
        } else if (word == "ssh" && tpu_vm) {
          ssh = true;
        } else if (word == "--worker=all" ||
                   (word == "--worker" && i + 1 < words.size() && util::to_lower(words[i + 1].text) == "all")) {
          all_workers = true;
        }
      }
      if (tpu_vm && ssh && all_workers) {
        return words[g].line;
      }
    }
    return 0;
  }

  // After "<<" (text_[i] is what follows): "<<<" is a here-string; otherwise the delimiter word, its quotes removed,
  // whose body follows the end of the line.
  std::size_t here_document_operator(std::size_t i) {
    if (i < text_.size() && text_[i] == '<') {
      return i + 1;
    }
    HereDocument doc;
    if (i < text_.size() && text_[i] == '-') {
      doc.strip_tabs = true;
      ++i;
    }
    while (i < text_.size() && (text_[i] == ' ' || text_[i] == '\t')) {
      ++i;
    }
    static constexpr std::string_view ends = " \t\r\n;&|()<>";
    while (i < text_.size() && ends.find(text_[i]) == std::string_view::npos) {
      const char c = text_[i];
      if (c == '\'' || c == '"') {
        const auto close = text_.find(c, i + 1);
        const auto stop = close == std::string_view::npos ? text_.size() : close;
        doc.delimiter.append(text_.substr(i + 1, stop - i - 1));
        i = stop == text_.size() ? stop : stop + 1;
      } else if (c == '\\' && i + 1 < text_.size()) {
        doc.delimiter += text_[i + 1];
        i += 2;
      } else {
        doc.delimiter += c;
        ++i;
      }
    }
    if (!doc.delimiter.empty() && here_documents_) {
      pending_.push_back(std::move(doc));
    }
    return i;
  }

  // The bodies of the here-documents opened on the line just ended, from text_[i]: each line is read alone, up to
  // its delimiter's line. Returns where the code goes on.
  std::size_t here_document_bodies(std::size_t i) {
    for (const auto& doc : pending_) {
      while (i < text_.size()) {
        const auto end = text_.find('\n', i);
        const std::size_t stop = end == std::string_view::npos ? text_.size() : end;
        std::string_view body_line = text_.substr(i, stop - i);
        std::string_view compared = body_line;
        if (doc.strip_tabs) {
          compared.remove_prefix(std::min(compared.find_first_not_of('\t'), compared.size()));
        }
        if (compared.ends_with('\r')) {
          compared.remove_suffix(1);
        }
        const int number = line_;
        i = stop == text_.size() ? stop : stop + 1;
        ++line_;
        if (compared == doc.delimiter) {
          break;
        }
        if (found_ == 0) {
          found_ = find(body_line, number, false);
        }
      }
    }
    pending_.clear();
    return i;
  }

  std::string_view text_;
  int line_;
  bool here_documents_;
  char quote_ = '\0';
  bool in_word_ = false;
  Word word_;
  std::vector<Word> words_;
  std::vector<HereDocument> pending_;
  int found_ = 0;
};

} // namespace

int find_fanout(std::string_view text) {
  return FanoutScan::find(text, 1, true);
}

} // namespace jobman::config
