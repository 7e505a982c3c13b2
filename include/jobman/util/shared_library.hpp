// Shared libraries opened on first use. libcurl and libcrypto are needed only by the commands that talk to the
// cloud or sign something; linked, their thirty-odd libraries would be mapped and relocated at the start of every
// jobman process, `list` and `status` too (about 6 ms of each run). src/util/libcurl.cpp and src/util/libcrypto.cpp
// define the functions jobman calls, each forwarding to the library's own, opened here the first time one is called.
#pragma once

#include <mutex>
#include <string>

namespace jobman::util {

class SharedLibrary {
public:
  // `soname` is what dlopen is given ("libcurl.so.4"); `package` names what installs it, for the error.
  SharedLibrary(std::string soname, std::string package);
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  ~SharedLibrary() = default; // Never closed: its functions may be called until the process exits.

  // The address of the function `name`, opening the library the first time. Throws jobman::Error naming the library
  // and its package when it cannot be opened or has no such symbol.
  void* symbol(const char* name);

  // True once the library has been opened (by this object).
  [[nodiscard]] bool opened() const;

private:
  std::string soname_;
  std::string package_;
  mutable std::mutex mutex_;
  void* handle_ = nullptr;
};

// The address of `name` in `library` as a pointer of the function's own type: function<decltype(&f)>(lib, "f").
template <typename Function> Function function(SharedLibrary& library, const char* name) {
  static_assert(sizeof(Function) == sizeof(void*));
  // POSIX guarantees that a function's address from dlsym converts to a pointer to that function.
  return reinterpret_cast<Function>(library.symbol(name));
}

} // namespace jobman::util
