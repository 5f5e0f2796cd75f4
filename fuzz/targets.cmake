# The fuzz targets, read by fuzz/CMakeLists.txt (the replay unit tests, the project's compiler)
# and fuzz/libfuzzer/CMakeLists.txt (clang, libFuzzer): a target <t> is fuzz/fuzz_<t>.c, its
# seeds fuzz/corpus/<t>/, and the project's host C files it tests, compiled into it (never the
# libraries: attn_harness has CUDA parts). Paths are relative to the source tree.
set(ATTN_FUZZ_TARGETS shapes thresholds tolerance results plugin tuned)
set(attn_fuzz_sources_shapes harness/shapes.c harness/pairwise.c harness/text_file.c)
set(attn_fuzz_sources_thresholds harness/thresholds.c harness/ini_file.c harness/text_file.c)
set(attn_fuzz_sources_tolerance harness/verdict.c harness/ini_file.c harness/text_file.c)
# attn_results whole, its main renamed (ATTN_FUZZ_MAIN_RENAMED) and its GPU made up (gpu_stubs.c)
set(attn_fuzz_sources_results tools/results_collect.c harness/results.c harness/thresholds.c harness/ini_file.c
    harness/text_file.c fuzz/gpu_stubs.c)
set(attn_fuzz_sources_plugin kernels/plugin.c kernels/capability.c)
set(attn_fuzz_sources_tuned harness/tuned.c)

# what each links beyond libc: inih, jansson (the Debian archives the project links), dl
set(attn_fuzz_libs_thresholds inih)
set(attn_fuzz_libs_tolerance inih m)
set(attn_fuzz_libs_results jansson inih)
set(attn_fuzz_libs_plugin dl)
set(attn_fuzz_libs_shapes "")
set(attn_fuzz_libs_tuned "")
# results_collect.c's main, callable from the target (a definition on that file, in fuzz/ only)
set(ATTN_FUZZ_MAIN_RENAMED main=attn_results_main)
# every target's include folders
set(ATTN_FUZZ_INCLUDES fuzz harness kernels abi baselines)

# attn_fuzz_executable(<t> <executable> [more sources...]): target <t>'s executable, its sources
# and include folders; ATTN_FUZZ_ROOT is the source tree, ATTN_FUZZ_LIB_<lib> what links <lib>
# and ATTN_FUZZ_EXTRA_INCLUDES the CUDA toolkit's and the libraries' headers. The caller adds
# the compile and link flags.
function(attn_fuzz_executable t exe)
  set(srcs ${ATTN_FUZZ_ROOT}/fuzz/fuzz_${t}.c ${ATTN_FUZZ_ROOT}/fuzz/fuzz_util.c ${ARGN})
  foreach(s IN LISTS attn_fuzz_sources_${t})
    list(APPEND srcs ${ATTN_FUZZ_ROOT}/${s})
  endforeach()
  add_executable(${exe} ${srcs})
  set_source_files_properties(${ATTN_FUZZ_ROOT}/tools/results_collect.c PROPERTIES
                              COMPILE_DEFINITIONS ${ATTN_FUZZ_MAIN_RENAMED})
  foreach(d IN LISTS ATTN_FUZZ_INCLUDES)
    target_include_directories(${exe} PRIVATE ${ATTN_FUZZ_ROOT}/${d})
  endforeach()
  target_include_directories(${exe} SYSTEM PRIVATE ${ATTN_FUZZ_EXTRA_INCLUDES})
  foreach(l IN LISTS attn_fuzz_libs_${t})
    target_link_libraries(${exe} PRIVATE ${ATTN_FUZZ_LIB_${l}})
  endforeach()
endfunction()

# The plugin target's table library (fuzz/plugin_table.c), lib<name>.so beside the executables.
function(attn_fuzz_plugin_table target dir)
  add_library(${target} MODULE ${ATTN_FUZZ_ROOT}/fuzz/plugin_table.c)
  target_include_directories(${target} PRIVATE ${ATTN_FUZZ_ROOT}/abi)
  target_include_directories(${target} SYSTEM PRIVATE ${ATTN_FUZZ_EXTRA_INCLUDES})
  set_target_properties(${target} PROPERTIES PREFIX "lib" OUTPUT_NAME fuzz_plugin_table
                        LIBRARY_OUTPUT_DIRECTORY ${dir})
endfunction()
