# Kernel lowering (label "run"): each case of tests/golden/dump/kernels-*
# (one per lowering rule, its kernel IR checked there as a golden dump) is
# built and run with --check, so that each rule is shown to compute the
# dense result, and its emitted tile kernels call the BLAS exactly where
# the dump has GEMM nodes, and a row of accumulators where the case says
# so (run/kernels_check.sh).
set(PRIMEC_KERNELS_SH ${CMAKE_CURRENT_SOURCE_DIR}/run/kernels_check.sh)
foreach(case matmul:gemm transposed:gemm heads:gemm bias:gemm elementwise:loop reduction:loop
             copy:loop lanes:loop rows:rows)
  string(REPLACE ":" ";" parts ${case})
  list(GET parts 0 name)
  list(GET parts 1 want)
  add_test(NAME kernels/${name}
           COMMAND sh ${PRIMEC_KERNELS_SH} $<TARGET_FILE:primec>
                   ${CMAKE_CURRENT_SOURCE_DIR}/golden/dump/kernels-${name}.prime
                   ${CMAKE_CURRENT_BINARY_DIR}/kernels/${name} ${want})
  set_tests_properties(kernels/${name} PROPERTIES LABELS run TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "check passed.*kernels: PASS"
                       FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()
