#include "jobman/util/shared_library.hpp"

#include "jobman/util/error.hpp"

#include <dlfcn.h>

namespace jobman::util {

SharedLibrary::SharedLibrary(std::string soname, std::string package)
    : soname_(std::move(soname)), package_(std::move(package)) {}

void* SharedLibrary::symbol(const char* name) {
  std::lock_guard lock(mutex_);
  if (handle_ == nullptr) {
    // RTLD_LOCAL: its symbols serve only the lookups made here, never the rest of the process.
    handle_ = ::dlopen(soname_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      const char* why = ::dlerror();
      throw Error("cannot load " + soname_ + " (Debian package " + package_ + "): " + (why ? why : "unknown error"));
    }
  }
  ::dlerror();
  void* address = ::dlsym(handle_, name);
  if (address == nullptr) {
    const char* why = ::dlerror();
    throw Error(soname_ + " has no function " + name + ": " + (why ? why : "the symbol is null"));
  }
  return address;
}

bool SharedLibrary::opened() const {
  std::lock_guard lock(mutex_);
  return handle_ != nullptr;
}

} // namespace jobman::util
