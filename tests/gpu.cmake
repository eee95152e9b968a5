# tests/gpu/run.sh, the CUDA backend's check on a GPU machine (docs/gpu.md),
# cannot run here; what needs no GPU is tested:
# - the script parses (bash -n) and its --plan finds every run it would
#   check and time, against this build's primec (which must have the CUDA
#   runtime);
# - its cuBLAS benchmark compiles with nvcc, warnings as errors.
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
