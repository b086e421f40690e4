# Run a program and check its exit status and its output, both: ctest's
# PASS_REGULAR_EXPRESSION alone would pass a program that prints the right
# text and then fails.
# usage: cmake -DEXE=program [-DARGS="a b"] [-DEXIT=0] [-DSTDOUT=regex] [-DSTDERR=regex]
#              [-DSTDOUT_EMPTY=ON] -P expect_run.cmake
if(NOT DEFINED EXIT)
  set(EXIT 0)
endif()
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${EXE} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "exit status ${rc}\n--- stdout\n${out}--- stderr\n${err}---")
set(problems "")
if(NOT rc STREQUAL "${EXIT}")
  string(APPEND problems "exit status ${rc}, expected ${EXIT}\n")
endif()
if(DEFINED STDOUT AND NOT out MATCHES "${STDOUT}")
  string(APPEND problems "stdout does not match /${STDOUT}/\n")
endif()
if(DEFINED STDERR AND NOT err MATCHES "${STDERR}")
  string(APPEND problems "stderr does not match /${STDERR}/\n")
endif()
if(STDOUT_EMPTY AND NOT out STREQUAL "")
  string(APPEND problems "stdout is not empty\n")
endif()
if(problems)
  message(FATAL_ERROR "${EXE} ${ARGS}:\n${problems}")
endif()
