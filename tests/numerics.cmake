# The check at realistic shapes (label "run"): --check compares with a
# dense fp64 reference and passes a tensor when its error is within
# 4x the dense fp32 program's own error (runtime/prime_program.h).
#
# - The OPT layer at hidden 256 (a = 4 heads of 64, ffn 1024, 64 tokens),
#   Megatron and square-grid plans, with weights scaled by fan-in
#   (--init fan-in, the default): passes.
# - The OPT layer at 512 tokens, hidden 512, ffn 2048 (the benchmark's
#   shape), both plans: passes on cpu and mpi.
# - Hidden 512 with 16 tokens under --init uniform, whose scores overflow
#   an unshifted exp: passes (see below), and fails with the unshifted
#   exp.
# - A bad --init value is a usage error (exit 2).
set(PRIMEC_NUMERICS_DIR ${CMAKE_CURRENT_BINARY_DIR}/numerics)
file(MAKE_DIRECTORY ${PRIMEC_NUMERICS_DIR})
set(PRIMEC_OPT_SRC ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime)
set(PRIMEC_OPT_SMALL "param layers = 2, s = 16, h = 64, a = 8, e = 8, f = 256")

# numerics/NAME/MODEL: the OPT layer with its small parameters replaced by
# PARAMS, built and checked on the cpu target.
function(primec_opt_check name params)
  foreach(model opt_small_megatron opt_small_square)
    set(dir ${PRIMEC_NUMERICS_DIR}/${name}_${model})
    add_test(NAME numerics/${name}/${model}
             COMMAND sh -c "mkdir -p \"$4\" && sed 's/${PRIMEC_OPT_SMALL}/${params}/' \"$2\" >\"$4/model.prime\" && \"$1\" build \"$4/model.prime\" --model \"$3\" -o \"$4\" && \"$4/$3\" --check"
                     sh $<TARGET_FILE:primec> ${PRIMEC_OPT_SRC} ${model} ${dir})
    set_tests_properties(numerics/${name}/${model} PROPERTIES LABELS run TIMEOUT 600
                         PASS_REGULAR_EXPRESSION "counters equal the compiler's prediction.*check passed"
                         FAIL_REGULAR_EXPRESSION "FAIL|DIFFER|MISSING")
  endforeach()
endfunction()

primec_opt_check(h256 "param layers = 1, s = 64, h = 256, a = 4, e = 64, f = 1024")
# At hidden 256 every tile allocated unfilled holds NaNs until its first
# writer (PRIME_TILE_FILL=nan, the default of Debug builds only), so these
# also show that no tile is read before it is written.
foreach(model opt_small_megatron opt_small_square)
  set_tests_properties(numerics/h256/${model} PROPERTIES ENVIRONMENT "PRIME_TILE_FILL=nan")
endforeach()

# The OPT layer at the shape bench/step_xla.py times against XLA (512
# tokens, hidden 512, 8 heads of 64, ffn 2048; one layer), both plans:
# passes on the cpu target and as 4 MPI processes (mpi/numerics/h512/MODEL).
set(PRIMEC_H512_BENCH "param layers = 1, s = 512, h = 512, a = 8, e = 64, f = 2048")
primec_opt_check(h512 "${PRIMEC_H512_BENCH}")

