# Run after a test program is built (see jobman_add_test_suites in tests/CMakeLists.txt): lists its tests and writes
# OUTPUT, a CTest file that adds one test per suite, `SUITE` running `BINARY --gtest_filter=SUITE.*`, with LABELS.
# Arguments (-D): BINARY, OUTPUT, LABELS, TIMEOUT.
execute_process(COMMAND "${BINARY}" --gtest_list_tests OUTPUT_VARIABLE listing ERROR_VARIABLE errors
  RESULT_VARIABLE status TIMEOUT 60)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${BINARY} --gtest_list_tests failed (${status}):\n${errors}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(content "# Written by tests/cmake/gtest_suites.cmake from ${BINARY} --gtest_list_tests.\n")
set(suites 0)
foreach(line IN LISTS lines)
  # A suite's line is its name and a dot, then perhaps "  # TypeParam = ..."; its tests' lines are indented. The
  # other lines (gtest_main's "Running main() from ...") are neither.
  if(line MATCHES "^([A-Za-z0-9_/]+)\\.(  #.*)?$")
    set(suite "${CMAKE_MATCH_1}")
    string(APPEND content "add_test([==[${suite}]==] [==[${BINARY}]==] [==[--gtest_filter=${suite}.*]==])\n"
      "set_tests_properties([==[${suite}]==] PROPERTIES LABELS [==[${LABELS}]==] TIMEOUT ${TIMEOUT})\n")
    math(EXPR suites "${suites} + 1")
  endif()
endforeach()
if(suites EQUAL 0)
  message(FATAL_ERROR "${BINARY} --gtest_list_tests listed no suite")
endif()
file(WRITE "${OUTPUT}" "${content}")
