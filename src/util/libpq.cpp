// The libpq functions the store's PostgreSQL backend calls, each forwarding to libpq's own, opened on the first
// call (see jobman/util/shared_library.hpp for why): a user whose store is SQLite never maps libpq, its TLS and its
// Kerberos and LDAP libraries. Declared by <libpq-fe.h>, which the backend includes as usual.
#include "jobman/util/shared_library.hpp"

#include <libpq-fe.h>

namespace {

jobman::util::SharedLibrary& libpq() {
  static jobman::util::SharedLibrary library(JOBMAN_LIBPQ_SONAME, "libpq5");
  return library;
}

template <typename Function> Function pq_function(const char* name) {
  return jobman::util::function<Function>(libpq(), name);
}

} // namespace

extern "C" {

PGconn* PQconnectdbParams(const char* const* keywords, const char* const* values, int expand_dbname) {
  static const auto call = pq_function<decltype(&PQconnectdbParams)>("PQconnectdbParams");
  return call(keywords, values, expand_dbname);
}

void PQfinish(PGconn* conn) {
  static const auto call = pq_function<decltype(&PQfinish)>("PQfinish");
  call(conn);
}

void PQreset(PGconn* conn) {
  static const auto call = pq_function<decltype(&PQreset)>("PQreset");
  call(conn);
}

ConnStatusType PQstatus(const PGconn* conn) {
  static const auto call = pq_function<decltype(&PQstatus)>("PQstatus");
  return call(conn);
}

char* PQerrorMessage(const PGconn* conn) {
  static const auto call = pq_function<decltype(&PQerrorMessage)>("PQerrorMessage");
  return call(conn);
}

int PQsocket(const PGconn* conn) {
  static const auto call = pq_function<decltype(&PQsocket)>("PQsocket");
  return call(conn);
}

PQnoticeProcessor PQsetNoticeProcessor(PGconn* conn, PQnoticeProcessor processor, void* arg) {
  static const auto call = pq_function<decltype(&PQsetNoticeProcessor)>("PQsetNoticeProcessor");
  return call(conn, processor, arg);
}

PGresult* PQexec(PGconn* conn, const char* query) {
  static const auto call = pq_function<decltype(&PQexec)>("PQexec");
  return call(conn, query);
}

PGresult* PQexecParams(PGconn* conn, const char* command, int count, const Oid* types, const char* const* values,
                       const int* lengths, const int* formats, int result_format) {
  static const auto call = pq_function<decltype(&PQexecParams)>("PQexecParams");
  return call(conn, command, count, types, values, lengths, formats, result_format);
}

int PQconsumeInput(PGconn* conn) {
  static const auto call = pq_function<decltype(&PQconsumeInput)>("PQconsumeInput");
  return call(conn);
}

PGnotify* PQnotifies(PGconn* conn) {
  static const auto call = pq_function<decltype(&PQnotifies)>("PQnotifies");
  return call(conn);
}

void PQfreemem(void* pointer) {
  static const auto call = pq_function<decltype(&PQfreemem)>("PQfreemem");
  call(pointer);
}

ExecStatusType PQresultStatus(const PGresult* result) {
  static const auto call = pq_function<decltype(&PQresultStatus)>("PQresultStatus");
  return call(result);
}

char* PQresultErrorMessage(const PGresult* result) {
  static const auto call = pq_function<decltype(&PQresultErrorMessage)>("PQresultErrorMessage");
  return call(result);
}

char* PQresultErrorField(const PGresult* result, int field) {
  static const auto call = pq_function<decltype(&PQresultErrorField)>("PQresultErrorField");
  return call(result, field);
}

int PQntuples(const PGresult* result) {
  static const auto call = pq_function<decltype(&PQntuples)>("PQntuples");
  return call(result);
}

char* PQcmdTuples(PGresult* result) {
  static const auto call = pq_function<decltype(&PQcmdTuples)>("PQcmdTuples");
  return call(result);
}

char* PQgetvalue(const PGresult* result, int row, int column) {
  static const auto call = pq_function<decltype(&PQgetvalue)>("PQgetvalue");
  return call(result, row, column);
}

int PQgetlength(const PGresult* result, int row, int column) {
  static const auto call = pq_function<decltype(&PQgetlength)>("PQgetlength");
  return call(result, row, column);
}

int PQgetisnull(const PGresult* result, int row, int column) {
  static const auto call = pq_function<decltype(&PQgetisnull)>("PQgetisnull");
  return call(result, row, column);
}

void PQclear(PGresult* result) {
  static const auto call = pq_function<decltype(&PQclear)>("PQclear");
  call(result);
}

} // extern "C"
