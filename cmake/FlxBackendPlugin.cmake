# Helpers for the backend plugins (backends/<name>/CMakeLists.txt).

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
# beside libflx in the build tree (where the plugin loader looks) and under
# <libdir>/flx when installed.
function(flx_finish_backend_plugin target)
  set(map ${PROJECT_SOURCE_DIR}/backends/backend_common/exports.map)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${target}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
  target_link_options(${target} PRIVATE -Wl,--no-undefined -Wl,--exclude-libs,ALL -Wl,--version-script=${map})
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${map})
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/flx)
endfunction()
