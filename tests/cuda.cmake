# The CUDA printing of the kernel IR (--target cuda, docs/cuda.md):
# - golden .cu files (tests/cuda/golden/): the square matmul (fp32 and
#   --dtype bf16), one small OPT layer and the fused kernels of rows longer
#   than a thread keeps (a block per row); `cmake --build BUILD --target update-golden-cuda` rewrites
#   them for review with `git diff`;
# - for every example file, the C and the CUDA tile kernels come from the
#   same kernel IR node by node (tests/cuda/nodes_check.sh);
# - --emit-only needs no nvcc, and a build naming a missing nvcc fails
#   with exit 2 naming it;
# - the CUDA table of device operations (runtime/prime_cuda.c) on the host
#   emulation of its CUDA calls (prime_rt_cuda_host): every small run of
#   every example --local --check, counters equal to the prediction, the
#   fused kernels run as one call each, and the CUDA program's refusals
#   (tests/cuda/host_check.sh);
# - --dtype bf16 and f16 on the host emulation: --check passes against the
#   dense program with the same narrow GEMMs, and fails where the device's
#   rounding is not the program's (tests/cuda/dtype_check.sh);
# - the NCCL world on the host emulation of NCCL: worlds of 4 processes
#   (tests/cuda/nccl_host_check.sh);
# - with nvcc (the CUDA toolkit in /usr/local/cuda, or on PATH): every
#   example's .cu compiles for sm_80 and sm_90 with warnings as errors (one
#   nvcc call per example file) and every run links with its C part,
#   prime_rt_cuda, cuBLAS and the CUDA runtime and starts (without a GPU:
#   "no CUDA device", exit 2); `primec build --target cuda` writes the
#   executable; with --dtype bf16 and f16, the small OPT layer compiles,
#   links and starts (tests/cuda/dtype_nvcc.sh). No GPU is needed: the
#   kernels' arithmetic is not run here.

set(PRIMEC_CUDA_DIR ${CMAKE_CURRENT_SOURCE_DIR}/cuda)
set(PRIMEC_CUDA_WORK ${CMAKE_CURRENT_BINARY_DIR}/cuda)
file(MAKE_DIRECTORY ${PRIMEC_CUDA_WORK})

# name:source (relative to the repository root):model:dtype (--dtype).
set(PRIMEC_CUDA_GOLDEN square-2x2:tests/golden/emit/square-2x2.prime:m:f32
    opt_small_megatron:examples/opt_layer.prime:opt_small_megatron:f32
    square-2x2-bf16:tests/golden/emit/square-2x2.prime:m:bf16
    fuse-long-rows:tests/golden/dump/kernels-norm-long.prime:m:f32)
set(PRIMEC_CUDA_UPDATE "")
foreach(entry ${PRIMEC_CUDA_GOLDEN})
  string(REPLACE ":" ";" case ${entry})
  list(GET case 0 name)
  list(GET case 1 file)
  list(GET case 2 model)
  list(GET case 3 dtype)
  set(args $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR} ${PRIMEC_CUDA_WORK}/golden-${name} ${file}
           ${model} ${PRIMEC_CUDA_DIR}/golden/${name}.cu ${dtype})
  add_test(NAME cuda/golden/${name} COMMAND sh ${PRIMEC_CUDA_DIR}/golden.sh check ${args})
  set_tests_properties(cuda/golden/${name} PROPERTIES LABELS golden TIMEOUT 60)
  list(APPEND PRIMEC_CUDA_UPDATE COMMAND sh ${PRIMEC_CUDA_DIR}/golden.sh update ${args})
endforeach()
add_custom_target(update-golden-cuda ${PRIMEC_CUDA_UPDATE} DEPENDS primec
                  COMMENT "rewriting tests/cuda/golden (review them with git diff)" VERBATIM)

