// Sets or clears an environment variable for the length of a scope.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace jobman::test {

// Sets (or, with no value, clears) an environment variable and restores its old state when destroyed.
class ScopedEnv {
public:
  // Sets `name` to `value`, or unsets it when `value` is empty.
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
    }
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  // Sets `name` to `value`, or unsets it when `value` is null.
  ScopedEnv(const char* name, const char* value)
      : ScopedEnv(name, value == nullptr ? std::nullopt : std::optional<std::string>(value)) {}
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
  const char* name_;
  std::optional<std::string> old_;
};

} // namespace jobman::test
