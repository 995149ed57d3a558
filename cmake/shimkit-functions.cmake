# shimkit's CMake API (installed with the package; see docs/adopting.md):
#
#   shimkit_shim_library(<name> SOURCES <src>... [HEADERS <hdr>...] [PREFIX_FILE <file>]
#                        [SHARED] [COMPILE_OPTIONS <opt>...] [INCLUDE_DIRECTORIES <dir>...]
#                        [LINK_LIBRARIES <lib>...])
#   shimkit_add_lint_test(<target> [NAME <test>] [PREFIX_FILE <file>] [FILES <file>...]
#                         [PROVIDERS <target-or-file>...] [EXPECT_EXIT <n>] [ARGS <arg>...])
#
# The prefix comes from the consumer's shim_symbol_prefix.bzl, read through
# `shimkit config --format cmake` (or from a copy generated with --output and kept
# honest with --check). A hand-set prefix define that disagrees with it fails the
# configure step.
#
# Expects (set by shimkitConfig.cmake, or by shimkit's own CMakeLists.txt):
#   SHIMKIT_COMMAND           the shimkit command line (a list)
#   shimkit::rename_header    an INTERFACE target with the rename header's include dir
include_guard(GLOBAL)

set(_SHIMKIT_FUNCTIONS_DIR "${CMAKE_CURRENT_LIST_DIR}")

# Reads a prefix file into SHIMKIT_* variables of the caller (a macro: the included
# `set()`s land in the caller's scope). `file` empty: shimkit's discovery from the
# current source directory. `tag` names the generated copy.
macro(_shimkit_load_prefix file tag)
  if("${file}" MATCHES "\\.cmake$")
    include("${file}")
  else()
    if(NOT SHIMKIT_COMMAND)
      message(FATAL_ERROR "shimkit: the `shimkit` command was not found: install shimkit "
                          "(pip install shimkit) or set SHIMKIT_EXECUTABLE")
    endif()
    set(_shimkit_generated "${CMAKE_CURRENT_BINARY_DIR}/shimkit/${tag}.prefix.cmake")
    file(MAKE_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}/shimkit")
    if("${file}" STREQUAL "")
      set(_shimkit_config_args "")
    else()
      set(_shimkit_config_args --config "${file}")
    endif()
    execute_process(
      COMMAND ${SHIMKIT_COMMAND} ${_shimkit_config_args} config --format cmake
              --output "${_shimkit_generated}"
      WORKING_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}"
      RESULT_VARIABLE _shimkit_rc
      ERROR_VARIABLE _shimkit_err
      OUTPUT_QUIET)
    if(NOT _shimkit_rc EQUAL 0)
      string(STRIP "${_shimkit_err}" _shimkit_err)
      message(FATAL_ERROR "shimkit: cannot read the prefix file for ${tag}: ${_shimkit_err}")
    endif()
    include("${_shimkit_generated}")
  endif()
  cmake_path(NORMAL_PATH SHIMKIT_PREFIX_SOURCE)
  # Editing the prefix file re-runs the configure step.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${SHIMKIT_PREFIX_SOURCE}")
endmacro()

# Every buildsystem target under `dir`, recursively.
function(_shimkit_targets_under dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _shimkit_targets_under("${sub}" more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} "${targets}" PARENT_SCOPE)
endfunction()

# Every directory under `dir`, `dir` included.
function(_shimkit_dirs_under dir out)
  set(dirs "${dir}")
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _shimkit_dirs_under("${sub}" more)
    list(APPEND dirs ${more})
  endforeach()
  set(${out} "${dirs}" PARENT_SCOPE)
endfunction()

