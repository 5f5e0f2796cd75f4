# Plugins named in ATTN_PLUGINS: list their kernels at configure time (with the lister of
# tools/list_plugin.c, compiled now), so that their tests are generated like the built-ins'.
# Sets ATTN_KERNEL_ENTRIES: "name" for a built-in kernel, "name@/path/plugin.so" otherwise.
set(ATTN_KERNEL_ENTRIES ${ATTN_BUILTIN_KERNELS})

# Appends "name@path" to ATTN_KERNEL_ENTRIES in the caller's scope; a name already taken stops
# the configure step, the message starting with `what` (the plugin or the Python spec).
function(attn_add_kernel_entry name path what)
  foreach(e IN LISTS ATTN_KERNEL_ENTRIES)
    string(REGEX REPLACE "@.*" "" other "${e}")
    if(other STREQUAL name)
      message(FATAL_ERROR "${what}: kernel name '${name}' is already taken")
    endif()
  endforeach()
  set(ATTN_KERNEL_ENTRIES ${ATTN_KERNEL_ENTRIES} "${name}@${path}" PARENT_SCOPE)
endfunction()
if(ATTN_PLUGINS)
  set(lister "${CMAKE_BINARY_DIR}/configure/attn_list_plugin")
  file(MAKE_DIRECTORY "${CMAKE_BINARY_DIR}/configure")
  list(TRANSFORM CUDAToolkit_INCLUDE_DIRS PREPEND -I OUTPUT_VARIABLE cuda_includes)
  execute_process(
    COMMAND "${CMAKE_C_COMPILER}" -std=c11 -O1 -I${CMAKE_SOURCE_DIR}/kernels
            ${cuda_includes} ${CMAKE_SOURCE_DIR}/tools/list_plugin.c
            ${CMAKE_SOURCE_DIR}/kernels/plugin.c -ldl -o "${lister}"
    RESULT_VARIABLE rc ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cannot build the plugin lister:\n${out}")
  endif()
  foreach(plugin IN LISTS ATTN_PLUGINS)
    if(NOT IS_ABSOLUTE "${plugin}" OR NOT EXISTS "${plugin}")
      message(FATAL_ERROR "ATTN_PLUGINS: '${plugin}' is not an absolute path to an existing file")
    endif()
    execute_process(COMMAND "${lister}" "${plugin}" RESULT_VARIABLE rc
                    OUTPUT_VARIABLE names ERROR_VARIABLE why OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "ATTN_PLUGINS: ${why}")
    endif()
    string(REPLACE "\n" ";" names "${names}")
    foreach(k IN LISTS names)
      attn_add_kernel_entry("${k}" "${plugin}" "ATTN_PLUGINS: ${plugin}")
      message(STATUS "plugin kernel ${k} from ${plugin}")
    endforeach()
  endforeach()
endif()
