// The libcurl functions jobman calls, each forwarding to libcurl's own, opened on the first call (see
// jobman/util/shared_library.hpp for why). Declared by <curl/curl.h>; the callers include it as usual and keep its
// type checks, which are off in this file only, where the functions are defined.
#define CURL_DISABLE_TYPECHECK
#include "jobman/util/shared_library.hpp"

#include <cstdarg>
#include <curl/curl.h>

namespace {

jobman::util::SharedLibrary& libcurl() {
  static jobman::util::SharedLibrary library(JOBMAN_LIBCURL_SONAME, "libcurl4");
  return library;
}

template <typename Function> Function curl_function(const char* name) {
  return jobman::util::function<Function>(libcurl(), name);
}

} // namespace

extern "C" {

CURLcode curl_global_init(long flags) {
  static const auto call = curl_function<decltype(&curl_global_init)>("curl_global_init");
  return call(flags);
}

CURL* curl_easy_init() {
  static const auto call = curl_function<decltype(&curl_easy_init)>("curl_easy_init");
  return call();
}

// The one argument after the option is read as libcurl reads it: its type follows from the option's number.
CURLcode curl_easy_setopt(CURL* curl, CURLoption option, ...) {
  static const auto call = curl_function<decltype(&curl_easy_setopt)>("curl_easy_setopt");
  va_list args;
  va_start(args, option);
  CURLcode result = CURLE_OK;
  if (option < CURLOPTTYPE_OBJECTPOINT) {
    const long number = va_arg(args, long);
    result = call(curl, option, number);
  } else if (option >= CURLOPTTYPE_FUNCTIONPOINT && option < CURLOPTTYPE_OFF_T) {
    using Callback = void (*)();
    const Callback callback = va_arg(args, Callback);
    result = call(curl, option, callback);
  } else if (option >= CURLOPTTYPE_OFF_T && option < CURLOPTTYPE_BLOB) {
    const curl_off_t size = va_arg(args, curl_off_t);
    result = call(curl, option, size);
  } else {
    // Objects, strings, lists and blobs: a pointer.
    void* pointer = va_arg(args, void*);
    result = call(curl, option, pointer);
  }
  va_end(args);
  return result;
}

CURLcode curl_easy_perform(CURL* curl) {
  static const auto call = curl_function<decltype(&curl_easy_perform)>("curl_easy_perform");
  return call(curl);
}

// Every piece of information is written through a pointer.
CURLcode curl_easy_getinfo(CURL* curl, CURLINFO info, ...) {
  static const auto call = curl_function<decltype(&curl_easy_getinfo)>("curl_easy_getinfo");
  va_list args;
  va_start(args, info);
  void* out = va_arg(args, void*);
  va_end(args);
  return call(curl, info, out);
}

void curl_easy_reset(CURL* curl) {
  static const auto call = curl_function<decltype(&curl_easy_reset)>("curl_easy_reset");
  call(curl);
}

void curl_easy_cleanup(CURL* curl) {
  static const auto call = curl_function<decltype(&curl_easy_cleanup)>("curl_easy_cleanup");
  call(curl);
}

const char* curl_easy_strerror(CURLcode code) {
  static const auto call = curl_function<decltype(&curl_easy_strerror)>("curl_easy_strerror");
  return call(code);
}

curl_slist* curl_slist_append(curl_slist* list, const char* data) {
  static const auto call = curl_function<decltype(&curl_slist_append)>("curl_slist_append");
  return call(list, data);
}

void curl_slist_free_all(curl_slist* list) {
  static const auto call = curl_function<decltype(&curl_slist_free_all)>("curl_slist_free_all");
  call(list);
}

} // extern "C"
