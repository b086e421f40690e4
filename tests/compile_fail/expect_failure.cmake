# Compile SRC and require failure with a diagnostic that matches EXPECT
# (default: names FLX_FUNCTOR), and, when given, not REJECT.
if(NOT DEFINED EXPECT)
  set(EXPECT "FLX_FUNCTOR")
endif()
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -I${INCLUDE} ${SRC}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SRC} compiled, but it must be a compile error")
endif()
if(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "the compile error does not match '${EXPECT}':\n${err}")
endif()
if(DEFINED REJECT AND err MATCHES "${REJECT}")
  message(FATAL_ERROR "the compile error matches '${REJECT}', which misleads:\n${err}")
endif()
message(STATUS "failed to compile as required, matching '${EXPECT}'")
