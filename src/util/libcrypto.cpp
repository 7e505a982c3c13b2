// The OpenSSL libcrypto functions jobman calls (service-account signatures, digests, random bytes), each forwarding
// to libcrypto's own, opened on the first call (see jobman/util/shared_library.hpp for why). Declared by OpenSSL's
// headers, which the callers include as usual.
#include "jobman/util/shared_library.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

namespace {

jobman::util::SharedLibrary& libcrypto() {
  static jobman::util::SharedLibrary library(JOBMAN_LIBCRYPTO_SONAME, "libssl3");
  return library;
}

template <typename Function> Function crypto_function(const char* name) {
  return jobman::util::function<Function>(libcrypto(), name);
}

} // namespace

extern "C" {

BIO* BIO_new_mem_buf(const void* buf, int len) {
  static const auto call = crypto_function<decltype(&BIO_new_mem_buf)>("BIO_new_mem_buf");
  return call(buf, len);
}

int BIO_free(BIO* bio) {
  static const auto call = crypto_function<decltype(&BIO_free)>("BIO_free");
  return call(bio);
}

EVP_PKEY* PEM_read_bio_PrivateKey(BIO* bio, EVP_PKEY** key, pem_password_cb* password, void* user) {
  static const auto call = crypto_function<decltype(&PEM_read_bio_PrivateKey)>("PEM_read_bio_PrivateKey");
  return call(bio, key, password, user);
}

void EVP_PKEY_free(EVP_PKEY* key) {
  static const auto call = crypto_function<decltype(&EVP_PKEY_free)>("EVP_PKEY_free");
  call(key);
}

const EVP_MD* EVP_sha256() {
  static const auto call = crypto_function<decltype(&EVP_sha256)>("EVP_sha256");
  return call();
}

EVP_MD_CTX* EVP_MD_CTX_new() {
  static const auto call = crypto_function<decltype(&EVP_MD_CTX_new)>("EVP_MD_CTX_new");
  return call();
}

void EVP_MD_CTX_free(EVP_MD_CTX* context) {
  static const auto call = crypto_function<decltype(&EVP_MD_CTX_free)>("EVP_MD_CTX_free");
  call(context);
}

int EVP_Digest(const void* data, size_t count, unsigned char* md, unsigned int* size, const EVP_MD* type,
               ENGINE* engine) {
  static const auto call = crypto_function<decltype(&EVP_Digest)>("EVP_Digest");
  return call(data, count, md, size, type, engine);
}

int EVP_DigestSignInit(EVP_MD_CTX* context, EVP_PKEY_CTX** key_context, const EVP_MD* type, ENGINE* engine,
                       EVP_PKEY* key) {
  static const auto call = crypto_function<decltype(&EVP_DigestSignInit)>("EVP_DigestSignInit");
  return call(context, key_context, type, engine, key);
}

int EVP_DigestSign(EVP_MD_CTX* context, unsigned char* signature, size_t* length, const unsigned char* data,
                   size_t size) {
  static const auto call = crypto_function<decltype(&EVP_DigestSign)>("EVP_DigestSign");
  return call(context, signature, length, data, size);
}

int RAND_bytes(unsigned char* buf, int num) {
  static const auto call = crypto_function<decltype(&RAND_bytes)>("RAND_bytes");
  return call(buf, num);
}

} // extern "C"
