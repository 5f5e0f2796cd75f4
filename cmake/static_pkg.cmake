# attn_static_pkg(<name> <pkg-config module>): an interface target attn::<name> that links
# the module's static archives (pkg-config --static), so the binaries run on a machine
# without the library. Set PKG_CONFIG_PATH to use a private prefix (scripts/deps.sh).
function(attn_static_pkg name module)
  pkg_check_modules(PC_${name} REQUIRED ${module})
  add_library(attn::${name} INTERFACE IMPORTED GLOBAL)
  set(libs "")
  foreach(lib IN LISTS PC_${name}_STATIC_LIBRARIES)
    if(lib MATCHES "^(m|rt|dl|pthread|c)$")
      list(APPEND libs ${lib})
      continue()
    endif()
    find_library(ATTN_STATIC_${lib} NAMES lib${lib}.a
                 HINTS ${PC_${name}_STATIC_LIBRARY_DIRS} ${PC_${name}_LIBRARY_DIRS} NO_CACHE)
    if(NOT ATTN_STATIC_${lib})
      message(FATAL_ERROR "${module}: no static archive lib${lib}.a (install the -dev package "
                          "or run scripts/deps.sh)")
    endif()
    list(APPEND libs ${ATTN_STATIC_${lib}})
  endforeach()
  target_link_libraries(attn::${name} INTERFACE ${libs} ${PC_${name}_STATIC_LDFLAGS_OTHER})
  target_compile_options(attn::${name} INTERFACE ${PC_${name}_STATIC_CFLAGS_OTHER})
  target_include_directories(attn::${name} INTERFACE ${PC_${name}_STATIC_INCLUDE_DIRS}
                                                     ${PC_${name}_INCLUDE_DIRS})
endfunction()