# `<define>=<value>` entries in `items` (definitions or -D options) whose value is not
# one of the prefixes the shim libraries use, as "<value> (<where>)".
function(_shimkit_stray_values define items where prefixes out)
  set(found "")
  foreach(item IN LISTS items)
    if(item MATCHES "^(-D)?${define}=(.*)$")
      set(value "${CMAKE_MATCH_2}")
      if(NOT value IN_LIST prefixes)
        list(APPEND found "'${value}' (${where})")
      endif()
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# Deferred to the end of the top-level directory: every hand-set value of a prefix
# define (a cache variable, CMAKE_<LANG>_FLAGS, directory or target definitions and
# options) must equal the prefix its shim library reads from the prefix file.
function(_shimkit_check_hand_set_prefix)
  get_property(defines GLOBAL PROPERTY SHIMKIT_PREFIX_DEFINES)
  list(REMOVE_DUPLICATES defines)
  get_property(own GLOBAL PROPERTY SHIMKIT_SHIM_TARGETS)
  _shimkit_targets_under("${CMAKE_SOURCE_DIR}" targets)
  _shimkit_dirs_under("${CMAKE_SOURCE_DIR}" dirs)
  foreach(define IN LISTS defines)
    get_property(prefixes GLOBAL PROPERTY SHIMKIT_PREFIXES_${define})
    get_property(sources GLOBAL PROPERTY SHIMKIT_PREFIX_SOURCES_${define})
    list(REMOVE_DUPLICATES prefixes)
    list(REMOVE_DUPLICATES sources)
    set(stray "")
    if(DEFINED ${define} AND NOT "${${define}}" IN_LIST prefixes)
      list(APPEND stray "'${${define}}' (CMake variable ${define})")
    endif()
    foreach(var IN ITEMS CMAKE_C_FLAGS CMAKE_CXX_FLAGS)
      foreach(suffix IN ITEMS "" _DEBUG _RELEASE _RELWITHDEBINFO _MINSIZEREL)
        separate_arguments(items UNIX_COMMAND "${${var}${suffix}}")
        _shimkit_stray_values(${define} "${items}" "${var}${suffix}" "${prefixes}" found)
        list(APPEND stray ${found})
      endforeach()
    endforeach()
    foreach(dir IN LISTS dirs)
      foreach(prop IN ITEMS COMPILE_DEFINITIONS COMPILE_OPTIONS)
        get_property(items DIRECTORY "${dir}" PROPERTY ${prop})
        _shimkit_stray_values(${define} "${items}" "${prop} of ${dir}" "${prefixes}" found)
        list(APPEND stray ${found})
      endforeach()
    endforeach()
    foreach(target IN LISTS targets)
      if(target IN_LIST own)
        continue()
      endif()
      foreach(prop IN ITEMS COMPILE_DEFINITIONS INTERFACE_COMPILE_DEFINITIONS COMPILE_OPTIONS
                            INTERFACE_COMPILE_OPTIONS)
        get_property(items TARGET "${target}" PROPERTY ${prop})
        _shimkit_stray_values(${define} "${items}" "${prop} of target ${target}" "${prefixes}"
                              found)
        list(APPEND stray ${found})
      endforeach()
    endforeach()
    if(stray)
      list(JOIN stray ", " stray)
      list(JOIN prefixes " or " prefixes)
      list(JOIN sources ", " sources)
      message(FATAL_ERROR
        "shimkit: ${define} is set by hand to ${stray}, but ${sources} says '${prefixes}': "
        "remove the hand-set value; shimkit_shim_library adds the define from the prefix file")
    endif()
  endforeach()
endfunction()

function(_shimkit_register_prefix target_names define prefix source)
  set_property(GLOBAL APPEND PROPERTY SHIMKIT_SHIM_TARGETS ${target_names})
  set_property(GLOBAL APPEND PROPERTY SHIMKIT_PREFIX_DEFINES "${define}")
  set_property(GLOBAL APPEND PROPERTY SHIMKIT_PREFIXES_${define} "${prefix}")
  set_property(GLOBAL APPEND PROPERTY SHIMKIT_PREFIX_SOURCES_${define} "${source}")
  get_property(scheduled GLOBAL PROPERTY SHIMKIT_HAND_SET_CHECK_SCHEDULED)
  if(NOT scheduled)
    set_property(GLOBAL PROPERTY SHIMKIT_HAND_SET_CHECK_SCHEDULED TRUE)
    cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _shimkit_check_hand_set_prefix)
  endif()
endfunction()

