# The max reduction (label "run"): the models of tests/max/ built and run
# with --check, their counted bytes and peak memory compared with
# `primec explain --json` rank by rank (run/compare_counters.py), for the
# reduced dimension whole (max_whole), split over the devices with an
# all-reduce of the maximum (max_split), split over temporal steps with
# the maximum accumulated in place (max_steps), with partial maxima that
# travel between devices and combine as they arrive (max_travel), on a
# 2 x 2 grid over steps (max_grid), and with a stated derivative that
# reads the forward result (max_stated). Their MPI runs are in
# tests/mpi.cmake. `primec explain` must name the collective a max
# all-reduce and the einsum a max=.

find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  return()
endif()

set(PRIMEC_MAX_DIR ${CMAKE_CURRENT_SOURCE_DIR}/max)
foreach(model max_whole max_split max_steps max_travel max_grid max_stated)
  add_test(NAME max/run/${model}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/run/compare_counters.py
                   $<TARGET_FILE:primec> ${PRIMEC_MAX_DIR}/${model}.prime
                   ${CMAKE_CURRENT_BINARY_DIR}/max/${model} max)
  set_tests_properties(max/run/${model} PROPERTIES LABELS run TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "counters equal explain's per_device on every rank")
endforeach()

add_test(NAME max/explain/split
         COMMAND $<TARGET_FILE:primec> explain ${PRIMEC_MAX_DIR}/max_split.prime)
set_tests_properties(max/explain/split PROPERTIES LABELS run TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "phase forward of m: m\\[s\\] max= X\\[s, h\\] - 2.*all-reduce \\(max\\) of m\\(s=0\\) over devices {0, 1, 2, 3}: 8 elements, 192 bytes")
add_test(NAME max/explain/steps
         COMMAND $<TARGET_FILE:primec> explain ${PRIMEC_MAX_DIR}/max_steps.prime)
set_tests_properties(max/explain/steps PROPERTIES LABELS run TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "phase forward of m: m\\[s\\] max= [^\n]*\n  accumulation: 4 accumulators started, 0 accumulator moves, 0 collectives")
add_test(NAME max/explain/travel
         COMMAND $<TARGET_FILE:primec> explain ${PRIMEC_MAX_DIR}/max_travel.prime)
set_tests_properties(max/explain/travel PROPERTIES LABELS run TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "phase forward of m: m\\[s\\] max= [^\n]*\n  accumulation: 4 accumulators started, 12 accumulator moves, 0 collectives")
