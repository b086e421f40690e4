# Run at build time (cmake -P, from backends/opencl/CMakeLists.txt): writes
# the text of each input file as a raw string literal, one constant per file
# in namespace flx_ocl::embedded, into OUTPUT_CPP, and their declarations
# into OUTPUT_HPP. The constant's name is the file's name with '.' as '_'
# (kernels/prelude.cl -> prelude_cl, backend_elem.h -> backend_elem_h).
#   -DINPUTS=<absolute paths, separated by '|'> -DOUTPUT_CPP=<file> -DOUTPUT_HPP=<file>
#   -DROOT=<the source tree, which the comments name the files from>
#   -DINCLUDE_DIR=<where the #include "..." lines of the inputs look>
#   -DINCLUDED=<absolute paths, separated by '|', of the files they may include>
# OpenCL C has no include path for a program built from a string, so a line
#   #include "flx/backend_philox.h"
# in an input is replaced by that file's text here: the kernels then compile
# the very header that C++ and CUDA include (one level: an included file
# includes nothing). INCLUDED is the custom command's list of those files,
# which must be in its DEPENDS so that editing one rebuilds the text; an
# #include of a file not listed there stops the build.
# The header is rewritten only when the list of constants changes, so an
# edit to a .cl file recompiles only the generated .cpp.
cmake_minimum_required(VERSION 3.25)  # script mode: today's policies (while(TRUE), if())
foreach(_var INPUTS OUTPUT_CPP OUTPUT_HPP ROOT INCLUDE_DIR INCLUDED)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "embed_text.cmake: -D${_var}=... is required")
  endif()
endforeach()
string(REPLACE "|" ";" _inputs "${INPUTS}")
string(REPLACE "|" ";" _included "${INCLUDED}")
set(_include_line "(^|\n)#include \"([^\"\n]+)\"")

set(_note "// Generated at build time by backends/opencl/embed_text.cmake from the files\n// named below (see backends/opencl/CMakeLists.txt). Do not edit.\n")
set(_hpp "${_note}#pragma once\n\nnamespace flx_ocl::embedded {\n\n")
set(_cpp "${_note}#include \"ocl_embedded.hpp\"\n\nnamespace flx_ocl::embedded {\n")
foreach(_path IN LISTS _inputs)
  get_filename_component(_file "${_path}" NAME)
  string(REPLACE "." "_" _name "${_file}")
  file(RELATIVE_PATH _shown "${ROOT}" "${_path}")
  file(READ "${_path}" _text)
  while(TRUE)
    string(REGEX MATCH "${_include_line}" _line "${_text}")
    if(_line STREQUAL "")
      break()
    endif()
    set(_header "${CMAKE_MATCH_2}")
    list(FIND _included "${INCLUDE_DIR}/${_header}" _listed)
    if(_listed EQUAL -1)
      message(FATAL_ERROR "${_path}: #include \"${_header}\" is not in the embedded files' DEPENDS "
                          "(backends/opencl/CMakeLists.txt, _flx_ocl_included)")
    endif()
    file(READ "${INCLUDE_DIR}/${_header}" _header_text)
    string(REGEX MATCH "${_include_line}" _nested "${_header_text}")
    if(NOT _nested STREQUAL "")
      message(FATAL_ERROR "${INCLUDE_DIR}/${_header}: a header a .cl file includes must include nothing itself")
    endif()
    string(REPLACE "#include \"${_header}\"" "${_header_text}" _text "${_text}")
  endwhile()
  # The text must not end the literal early.
  string(FIND "${_text}" ")FLXEMBED\"" _clash)
  if(NOT _clash EQUAL -1)
    message(FATAL_ERROR "${_path}: contains the raw-string delimiter )FLXEMBED\"")
  endif()
  string(APPEND _hpp "extern const char* const ${_name};  // ${_shown}\n")
  string(APPEND _cpp "\n// ${_shown}\nconst char* const ${_name} = R\"FLXEMBED(${_text})FLXEMBED\";\n")
endforeach()
string(APPEND _hpp "\n}  // namespace flx_ocl::embedded\n")
string(APPEND _cpp "\n}  // namespace flx_ocl::embedded\n")

file(WRITE "${OUTPUT_CPP}" "${_cpp}")
file(WRITE "${OUTPUT_HPP}.tmp" "${_hpp}")
file(COPY_FILE "${OUTPUT_HPP}.tmp" "${OUTPUT_HPP}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT_HPP}.tmp")