# shimkit_shim_library(<name> SOURCES ... [HEADERS ...] [PREFIX_FILE f] [SHARED] ...)
#
# Creates
#   <name>_archive  STATIC library of SOURCES, position-independent, compiled with the
#                   prefix define (private and exported) and the rename header;
#   <name>          INTERFACE target linking the archive whole
#                   ($<LINK_LIBRARY:WHOLE_ARCHIVE,...>): link this, every shim is kept;
#   <name>_shared   with SHARED: the shared library lib<name>.so a runtime loads
#                   RTLD_GLOBAL before any blob (the whole archive, no executable stack).
# PREFIX_FILE: the consumer's shim_symbol_prefix.bzl (or a copy generated with
# `shimkit config --format cmake --output`); default: shimkit's discovery from the
# current source directory (.shimkit.toml, [tool.shimkit], nearest prefix file).
function(shimkit_shim_library name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "SHARED" "PREFIX_FILE"
                        "SOURCES;HEADERS;COMPILE_OPTIONS;INCLUDE_DIRECTORIES;LINK_LIBRARIES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "shimkit_shim_library(${name}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "shimkit_shim_library(${name}): SOURCES is required")
  endif()
  set(prefix_file "")
  if(arg_PREFIX_FILE)
    get_filename_component(prefix_file "${arg_PREFIX_FILE}" ABSOLUTE
                           BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  endif()
  _shimkit_load_prefix("${prefix_file}" "${name}")

  set(archive ${name}_archive)
  add_library(${archive} STATIC ${arg_SOURCES} ${arg_HEADERS})
  set_target_properties(${archive} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  # Private: the shims are defined under their prefixed names. Exported: code that
  # calls them through the rename header calls the prefixed names too.
  target_compile_definitions(${archive} PUBLIC ${SHIMKIT_SHIM_PREFIX_DEFINES})
  target_link_libraries(${archive} PUBLIC shimkit::rename_header ${arg_LINK_LIBRARIES})
  target_compile_options(${archive} PRIVATE ${arg_COMPILE_OPTIONS})
  target_include_directories(${archive} PUBLIC ${arg_INCLUDE_DIRECTORIES})

  add_library(${name} INTERFACE)
  target_link_libraries(${name} INTERFACE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${archive}>")
  set(made ${archive} ${name})
  if(arg_SHARED)
    # A shared library needs a source of its own; every shim comes from the archive.
    set(stub "${CMAKE_CURRENT_BINARY_DIR}/shimkit/${name}_shared.cc")
    file(CONFIGURE OUTPUT "${stub}" CONTENT
         "// generated by shimkit_shim_library(${name} SHARED): the shims come whole from ${archive}\n")
    add_library(${name}_shared SHARED "${stub}")
    set_target_properties(${name}_shared PROPERTIES OUTPUT_NAME ${name})
    target_link_libraries(${name}_shared PRIVATE ${name})
    # Code linking the shared library calls the shims through the rename header too.
    target_compile_definitions(${name}_shared INTERFACE ${SHIMKIT_SHIM_PREFIX_DEFINES})
    target_link_libraries(${name}_shared INTERFACE shimkit::rename_header)
    target_include_directories(${name}_shared INTERFACE ${arg_INCLUDE_DIRECTORIES})
    target_link_options(${name}_shared PRIVATE "-Wl,-z,noexecstack")
    list(APPEND made ${name}_shared)
  endif()
  foreach(target IN LISTS made)
    set_target_properties(${target} PROPERTIES
      SHIMKIT_PREFIX "${SHIMKIT_SHIM_SYMBOL_PREFIX}"
      SHIMKIT_PREFIX_SOURCE "${SHIMKIT_PREFIX_SOURCE}")
  endforeach()
  _shimkit_register_prefix("${made}" "${SHIMKIT_SHIM_SYMBOL_PREFIX_DEFINE}"
                           "${SHIMKIT_SHIM_SYMBOL_PREFIX}" "${SHIMKIT_PREFIX_SOURCE}")
endfunction()

# shimkit_add_lint_test(<target-or-file> [NAME n] [PREFIX_FILE f] [FILES ...]
#                       [PROVIDERS ...] [EXPECT_EXIT n] [ARGS ...])
#
# Registers a ctest running `shimkit lint` on the file <target> builds (or on a file,
# e.g. a .pt2 blob), with FILES linted along and PROVIDERS (targets or files) as
# --provider.
# The prefix file: PREFIX_FILE, else the one <target>'s shim library read, else
# shimkit's discovery from the current source directory. EXPECT_EXIT: the test passes
# only when lint exits with exactly these bits (a must-fail control), e.g. 8 or 16.
function(shimkit_add_lint_test target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "NAME;PREFIX_FILE;EXPECT_EXIT"
                        "FILES;PROVIDERS;ARGS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "shimkit_add_lint_test(${target}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(TARGET ${target})
    set(linted "$<TARGET_FILE:${target}>")
    set(default_name "shimkit_lint_${target}")
  else()
    get_filename_component(linted "${target}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    if(NOT EXISTS "${linted}")
      message(FATAL_ERROR "shimkit_add_lint_test: ${target} is neither a target nor a file")
    endif()
    get_filename_component(default_name "${linted}" NAME)
    set(default_name "shimkit_lint_${default_name}")
  endif()
  if(NOT SHIMKIT_COMMAND)
    message(FATAL_ERROR "shimkit: the `shimkit` command was not found: install shimkit "
                        "(pip install shimkit) or set SHIMKIT_EXECUTABLE")
  endif()
  set(test_name "${arg_NAME}")
  if(NOT test_name)
    set(test_name "${default_name}")
  endif()
  set(prefix_file "${arg_PREFIX_FILE}")
  if(NOT prefix_file AND TARGET ${target})
    get_target_property(prefix_file ${target} SHIMKIT_PREFIX_SOURCE)
  endif()
  set(command ${SHIMKIT_COMMAND})
  if(prefix_file)
    get_filename_component(prefix_file "${prefix_file}" ABSOLUTE
                           BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND command --config "${prefix_file}")
  endif()
  list(APPEND command lint --no-reference --no-color "${linted}")
  foreach(file IN LISTS arg_FILES)
    get_filename_component(file "${file}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND command "${file}")
  endforeach()
  foreach(provider IN LISTS arg_PROVIDERS)
    if(TARGET ${provider})
      list(APPEND command --provider "$<TARGET_FILE:${provider}>")
    else()
      get_filename_component(provider "${provider}" ABSOLUTE
                             BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      list(APPEND command --provider "${provider}")
    endif()
  endforeach()
  list(APPEND command ${arg_ARGS})
  if(NOT "${arg_EXPECT_EXIT}" STREQUAL "")
    set(command "${CMAKE_COMMAND}" "-DSHIMKIT_EXPECT_EXIT=${arg_EXPECT_EXIT}"
                -P "${_SHIMKIT_FUNCTIONS_DIR}/shimkit-expect-exit.cmake" -- ${command})
  endif()
  add_test(NAME "${test_name}" COMMAND ${command}
           WORKING_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}")
endfunction()
