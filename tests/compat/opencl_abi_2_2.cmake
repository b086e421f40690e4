# The OpenCL plugin as it was built before ABI 2.3 (at commit
# FLX_COMPAT_OPENCL_COMMIT, ABI 2.2), built from that commit's own sources
# and CMakeLists, so that its plugin suite and the conformance suite can run
# it under this libflx: a plugin built for an older minor version must keep
# working. The sources come from the repository's history (git archive) at
# configure time; without the history (a tarball, a shallow clone) the tests
# say so and skip. (The paths archived are that commit's: its backends/common is
# today's backends/backend_common.)
#
# Defines FLX_COMPAT_OPENCL_DIR (the folder holding libflx_backend_opencl.so)
# and the target flx_backend_opencl_abi_2_2 that builds it, or sets
# FLX_COMPAT_OPENCL_SKIP to the reason.
set(FLX_COMPAT_OPENCL_COMMIT b7ef6033466c3414038bde251330cd066436a7c0 CACHE STRING
    "The commit whose OpenCL plugin (ABI 2.2) the compatibility tests build")
set(_src ${CMAKE_CURRENT_BINARY_DIR}/opencl_abi_2_2/src)
set(_bin ${CMAKE_CURRENT_BINARY_DIR}/opencl_abi_2_2/build)
set(FLX_COMPAT_OPENCL_SKIP "")
find_package(Git QUIET)
if(NOT GIT_FOUND)
  set(FLX_COMPAT_OPENCL_SKIP "git is not installed")
elseif(NOT EXISTS ${_src}/.extracted-${FLX_COMPAT_OPENCL_COMMIT})
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${PROJECT_SOURCE_DIR} archive --format=tar
                          -o ${CMAKE_CURRENT_BINARY_DIR}/opencl_abi_2_2.tar ${FLX_COMPAT_OPENCL_COMMIT}
                          include backends/common backends/opencl cmake/FlxBackendPlugin.cmake
                  RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_VARIABLE _err)
  if(_rc EQUAL 0)
    file(REMOVE_RECURSE ${_src})
    file(ARCHIVE_EXTRACT INPUT ${CMAKE_CURRENT_BINARY_DIR}/opencl_abi_2_2.tar DESTINATION ${_src})
    file(REMOVE ${CMAKE_CURRENT_BINARY_DIR}/opencl_abi_2_2.tar)
    # The project around the old backends/opencl/CMakeLists.txt, as the
    # top-level CMakeLists.txt of that commit sets it up.
    file(WRITE ${_src}/CMakeLists.txt
         "cmake_minimum_required(VERSION 3.20)\n"
         "project(flx_opencl_abi_2_2 LANGUAGES C CXX)\n"
         "set(CMAKE_CXX_STANDARD 20)\nset(CMAKE_CXX_STANDARD_REQUIRED ON)\nset(CMAKE_CXX_EXTENSIONS OFF)\n"
         "include(GNUInstallDirs)\n"
         "find_package(OpenCL REQUIRED)\nfind_package(CLBlast REQUIRED)\n"
         "include(cmake/FlxBackendPlugin.cmake)\nadd_subdirectory(backends/opencl)\n")
    file(WRITE ${_src}/.extracted-${FLX_COMPAT_OPENCL_COMMIT} "")
  else()
    string(STRIP "${_err}" _err)
    set(FLX_COMPAT_OPENCL_SKIP "the repository's history lacks commit ${FLX_COMPAT_OPENCL_COMMIT} (${_err})")
  endif()
endif()
if(NOT FLX_COMPAT_OPENCL_SKIP)
  include(ExternalProject)
  ExternalProject_Add(flx_backend_opencl_abi_2_2
    SOURCE_DIR ${_src}
    BINARY_DIR ${_bin}
    CMAKE_ARGS -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
               -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER} -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
               -DCMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER}
    BUILD_BYPRODUCTS ${_bin}/libflx_backend_opencl.so
    INSTALL_COMMAND "")
  set(FLX_COMPAT_OPENCL_DIR ${_bin})
endif()