file(GLOB PRIMEC_CUDA_EXAMPLES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/examples/*.prime)
list(SORT PRIMEC_CUDA_EXAMPLES)
foreach(path ${PRIMEC_CUDA_EXAMPLES})
  get_filename_component(name ${path} NAME_WE)
  add_test(NAME cuda/nodes/${name}
           COMMAND sh ${PRIMEC_CUDA_DIR}/nodes_check.sh $<TARGET_FILE:primec>
                   ${PRIMEC_CUDA_WORK}/nodes-${name} ${path})
  set_tests_properties(cuda/nodes/${name} PROPERTIES LABELS golden TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "nodes: PASS" FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()

# The same for the fused kernels of rows longer than a thread keeps.
add_test(NAME cuda/nodes/kernels-norm-long
         COMMAND sh ${PRIMEC_CUDA_DIR}/nodes_check.sh $<TARGET_FILE:primec>
                 ${PRIMEC_CUDA_WORK}/nodes-kernels-norm-long
                 ${CMAKE_SOURCE_DIR}/tests/golden/dump/kernels-norm-long.prime)
set_tests_properties(cuda/nodes/kernels-norm-long PROPERTIES LABELS golden TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "nodes: PASS" FAIL_REGULAR_EXPRESSION "FAIL")

# --emit-only runs no nvcc: an nvcc that does not exist is never asked for.
add_test(NAME cuda/emit-only-no-nvcc
         COMMAND $<TARGET_FILE:primec> build ${CMAKE_SOURCE_DIR}/tests/golden/emit/square-2x2.prime
                 --target cuda --emit-only --cc /nonexistent/nvcc -o ${PRIMEC_CUDA_WORK}/emit-only)
set_tests_properties(cuda/emit-only-no-nvcc PROPERTIES LABELS golden TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "emit-only/m\\.cu")

# The link flags of the emitted programs (compiler/CMakeLists.txt's).
string(REPLACE ";" " " PRIMEC_CUDA_TEST_BLAS "${OPENBLAS_LINK_LIBRARIES};${JANSSON_LINK_LIBRARIES}")
set(PRIMEC_CUDA_TEST_CFLAGS "")
if(PRIMEC_SANITIZE)
  set(PRIMEC_CUDA_TEST_CFLAGS "-fsanitize=address,undefined -fno-omit-frame-pointer")
endif()
foreach(path ${PRIMEC_CUDA_EXAMPLES})
  get_filename_component(name ${path} NAME_WE)
  add_test(NAME cuda/host/${name}
           COMMAND sh ${PRIMEC_CUDA_DIR}/host_check.sh $<TARGET_FILE:primec> ${CMAKE_C_COMPILER}
                   "${PRIMEC_CUDA_TEST_CFLAGS}" ${CMAKE_SOURCE_DIR}/runtime
                   $<TARGET_FILE:prime_rt_cuda_host> "${PRIMEC_CUDA_TEST_BLAS} -lpthread -lm"
                   ${PRIMEC_CUDA_WORK}/host-${name} ${path})
  set_tests_properties(cuda/host/${name} PROPERTIES LABELS run TIMEOUT 600
                       PASS_REGULAR_EXPRESSION "host: PASS" FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()

# --dtype bf16 and f16 on the host emulation, whose GEMMs round their
# operands as the .cu's cublasGemmEx calls do: the square 2x2 matmul and
# the small OPT layer (Megatron-LM, 4 devices) pass --check against the
# dense program with the same GEMMs, their errors are past the f32
# build's bounds and ordered bf16 > f16 > f32, and device GEMMs rounded
# to another type fail (tests/cuda/dtype_check.sh).
add_test(NAME cuda/dtype-host
         COMMAND sh ${PRIMEC_CUDA_DIR}/dtype_check.sh $<TARGET_FILE:primec> ${CMAKE_C_COMPILER}
                 "${PRIMEC_CUDA_TEST_CFLAGS}" ${CMAKE_SOURCE_DIR}/runtime
                 $<TARGET_FILE:prime_rt_cuda_host> "${PRIMEC_CUDA_TEST_BLAS} -lpthread -lm"
                 ${PRIMEC_CUDA_WORK}/dtype-host ${CMAKE_SOURCE_DIR})
set_tests_properties(cuda/dtype-host PROPERTIES LABELS run TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "dtype host: PASS" FAIL_REGULAR_EXPRESSION "FAIL")

# The one-process-per-GPU world on the host emulation (its NCCL:
# communicators of processes over Unix sockets): worlds of one process
# passing --check, the world's refusals, worlds of 4 processes (the square
# 2x2 matmul, the small OPT layer on the square grid and with Megatron-LM)
# passing --check, a rank that exits and one that stalls, rendezvous
# deadlines (tests/cuda/nccl_host_check.sh).
add_test(NAME cuda/nccl-host
         COMMAND sh ${PRIMEC_CUDA_DIR}/nccl_host_check.sh $<TARGET_FILE:primec> ${CMAKE_C_COMPILER}
                 "${PRIMEC_CUDA_TEST_CFLAGS}" ${CMAKE_SOURCE_DIR}/runtime
                 $<TARGET_FILE:prime_rt_cuda_host> "${PRIMEC_CUDA_TEST_BLAS} -lpthread -lm"
                 ${PRIMEC_CUDA_WORK}/nccl-host ${CMAKE_SOURCE_DIR})
set_tests_properties(cuda/nccl-host PROPERTIES LABELS run TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "nccl host: PASS" FAIL_REGULAR_EXPRESSION "FAIL")

find_program(PRIMEC_NVCC nvcc HINTS /usr/local/cuda/bin)
if(NOT PRIMEC_NVCC)
  message(STATUS "nvcc not found (PATH, /usr/local/cuda/bin): the cuda/nvcc tests are skipped")
  return()
endif()
# One nvcc call per layer file; the small matmul_* examples share one
# (nvcc's fixed cost, some 8 s, is most of theirs).
set(PRIMEC_CUDA_MATMULS "")
set(PRIMEC_CUDA_NVCC_GROUPS "")
foreach(path ${PRIMEC_CUDA_EXAMPLES})
  get_filename_component(name ${path} NAME_WE)
  if(name MATCHES "^matmul_")
    list(APPEND PRIMEC_CUDA_MATMULS ${path})
  else()
    list(APPEND PRIMEC_CUDA_NVCC_GROUPS ${name})
    set(PRIMEC_CUDA_NVCC_${name} ${path})
  endif()
endforeach()
if(PRIMEC_CUDA_MATMULS)
  list(APPEND PRIMEC_CUDA_NVCC_GROUPS matmul)
  set(PRIMEC_CUDA_NVCC_matmul ${PRIMEC_CUDA_MATMULS})
endif()
# Runs linked and started (a layer file's small runs of each kind; in a
# sanitizer build with the sanitizers,
# as prime_rt_cuda's C part is built; its CUDA part is not instrumented).
set(PRIMEC_CUDA_LINK "")
if(TARGET prime_rt_cuda)
  # CFLAGS never empty: an empty list element would vanish.
  set(PRIMEC_CUDA_LINK --link ${CMAKE_C_COMPILER} "-O1 ${PRIMEC_CUDA_TEST_CFLAGS}" $<TARGET_FILE:prime_rt_cuda>
      "${PRIMEC_CUDA_TEST_BLAS} ${PRIMEC_CUDA_NCCL_LINK}-L${PRIMEC_CUDA_LIBDIR} -Wl,-rpath,${PRIMEC_CUDA_LIBDIR} -lcublas -lcudart -lstdc++ -lpthread -lm")
endif()
foreach(name ${PRIMEC_CUDA_NVCC_GROUPS})
  add_test(NAME cuda/nvcc/${name}
           COMMAND sh ${PRIMEC_CUDA_DIR}/nvcc_check.sh $<TARGET_FILE:primec> ${PRIMEC_NVCC}
                   ${CMAKE_SOURCE_DIR}/runtime ${PRIMEC_CUDA_WORK}/nvcc-${name} ${PRIMEC_CUDA_LINK}
                   ${PRIMEC_CUDA_NVCC_${name}})
  set_tests_properties(cuda/nvcc/${name} PROPERTIES LABELS compile TIMEOUT 600
                       PASS_REGULAR_EXPRESSION "nvcc: PASS" FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()
# The fused kernels of rows of 5000 elements (a block per row, block
# reductions: tests/golden/dump/kernels-norm-long.prime, copied to a name
# nvcc_check.sh can make a namespace of) compile the same way.
add_test(NAME cuda/nvcc/fuse-long-rows
         COMMAND sh -c "mkdir -p \"$4\" && cp \"$5\" \"$4/kernels_norm_long.prime\" && sh \"$6\" \"$1\" \"$2\" \"$3\" \"$4/nvcc\" \"$4/kernels_norm_long.prime\""
                 sh $<TARGET_FILE:primec> ${PRIMEC_NVCC} ${CMAKE_SOURCE_DIR}/runtime
                 ${PRIMEC_CUDA_WORK}/nvcc-fuse-long-rows
                 ${CMAKE_SOURCE_DIR}/tests/golden/dump/kernels-norm-long.prime
                 ${PRIMEC_CUDA_DIR}/nvcc_check.sh)
set_tests_properties(cuda/nvcc/fuse-long-rows PROPERTIES LABELS compile TIMEOUT 600
                     PASS_REGULAR_EXPRESSION "nvcc: PASS" FAIL_REGULAR_EXPRESSION "FAIL")
# --dtype bf16 and f16: the small OPT layer with Megatron-LM and data
# parallelism (plain, strided-batched and looped strided-batched GEMMs)
# compiles for sm_80 and sm_90 with warnings as errors in one nvcc call,
# every GEMM a cublasGemmEx or cublasGemmStridedBatchedEx on narrow
# operands, and each C part links and starts (tests/cuda/dtype_nvcc.sh).
add_test(NAME cuda/nvcc-dtype
         COMMAND sh ${PRIMEC_CUDA_DIR}/dtype_nvcc.sh $<TARGET_FILE:primec> ${PRIMEC_NVCC}
                 ${CMAKE_SOURCE_DIR}/runtime ${PRIMEC_CUDA_WORK}/nvcc-dtype
                 ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime opt_small_megatron_dp ${PRIMEC_CUDA_LINK})
set_tests_properties(cuda/nvcc-dtype PROPERTIES LABELS compile TIMEOUT 600
                     PASS_REGULAR_EXPRESSION "nvcc dtype: PASS" FAIL_REGULAR_EXPRESSION "FAIL")
if(NOT TARGET prime_rt_cuda)
  return()
endif()
# The build itself: DIR/m.cu, its object DIR/m.o, DIR/m.c and the
# executable DIR/m, which starts (without a GPU: "no CUDA device", exit 2),
# with --local and, where the runtime has NCCL, as rank 1 of a world of 4
# (without a GPU it stops before its rendezvous; with one, rank 0 is not
# there and the connection is refused for 1 s: exit 4).
if(PRIMEC_NCCL)
  set(PRIMEC_CUDA_RANK0 "\"$4/m\" --rank 1 --world-size 4 --master 127.0.0.1:1 --timeout 1 --check; echo \"exit $?\";")
  set(PRIMEC_CUDA_RANK0_EXPECT ".*(no CUDA device: .*exit 2|connection refused after 1 s.*exit 4)")
else()
  set(PRIMEC_CUDA_RANK0 "")
  set(PRIMEC_CUDA_RANK0_EXPECT "")
endif()
add_test(NAME cuda/build-exe
         COMMAND sh -c "\"$1\" build \"$2\" --target cuda --cc \"$3\" -o \"$4\" && test -s \"$4/m.o\" && test -x \"$4/m\" && { \"$4/m\" --local --check; echo \"exit $?\"; ${PRIMEC_CUDA_RANK0} }"
                 sh $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/tests/golden/emit/square-2x2.prime
                 ${PRIMEC_NVCC} ${PRIMEC_CUDA_WORK}/build-exe)
set_tests_properties(cuda/build-exe PROPERTIES LABELS compile TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "((no CUDA device: .*exit 2)|(check passed.*exit 0))${PRIMEC_CUDA_RANK0_EXPECT}")
