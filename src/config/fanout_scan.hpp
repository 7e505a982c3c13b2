// Whether a task script reaches every host of its slice itself (`gcloud ... tpu-vm ssh ... --worker=all`, as
// jobman-lite's scripts do), in which case jobman runs it on worker 0 only.
#pragma once

#include <string_view>

namespace jobman::config {

// Whitespace within a line, as the shell splits words at it and as jobman-lite's `\s` reads a header line.
inline bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

// The line of the `gcloud` word of the first `gcloud ... tpu-vm ssh ... --worker=all` in the shell code `text`
// (whose first line is line 1), read as the shell splits it, here-documents included; 0 when there is none.
int find_fanout(std::string_view text);

} // namespace jobman::config
