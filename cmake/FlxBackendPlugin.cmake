# Helpers for the backend plugins (backends/<name>/CMakeLists.txt). Also
# installed with the CMake package (<libdir>/cmake/flx, beside the version
# script as flx_plugin_exports.map), so that a plugin built outside the
# repository against an installed flx finishes the same way
# (docs/backends.md, "A plugin outside the repository").

# The version script: beside this file when installed, else the source tree's.
if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/flx_plugin_exports.map)
  set(FLX_PLUGIN_EXPORTS_MAP ${CMAKE_CURRENT_LIST_DIR}/flx_plugin_exports.map)
else()
  set(FLX_PLUGIN_EXPORTS_MAP ${CMAKE_CURRENT_LIST_DIR}/../backends/backend_common/exports.map)
endif()

# flx_backend_option(VAR DOC): a cache option AUTO (default), ON or OFF,
# upper-cased in place; any other value stops the configure.
function(flx_backend_option var doc)
  set(${var} AUTO CACHE STRING "${doc} (AUTO, ON, OFF)")
  set_property(CACHE ${var} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${var}}" value)
  if(NOT value MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${var} must be AUTO, ON or OFF; got '${${var}}'")
  endif()
  set(${var} ${value} PARENT_SCOPE)
endfunction()

# flx_finish_backend_plugin(TARGET): what every plugin library shares. It
# exports exactly one symbol, flx_backend_entry (backends/backend_common/exports.map),
# links no undefined symbol, keeps the libraries it links to itself, lands
# in the project's top build folder (in flx's tree: beside libflx, where
# the plugin loader looks) and under <libdir>/flx when installed.
function(flx_finish_backend_plugin target)
  set(map ${FLX_PLUGIN_EXPORTS_MAP})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${target}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
  target_link_options(${target} PRIVATE -Wl,--no-undefined -Wl,--exclude-libs,ALL -Wl,--version-script=${map})
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${map})
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/flx)
endfunction()
