# Built programs that must not hang, and their command lines (the MPI
# ones are in tests/mpi.cmake):
#
#   hang/threads-stall   a thread-device that stops answering
#                        (PRIME_FAULT=stall:1:3) ends the run with exit 4
#                        and messages within the deadline
#                        (tests/run/hang_threads.sh)
#   hang/blas-ulimit     under `ulimit -v 300000` the program refuses to
#                        start its GEMMs (OpenBLAS would retry its buffer
#                        for ever): exit 3 and a message, within 10 s
#                        (tests/run/hang_blas_ulimit.sh; skipped with
#                        sanitizers)
#   cli/program          numeric options, output paths checked before the
#                        run, write errors (tests/run/program_cli.sh)
#   tsan/runtime         the runtime's unit tests under ThreadSanitizer
#                        (tests/unit/tsan_runtime.sh)

set(PRIMEC_HANG_DIR ${CMAKE_CURRENT_BINARY_DIR}/hang)

add_test(NAME hang/threads-stall
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/hang_threads.sh $<TARGET_FILE:primec>
                 ${CMAKE_SOURCE_DIR}/examples/matmul_square.prime ${PRIMEC_HANG_DIR}/threads-stall)
set_tests_properties(hang/threads-stall PROPERTIES LABELS run TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "PASS: " FAIL_REGULAR_EXPRESSION "FAIL:")

if(PRIMEC_SANITIZE)
  set(PRIMEC_HANG_SANITIZED 1)
else()
  set(PRIMEC_HANG_SANITIZED 0)
endif()
add_test(NAME hang/blas-ulimit
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/hang_blas_ulimit.sh $<TARGET_FILE:primec>
                 ${CMAKE_SOURCE_DIR}/examples/matmul_square.prime ${PRIMEC_HANG_DIR}/blas-ulimit
                 ${PRIMEC_HANG_SANITIZED})
set_tests_properties(hang/blas-ulimit PROPERTIES LABELS run TIMEOUT 60 SKIP_RETURN_CODE 77
                     PASS_REGULAR_EXPRESSION "PASS: " FAIL_REGULAR_EXPRESSION "FAIL:")

add_test(NAME cli/program
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/program_cli.sh $<TARGET_FILE:primec>
                 ${CMAKE_SOURCE_DIR}/examples/matmul_square.prime ${PRIMEC_HANG_DIR}/cli)
set_tests_properties(cli/program PROPERTIES LABELS run TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "PASS: " FAIL_REGULAR_EXPRESSION "FAIL:")

# The threads runtime's unit tests under ThreadSanitizer, in a build of
# their own (tests/unit/tsan_runtime.sh); skipped, with the reason, where
# the compiler or the machine cannot run TSan programs.
add_test(NAME tsan/runtime
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/unit/tsan_runtime.sh ${CMAKE_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/tsan ${CMAKE_C_COMPILER})
set_tests_properties(tsan/runtime PROPERTIES LABELS "unit;tsan" TIMEOUT 300 SKIP_RETURN_CODE 77
                     FAIL_REGULAR_EXPRESSION "FAIL:")
