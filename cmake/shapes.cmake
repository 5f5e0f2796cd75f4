# Reads a shape-matrix file (see shapes/correctness.txt for the format) through attn_shapes
# (tools/shapes.c; the parser is harness/shapes.c), which this file compiles into the build
# folder at configure time, before anything else is built.
#
#   attn_read_shapes(<file> <prefix>)
# sets <prefix>_BATCH and <prefix>_HEADS (or <prefix>_TOKENS and <prefix>_HIDDEN), and <prefix>_CASES, a list of
# "<dtype>:<head_dim>:<mask>:<seqlen_q>:<seqlen_k>:<shape name>" where the shape name is
# s<S> for S_q = S_k = S and q<S_q>k<S_k> otherwise; <prefix>_DTYPES, _DIMS, _MASKS (the axis
# lists), _SHAPES ("QxK,QxK,..."), and the version-2 axes _HEADS_K, _WINDOWS, _SOFTCAPS,
# _PAGE_SIZES (every axis of harness/axes.def), _AXIS_OPTIONS (the attn_correctness options of
# the axes given beyond dtype, head_dim and mask: "--heads-k;8,2;--window;...") and _PACKED
# ("QxK+QxK+..." per 'sequences' line). A malformed file stops the
# configure step with "<file>:<line>: <what was expected>"; editing the file re-runs it.
#
#   attn_check_names(<var> <group>)
# sets <var> to the comma-separated names of the checks of <group> (harness/checks.def).
#
# In script mode (cmake -P) there is no compiler: pass -DATTN_SHAPES_PROGRAM=<attn_shapes>.

# The leading space keeps CMake from word-wrapping the message, so "<file>:<line>: ..."
# stays on one line for editors, grep and the parser's unit tests.
function(_attn_fatal msg)
  message(FATAL_ERROR " ${msg}")
endfunction()

set(_ATTN_SHAPES_ROOT "${CMAKE_CURRENT_LIST_DIR}/..")

# attn_shapes built from the sources of its target (tools/CMakeLists.txt) with the C compiler
# CMake found, again only when a source is newer; editing a source re-runs the configure step.
function(_attn_shapes_program out)
  if(ATTN_SHAPES_PROGRAM)
    set(${out} "${ATTN_SHAPES_PROGRAM}" PARENT_SCOPE)
    return()
  endif()
  if(NOT CMAKE_C_COMPILER)
    _attn_fatal("attn_read_shapes: no C compiler to build attn_shapes (script mode: pass -DATTN_SHAPES_PROGRAM=<attn_shapes>)")
  endif()
  set(r "${_ATTN_SHAPES_ROOT}")
  set(sources "${r}/harness/shapes.c" "${r}/harness/pairwise.c" "${r}/harness/tuned.c" "${r}/harness/text_file.c"
              "${r}/tools/shapes.c")
  set(inputs ${sources} "${r}/harness/shapes.h" "${r}/harness/axes.def" "${r}/harness/pairwise.h" "${r}/harness/checks.def"
             "${r}/harness/tuned.h" "${r}/harness/text_file.h")
  set(exe "${CMAKE_BINARY_DIR}/CMakeFiles/attn_shapes/attn_shapes")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${inputs})
  foreach(f IN LISTS inputs)
    if(NOT EXISTS "${exe}" OR "${f}" IS_NEWER_THAN "${exe}")
      file(MAKE_DIRECTORY "${CMAKE_BINARY_DIR}/CMakeFiles/attn_shapes")
      execute_process(COMMAND "${CMAKE_C_COMPILER}" -std=c11 -O2 "-I${r}/harness"
                              -o "${exe}" ${sources}
                      RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
      if(NOT rc EQUAL 0)
        _attn_fatal("could not build attn_shapes for the configure step (${CMAKE_C_COMPILER}):\n${log}")
      endif()
      break()
    endif()
  endforeach()
  set(${out} "${exe}" PARENT_SCOPE)
endfunction()

# Runs attn_shapes with `args`; its output in `out`, its error (the program's name cut, so
# that the message starts "<file>:<line>:") stops the configure step.
function(_attn_shapes_run out)
  _attn_shapes_program(program)
  execute_process(COMMAND "${program}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(NOT rc EQUAL 0)
    string(REGEX REPLACE "^attn_shapes: " "" stderr "${stderr}")
    string(STRIP "${stderr}" stderr)
    if(stderr STREQUAL "")
      set(stderr "${program}: ${rc}")
    endif()
    _attn_fatal("${stderr}")
  endif()
  set(${out} "${stdout}" PARENT_SCOPE)
endfunction()

function(attn_read_shapes file prefix)
  if(NOT CMAKE_SCRIPT_MODE_FILE)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${file}")
  endif()
  _attn_shapes_run(code --cmake ${prefix} "${file}")
  cmake_language(EVAL CODE "${code}")
  # the variables it set, for the caller
  string(REGEX MATCHALL "set\\(${prefix}_[A-Z_]+" names "${code}")
  foreach(name IN LISTS names)
    string(SUBSTRING "${name}" 4 -1 name)
    set(${name} "${${name}}" PARENT_SCOPE)
  endforeach()
endfunction()

function(attn_check_names var group)
  _attn_shapes_run(names --checks ${group})
  string(STRIP "${names}" names)
  set(${var} "${names}" PARENT_SCOPE)
endfunction()