# The same as 4 MPI processes (where tests/mpi.cmake found MPI: its
# launcher flags and environment).
if(TARGET prime_rt_mpi AND MPIEXEC_EXECUTABLE)
  foreach(model opt_small_megatron opt_small_square)
    set(dir ${PRIMEC_NUMERICS_DIR}/mpi_h512_${model})
    add_test(NAME mpi/numerics/h512/${model}
             COMMAND sh -c "mkdir -p \"$4\" && sed 's/${PRIMEC_OPT_SMALL}/${PRIMEC_H512_BENCH}/' \"$2\" >\"$4/model.prime\" && p=$1 m=$3 d=$4 && shift 4 && sh \"$0\" mpi \"$p\" \"$d/model.prime\" \"$m\" \"$d/run\" \"$@\""
                     ${CMAKE_CURRENT_SOURCE_DIR}/run/model_run.sh $<TARGET_FILE:primec> ${PRIMEC_OPT_SRC}
                     ${model} ${dir} ${MPIEXEC_EXECUTABLE} ${PRIMEC_MPIEXEC_FLAGS})
    set_tests_properties(mpi/numerics/h512/${model} PROPERTIES LABELS "mpi;run" TIMEOUT 600
                         ENVIRONMENT "${PRIMEC_MPI_TEST_ENV}"
                         PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL:")
  endforeach()
endif()

# Hidden 512 with 16 tokens under --init uniform: the attention scores
# reach hundreds, past where exp overflows fp32 (88) and where the old
# smooth bound 4 log sum exp(S / 4) did (355). The softmax subtracts the
# row maximum (a max= reduction; under the square plan it accumulates over
# ring_skew's steps), so both plans pass under both --init modes with
# finite errors. The same layer with the unshifted exp (causal_exp) still
# overflows in the reference itself, which must fail (exit 1, FAIL), never
# pass on infinite bounds.
set(PRIMEC_H512 "param layers = 1, s = 16, h = 512, a = 8, e = 64, f = 512")
foreach(model opt_small_megatron opt_small_square)
  set(dir ${PRIMEC_NUMERICS_DIR}/h512_${model})
  add_test(NAME numerics/h512-uniform/${model}
           COMMAND sh -c "mkdir -p \"$4\" && sed 's/${PRIMEC_OPT_SMALL}/${PRIMEC_H512}/' \"$2\" >\"$4/model.prime\" && \"$1\" build \"$4/model.prime\" --model \"$3\" -o \"$4\" && \"$4/$3\" --check --init fan-in && \"$4/$3\" --check --init uniform"
                   sh $<TARGET_FILE:primec> ${PRIMEC_OPT_SRC} ${model} ${dir})
  set_tests_properties(numerics/h512-uniform/${model} PROPERTIES LABELS run TIMEOUT 600
                       PASS_REGULAR_EXPRESSION "check passed.*counters equal the compiler's prediction.*check passed"
                       FAIL_REGULAR_EXPRESSION "FAIL|DIFFER|MISSING|fp64 -?inf|fp64 -?nan|fp32 -?inf|fp32 -?nan")
endforeach()

set(dir ${PRIMEC_NUMERICS_DIR}/h512_unshifted)
add_test(NAME numerics/h512-overflow
         COMMAND sh -c "mkdir -p \"$3\" && sed 's/${PRIMEC_OPT_SMALL}/${PRIMEC_H512}/; s/causal_exp_shift(sc, sb)/causal_exp(sc)/' \"$2\" >\"$3/model.prime\" && \"$1\" build \"$3/model.prime\" --model opt_small_megatron -o \"$3\" && \"$3/opt_small_megatron\" --check --init fan-in && ! \"$3/opt_small_megatron\" --check --init uniform"
                 sh $<TARGET_FILE:primec> ${PRIMEC_OPT_SRC} ${dir})
set_tests_properties(numerics/h512-overflow PROPERTIES LABELS run TIMEOUT 600
                     PASS_REGULAR_EXPRESSION "check passed.*error vs fp64 inf.*FAIL.*check FAILED")

# The causal softmax chain alone on U(-1, 1) scores scaled by 10^6
# (bench/softmax/softmax_scaled.prime, bench/softmax_overflow.sh): the
# stdlib's chain, which subtracts the row maximum (directly, or after
# causal_mask), passes with finite errors; the chain with the former smooth bound overflows (fails) from a
# scale of 360 on.
set(PRIMEC_SOFTMAX_SRC ${CMAKE_SOURCE_DIR}/bench/softmax/softmax_scaled.prime)
foreach(case "softmax_max;1000000;0" "softmax_premasked;1000000;0" "softmax_bound;1000;1")
  list(GET case 0 model)
  list(GET case 1 scale)
  list(GET case 2 fails)
  set(dir ${PRIMEC_NUMERICS_DIR}/${model}_${scale})
  if(fails)
    set(expect "check FAILED")
    set(run "! \"$4/$3\" --check --init uniform")
  else()
    set(expect "counters equal the compiler's prediction.*check pr +error vs fp64 [0-9][^\n]*ok.*check dx +error vs fp64 [0-9][^\n]*ok.*check passed")
    set(run "\"$4/$3\" --check --init uniform")
  endif()
  add_test(NAME numerics/softmax-scaled/${model}-${scale}
           COMMAND sh -c "mkdir -p \"$4\" && sed \"s/SCALE/$5/\" \"$2\" >\"$4/model.prime\" && \"$1\" build \"$4/model.prime\" --model \"$3\" -o \"$4\" && ${run}"
                   sh $<TARGET_FILE:primec> ${PRIMEC_SOFTMAX_SRC} ${model} ${dir} ${scale})
  set_tests_properties(numerics/softmax-scaled/${model}-${scale} PROPERTIES LABELS run TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "${expect}")
endforeach()

add_test(NAME numerics/bad-init
         COMMAND sh -c "\"$1\" build \"$2\" -o \"$3\" >/dev/null && \"$3/matmul_row\" --init gaussian; test $? -eq 2"
                 sh $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/examples/matmul_row.prime
                 ${PRIMEC_NUMERICS_DIR}/bad_init)
set_tests_properties(numerics/bad-init PROPERTIES LABELS run TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "--init takes 'fan-in' or 'uniform', not 'gaussian'")
