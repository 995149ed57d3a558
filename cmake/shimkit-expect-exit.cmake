# cmake -DSHIMKIT_EXPECT_EXIT=<n> -P shimkit-expect-exit.cmake -- <command> [<arg>...]
#
# Runs the command and succeeds only when it exits with exactly <n>: the ctest form
# of a must-fail control (shimkit_add_lint_test(... EXPECT_EXIT n)).
set(command "")
set(after_separator FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_separator)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(after_separator TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "usage: cmake -DSHIMKIT_EXPECT_EXIT=<n> -P ${CMAKE_CURRENT_LIST_FILE} -- <command>")
endif()
execute_process(COMMAND ${command} RESULT_VARIABLE rc)
if(NOT "${rc}" STREQUAL "${SHIMKIT_EXPECT_EXIT}")
  message(FATAL_ERROR "shimkit: exited ${rc}, expected ${SHIMKIT_EXPECT_EXIT}")
endif()
message(STATUS "shimkit: PASS (exit ${rc} as expected: this target must fail lint)")
