# Compile SRC and require failure with a diagnostic that names FLX_FUNCTOR.
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -I${INCLUDE} ${SRC}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SRC} compiled, but fmap over an undeclared struct must be a compile error")
endif()
if(NOT err MATCHES "FLX_FUNCTOR")
  message(FATAL_ERROR "the compile error does not name FLX_FUNCTOR:\n${err}")
endif()
message(STATUS "failed to compile as required, naming FLX_FUNCTOR")
