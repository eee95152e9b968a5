# The time report of built programs (docs/timing.md), label "run":
#
#   timing/matmul-square        shifts only (examples/matmul_square.prime)
#   timing/opt-small-megatron   all-reduces (examples/opt_layer.prime)
#   timing/calibrate-progress   the progress line of `primec calibrate`
#   timing/blas-core            the BLAS kernels a program chooses
#
# Each builds the model, runs it with --repeat, --json and --trace, and
# checks the report by structure (tests/run/timing_report.py): step_time
# and the per-phase fields consistent with one another and with the FLOPs
# of `primec cost`, one trace span per counted transfer and collective on
# each device's communication row, no progress line in a file, and the
# progress line on a terminal.

find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "python3 not found: the timing tests are not registered")
  return()
endif()

set(PRIMEC_TIMING_DIR ${CMAKE_CURRENT_BINARY_DIR}/timing)

function(primec_timing_test name file model)
  add_test(NAME timing/${name}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/run/timing_report.py
                   $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/examples/${file} ${model}
                   ${PRIMEC_TIMING_DIR}/${name})
  set_tests_properties(timing/${name} PROPERTIES LABELS run TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL:")
endfunction()

primec_timing_test(matmul-square matmul_square.prime matmul_square)
primec_timing_test(opt-small-megatron opt_layer.prime opt_small_megatron)

# The progress line of `primec calibrate`: on a terminal only
# (tests/run/progress_tty.py; the built programs' one is checked above).
add_test(NAME timing/calibrate-progress
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/run/progress_tty.py
                 "calibrate on 2 devices: " ${PRIMEC_TIMING_DIR}/calibrate
                 $<TARGET_FILE:primec> calibrate --quick --worlds 2
                 -o ${PRIMEC_TIMING_DIR}/calibrate/profile.txt)
set_tests_properties(timing/calibrate-progress PROPERTIES LABELS run TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL:")

# The BLAS kernels a program runs: the newest its processor supports unless
# OPENBLAS_CORETYPE says otherwise (tests/run/blas_core.py).
add_test(NAME timing/blas-core
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/run/blas_core.py
                 $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/examples/matmul_square.prime
                 matmul_square ${PRIMEC_TIMING_DIR}/blas-core)
set_tests_properties(timing/blas-core PROPERTIES LABELS run TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL:")
