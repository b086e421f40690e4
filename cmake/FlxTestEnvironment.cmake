# The environment every test runs in, whatever the caller's: plain `ctest`
# gives each test two PoCL devices and none of the variables that steer flx
# (a GPU backend preference, a plugin path, thread counts, the fused-Dense
# switch, OpenCL build logs, TF32, a hidden GPU, the tests' own switches). A
# test that needs one sets it itself. FLX_DATA passes through: it says where
# the datasets are, not how flx behaves (scripts/cuda-check.sh sets it).
# A LocalPreferences.toml above the build tree must not count either:
# flx_test_preferences_stop(dir) writes an empty one where the tests run,
# which ends flx's search upwards.
set(FLX_TEST_ENV_UNSET FLX_GPU_BACKEND FLX_BACKEND_PATH FLX_NUM_THREADS OMP_NUM_THREADS FLX_DENSE_FUSED
    FLX_OPENCL_VERBOSE FLX_CUDA_ALLOW_TF32 FLX_SILENCE_WARN_NO_GPU CUDA_VISIBLE_DEVICES FLX_TEST_LOOPBACK
    FLX_TEST_PLUGIN_MIN_DEVICES FLX_DISTRIBUTED_TIMEOUT FLX_DISTRIBUTED_MPI_CUDA_AWARE)
set(FLX_TEST_ENV_SET "POCL_DEVICES=pthread pthread")

function(flx_test_preferences_stop dir)
  file(WRITE ${dir}/LocalPreferences.toml
       "# Empty on purpose: flx's search for LocalPreferences.toml (from the working directory\n"
       "# upwards) ends here, so a preference above the build tree cannot change the tests.\n")
endfunction()

# GoogleTest programs: the tests of `target` (gtest_discover_tests, TEST_PREFIX
# `PREFIX`), listed and run under `cmake -E env` with the environment above
# and the program's own variables `ENV` (VAR=value ...). The launcher is the
# target's CROSSCOMPILING_EMULATOR, which gtest_discover_tests puts before the
# listing as well as before every run, so the tests listed (the conformance
# suite has one per device) are the tests that run.
function(flx_discover_tests target)
  cmake_parse_arguments(A "" "PREFIX;DISCOVERY_TIMEOUT" "ENV" ${ARGN})
  set(launcher ${CMAKE_COMMAND} -E env)
  foreach(v ${FLX_TEST_ENV_UNSET})
    list(APPEND launcher --unset=${v})
  endforeach()
  list(APPEND launcher ${FLX_TEST_ENV_SET} ${A_ENV})
  set_target_properties(${target} PROPERTIES CROSSCOMPILING_EMULATOR "${launcher}")
  if(NOT A_DISCOVERY_TIMEOUT)
    set(A_DISCOVERY_TIMEOUT 120)
  endif()
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT ${A_DISCOVERY_TIMEOUT} DISCOVERY_MODE PRE_TEST
    TEST_PREFIX "${A_PREFIX}" PROPERTIES TIMEOUT 600)
endfunction()

# Every other test of this directory (add_test): the same environment through
# ENVIRONMENT_MODIFICATION, but for the variables its ENVIRONMENT sets.
# Call it after the directory's last add_test.
function(flx_pin_test_environment)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t ${tests})
    get_test_property(${t} ENVIRONMENT own)
    set(mods "")
    foreach(v ${FLX_TEST_ENV_UNSET})
      if(NOT "${own}" MATCHES "(^|;)${v}=")
        list(APPEND mods "${v}=unset:")
      endif()
    endforeach()
    foreach(kv ${FLX_TEST_ENV_SET})
      string(REGEX MATCH "^[^=]+" v "${kv}")
      string(REGEX REPLACE "^[^=]+=" "" value "${kv}")
      if(NOT "${own}" MATCHES "(^|;)${v}=")
        list(APPEND mods "${v}=set:${value}")
      endif()
    endforeach()
    set_tests_properties(${t} PROPERTIES ENVIRONMENT_MODIFICATION "${mods}")
  endforeach()
endfunction()

# flx_whitebox_test(target): a white-box test. White-box tests call
# libflx's internals (src/, backends/cpu/), which the shared libflx does
# not export (hidden visibility, FLX_API): they link
# flx_whitebox, libflx's own objects as a static library, so the process
# holds one copy of libflx, internals included, and never the shared one
# too. They are built in the build tree's top folder, beside libflx and the
# plugins, because the plugin loader looks beside the binary that holds
# libflx's code (src/devices/registry.cpp, search_dirs). Black-box tests,
# examples, apps and benchmarks link the shared libflx (flx::flx).
function(flx_whitebox_test target)
  target_link_libraries(${target} PRIVATE flx_whitebox)
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}
    BUILD_RPATH "${FLX_OPENBLAS_DIR}")
endfunction()
