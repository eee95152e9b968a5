# tests/gpu/run.sh, the CUDA backend's check on a GPU machine (docs/gpu.md),
# cannot run here; what needs no GPU is tested:
# - the script parses (bash -n) and its --plan finds every run it would
#   check and time, against this build's primec (which must have the CUDA
#   runtime);
# - its cuBLAS benchmark compiles with nvcc, warnings as errors;
# - one GPU run, skipped without a GPU.
set(PRIMEC_GPU_DIR ${CMAKE_CURRENT_SOURCE_DIR}/gpu)
add_test(NAME gpu/run-sh/syntax COMMAND bash -n ${PRIMEC_GPU_DIR}/run.sh)
set_tests_properties(gpu/run-sh/syntax PROPERTIES LABELS gpu TIMEOUT 30)
if(NOT TARGET prime_rt_cuda)
  return()
endif()
add_test(NAME gpu/run-sh/plan
         COMMAND bash ${PRIMEC_GPU_DIR}/run.sh --build-dir ${CMAKE_BINARY_DIR} --no-configure --plan)
set_tests_properties(gpu/run-sh/plan PROPERTIES LABELS gpu TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "run.sh: plan PASS" FAIL_REGULAR_EXPRESSION "FAIL")
add_test(NAME gpu/gemm-bench-compiles
         COMMAND ${PRIMEC_NVCC} -O2 -Werror all-warnings -gencode arch=compute_80,code=sm_80
                 -gencode arch=compute_90,code=sm_90 ${PRIMEC_GPU_DIR}/gemm_bench.cu -lcublas
                 -o ${CMAKE_CURRENT_BINARY_DIR}/gemm_bench)
set_tests_properties(gpu/gemm-bench-compiles PROPERTIES LABELS compile TIMEOUT 300)
# The square matmul on one GPU (--local --check): on a machine without a
# GPU the program says "no CUDA device" and the test is reported skipped,
# never passed.
add_test(NAME gpu/local-check/square-2x2
         COMMAND sh -c "\"$1\" build \"$2\" --target cuda --cc \"$3\" -o \"$4\" >/dev/null && \"$4/m\" --local --check"
                 sh $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/tests/golden/emit/square-2x2.prime
                 ${PRIMEC_NVCC} ${CMAKE_CURRENT_BINARY_DIR}/gpu-square)
set_tests_properties(gpu/local-check/square-2x2 PROPERTIES LABELS gpu TIMEOUT 300
                     SKIP_REGULAR_EXPRESSION "no CUDA device"
                     PASS_REGULAR_EXPRESSION "check passed")
