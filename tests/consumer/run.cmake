# Install flx from BUILD_DIR into a scratch prefix, then configure, build and
# run the consumer project against it. The prefix is private (WORK, in the
# build tree) and the installed libflx looks for plugins only beside itself,
# so an earlier `cmake --install` elsewhere changes nothing here.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
# cmake --install writes BUILD_DIR/install_manifest.txt: keep the user's own
# (the list of what their install put where, for removing it).
set(manifest ${BUILD_DIR}/install_manifest.txt)
if(EXISTS ${manifest})
  file(COPY_FILE ${manifest} ${WORK}/users_install_manifest.txt)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix RESULT_VARIABLE rc OUTPUT_QUIET)
if(EXISTS ${WORK}/users_install_manifest.txt)
  file(RENAME ${WORK}/users_install_manifest.txt ${manifest})
else()
  file(REMOVE ${manifest})
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK}/build
                -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the consumer project failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the consumer project failed")
endif()
execute_process(COMMAND ${WORK}/build/consumer WORKING_DIRECTORY ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "consumer printed: ${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the consumer failed (exit ${rc}): ${out} ${err}")
endif()
if(NOT out MATCHES "loader 9 of 9 batches 3, mapobs 30, checkpoint round trip ok")
  message(FATAL_ERROR "DataLoader or checkpoints misbehaved in the consumer: ${out}")
endif()
if(NOT out MATCHES "cu (unavailable|-> CUDA:0) as expected")
  message(FATAL_ERROR "cu moved to CUDA without a functional GPU, or failed with one: ${out}")
endif()

# The out-of-tree plugin, built against the installed plugin SDK only: the
# installed libflx finds it on FLX_BACKEND_PATH, opens it and gives its reason.
execute_process(COMMAND ${CMAKE_COMMAND} -E env FLX_BACKEND_PATH=${WORK}/build ${WORK}/build/plugin_status
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "found 1, functional 0: not functional: the consumer's toy plugin \\(add takes 2 operands\\)")
  message(FATAL_ERROR "the plugin built against the installed SDK was not loaded as expected (${rc}): ${out} ${err}")
endif()
message(STATUS "the out-of-tree plugin: ${out}")

# Built once, the program runs with the OpenCL plugin present and without it.
set(plugin ${WORK}/prefix/lib/flx/libflx_backend_opencl.so)
if(EXISTS ${plugin})
  execute_process(COMMAND ${CMAKE_COMMAND} -E env FLX_GPU_BACKEND=OpenCL ${WORK}/build/consumer WORKING_DIRECTORY ${WORK}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "gpu -> OpenCL:0, sum 3.000")
    message(FATAL_ERROR "with the OpenCL plugin and preference OpenCL, gpu() did not use OpenCL:0 (${rc}): ${out} ${err}")
  endif()
  file(REMOVE ${plugin})
  execute_process(COMMAND ${CMAKE_COMMAND} -E env FLX_GPU_BACKEND=OpenCL ${WORK}/build/consumer WORKING_DIRECTORY ${WORK}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "gpu -> CPU, sum 3.000" OR NOT err MATCHES "libflx_backend_opencl.so not found")
    message(FATAL_ERROR "without the OpenCL plugin the same program did not fall back to the CPU with the reason (${rc}): ${out} ${err}")
  endif()
  message(STATUS "ran unchanged with and without the OpenCL plugin")
else()
  message(STATUS "the OpenCL plugin is not part of this build: checked without it only")
endif()
