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

# New tiles are not filled where their first writer overwrites them
# (run/tile_fill.py, docs/kernels.md): a square matmul, whose tiles
# accumulate in place over the steps, emits each kernel's overwriting form
# with a beta-0 GEMM, and --check passes with every unfilled tile holding
# NaNs (PRIME_TILE_FILL=nan), counting no fill, and with every tile filled
# at its allocation (eager).
add_test(NAME kernels/tile-fill
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/run/tile_fill.py $<TARGET_FILE:primec>
                 ${CMAKE_SOURCE_DIR}/examples/matmul_square.prime matmul_square
                 ${CMAKE_CURRENT_BINARY_DIR}/kernels/tile-fill)
set_tests_properties(kernels/tile-fill PROPERTIES LABELS run TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL")

# Kernels fused across instances (run/fuse_check.sh, docs/kernels.md): the
# causal softmax chain of tests/golden/dump/kernels-fuse.prime (its groups
# checked there as a golden dump) and the small OPT layer on the Megatron
# plan, each built as it is and with --no-fuse and run with --check under
# PRIME_TILE_FILL=nan: both pass with counters equal to the prediction,
# with the same errors, a fused kernel per group, the ADDs folded into
# them gone from the actions, and a peak no larger; the fused backward of
# the exp reads the forward's E (no exp in it). And the three projections
# of tests/golden/dump/kernels-accum.prime, whose later backward GEMMs
# accumulate into the first one's tile (kernel_accum.c): no tiles of their
# own, fewer ADD actions, the same checks. And the layer norm of
# tests/golden/dump/kernels-norm.prime, whose backward is one group with
# column sums and contributions added to the residual's gradient tile. And
# the residual and bias backwards of tests/golden/dump/kernels-copyprop.prime,
# whose copies of the loss gradient are gone (kernel_copy.c): no tiles of
# their own, the same checks. And the two residual blocks of
# tests/golden/dump/kernels-copy-takeover.prime, whose copy into the inner
# residual's gradient takes the loss gradient's tile over (no tile dhh).
# And the small OPT layer on the square plan,
# whose copies go where their readers send the tile around the ring (the
# SEND reads the source tile instead). And the bias, residual add and
# layer norm of tests/golden/dump/kernels-norm-long.prime, on rows of
# 5000 elements (past the 4096 a CUDA thread keeps), whose fused peak
# may be one tile of h floats (20,000 bytes) above the unfused one: the
# norm's backward group allocates its stored outputs (dr, dg, db) at its
# first phase, while the frees of n1 and dl1 stay in the later members'
# phases, after the group ran (the same at h = 4096, before rows past
# 4096 were fused). And the small OPT layer on the Megatron plan at
# hidden 8192 (one layer of 4 tokens, 4 heads of 32, ffn 256): its norm
# chains, biases and residual adds fused on rows of 8192.
foreach(case "softmax;${CMAKE_CURRENT_SOURCE_DIR}/golden/dump/kernels-fuse.prime;m"
             "norm-long;${CMAKE_CURRENT_SOURCE_DIR}/golden/dump/kernels-norm-long.prime;m;20000;;5000"
             "opt-long;${CMAKE_SOURCE_DIR}/examples/opt_layer.prime;opt_small_megatron;0;layers=1,s=4,h=8192,a=4,e=32,f=256;8192"
             "accum;${CMAKE_CURRENT_SOURCE_DIR}/golden/dump/kernels-accum.prime;m"
             "norm;${CMAKE_CURRENT_SOURCE_DIR}/golden/dump/kernels-norm.prime;m"
             "copyprop;${CMAKE_CURRENT_SOURCE_DIR}/golden/dump/kernels-copyprop.prime;m"
             "copy-takeover;${CMAKE_CURRENT_SOURCE_DIR}/golden/dump/kernels-copy-takeover.prime;m"
             "opt;${CMAKE_SOURCE_DIR}/examples/opt_layer.prime;opt_small_megatron"
             "opt-square;${CMAKE_SOURCE_DIR}/examples/opt_layer.prime;opt_small_square")
  list(GET case 0 name)
  list(GET case 1 file)
  list(GET case 2 model)
  set(slack 0)
  set(params "")
  set(inner 0)
  list(LENGTH case n)
  if(n GREATER 3)
    list(GET case 3 slack)
    list(GET case 4 params)
    list(GET case 5 inner)
  endif()
  add_test(NAME kernels/fuse-${name}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/fuse_check.sh $<TARGET_FILE:primec> ${file}
                   ${CMAKE_CURRENT_BINARY_DIR}/kernels/fuse-${name} ${model} ${slack} "${params}"
                   ${inner})
  set_tests_properties(kernels/fuse-${name} PROPERTIES LABELS run TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "fuse: PASS" FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()

# The kernels pass fuses rows of any length: the groups of
# tests/golden/dump/kernels-norm-long.prime at h = 4096, 5000 and 8192 are
# the same, and at h = 200000 the column sums past half of KFUSE_ROW_BYTES
# are kernels of their own and the rows past it are stored
# (unit/test_kernel_fuse_rows.c).
add_executable(test_kernel_fuse_rows ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_kernel_fuse_rows.c)
target_link_libraries(test_kernel_fuse_rows PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_kernel_fuse_rows PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME kernels/fuse-rows
         COMMAND test_kernel_fuse_rows ${CMAKE_CURRENT_SOURCE_DIR}/golden/dump/kernels-norm-long.prime)
set_tests_properties(kernels/fuse-rows PROPERTIES LABELS unit TIMEOUT 60)

# The phases' names tell GEMM kernels from loop kernels (run/phase_names.py,
# docs/kernels.md "The GEMM share, counted"): on both plans of the small OPT
# layer every backward and gradient phase is named after the tensor it
# writes, so an instance's weight gradient (a GEMM) and bias gradient (a
# loop) are two names, none of which stands for both kinds; the program's
# trace names every kernel after its phase and gives its processor time.
foreach(model opt_small_megatron opt_small_square)
  add_test(NAME kernels/phase-names/${model}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/run/phase_names.py $<TARGET_FILE:primec>
                   ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime ${model}
                   ${CMAKE_CURRENT_BINARY_DIR}/kernels/phase-names/${model})
  set_tests_properties(kernels/phase-names/${model} PROPERTIES LABELS run TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "phase names: PASS" FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()
