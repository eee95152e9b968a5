# Transformer layers beyond the per-model runs of tests/models.cmake
# (label "run"): each example's Megatron-LM model on one device, and the
# plan `primec plan` chooses for it, built and checked. The MPI runs of the
# layers are in tests/mpi.cmake.
set(PRIMEC_LAYER_SH ${CMAKE_CURRENT_SOURCE_DIR}/run/model_run.sh)
foreach(family opt llama2 bloom)
  set(file ${CMAKE_SOURCE_DIR}/examples/${family}_layer.prime)
  foreach(mode d1 plan)
    add_test(NAME layers/${mode}/${family}_small_megatron
             COMMAND sh ${PRIMEC_LAYER_SH} ${mode} $<TARGET_FILE:primec> ${file}
                     ${family}_small_megatron ${CMAKE_CURRENT_BINARY_DIR}/layers/${mode}/${family})
    set_tests_properties(layers/${mode}/${family}_small_megatron PROPERTIES
                         LABELS run TIMEOUT 600 PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL:")
  endforeach()
endforeach()

# Plans under a memory limit that rules out replicating everything, so
# the chosen plan splits norms, attention and the MLP and converts layouts
# between them (a limit per family: a little below the unlimited plan's
# memory).
# Then a plan on a 2 x 2 mesh, where each partition can be bound to the
# mesh axes in two ways, and one of 4 data-parallel replicas of a 2-device
# mesh (the program built is one replica); last, OPT's MLP block on a
# 2 x 2 mesh, where the limit leaves square grids.
foreach(case opt:700K llama2:1700K bloom:700K opt:700K:2x2 bloom:2G:2:8 opt_mlp:300K:2x2)
  string(REPLACE ":" ";" parts ${case})
  list(GET parts 0 family)
  list(GET parts 1 limit)
  list(LENGTH parts nparts)
  if(family STREQUAL "opt_mlp")
    set(model opt_mlp_small)
    set(file ${CMAKE_SOURCE_DIR}/examples/opt_mlp.prime)
  else()
    set(model ${family}_small_megatron)
    set(file ${CMAKE_SOURCE_DIR}/examples/${family}_layer.prime)
  endif()
  set(name ${model})
  set(mode plan:${limit})
  if(nparts GREATER_EQUAL 3)
    list(GET parts 2 mesh)
    set(name ${name}_${mesh})
    set(mode ${mode}:${mesh})
  endif()
  if(nparts EQUAL 4)
    list(GET parts 3 devices)
    set(name ${name}_on${devices})
    set(mode ${mode}:${devices})
  endif()
  add_test(NAME layers/plan-limit/${name}
           COMMAND sh ${PRIMEC_LAYER_SH} ${mode} $<TARGET_FILE:primec> ${file}
                   ${model} ${CMAKE_CURRENT_BINARY_DIR}/layers/plan-limit/${name})
  set_tests_properties(layers/plan-limit/${name} PROPERTIES
                       LABELS run TIMEOUT 600 PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL:")
endforeach()

# The emitted program's size does not grow with the layer count: the C of
# 32 layers within 1% of 8 layers' and at most twice the 1-layer model's,
# and the same tensors named at 8 and 32 layers; the square grid's
# 8-layer program is also built and checked (tests/run/layer_size.sh).
foreach(case opt_small_square:check opt_small_megatron:size)
  string(REPLACE ":" ";" parts ${case})
  list(GET parts 0 model)
  list(GET parts 1 mode)
  add_test(NAME layers/size/${model}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/layer_size.sh $<TARGET_FILE:primec>
                   ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime ${model}
                   ${CMAKE_CURRENT_BINARY_DIR}/layers/size/${model} ${mode})
  set_tests_properties(layers/size/${model} PROPERTIES
                       LABELS run TIMEOUT 600 PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL:")
endforeach()

# Pipeline stages with a tensor plan inside each and micro-batches: a
# four-layer batched MLP, two copies of the layer per stage
# (tests/run/stages_mlp.prime), built and run with --check: outputs and
# gradients against the dense reference, counters against the prediction.
set(PRIMEC_STAGES_DIR ${CMAKE_CURRENT_BINARY_DIR}/layers/stages)
file(MAKE_DIRECTORY ${PRIMEC_STAGES_DIR})

# primec_build_check(NAME SOURCE MODEL DIR [PARAM...]): builds MODEL of
# SOURCE (each PARAM as --param PARAM) into DIR and runs it with --check,
# which must pass with the counters equal to the compiler's prediction.
function(primec_build_check name source model dir)
  set(params "")
  foreach(p ${ARGN})
    string(APPEND params " --param ${p}")
  endforeach()
  add_test(NAME ${name}
           COMMAND sh -c "\"$1\" build \"$2\" --model \"$3\"${params} -o \"$4\" && \"$4/$3\" --check"
                   sh $<TARGET_FILE:primec> ${source} ${model} ${dir})
  set_tests_properties(${name} PROPERTIES LABELS run TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "counters equal the compiler's prediction.*check passed"
                       FAIL_REGULAR_EXPRESSION "FAIL|DIFFER|MISSING")
endfunction()

primec_build_check(layers/stages/stages_mlp ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_mlp.prime
                   stages_mlp ${PRIMEC_STAGES_DIR}/stages_mlp)

# Micro-batches without stages (tests/run/micro_megatron.prime: the small
# OPT layer's Megatron-LM replicas, two micro-batches, 2 and 8 layers,
# each micro-batch's copies folded into loops): built and run with
# --check, counters against the prediction.
foreach(layers 2 8)
  primec_build_check(layers/micro/opt_small_megatron_mb_${layers}
                     ${CMAKE_CURRENT_SOURCE_DIR}/run/micro_megatron.prime opt_small_megatron_mb
                     ${PRIMEC_STAGES_DIR}/micro_${layers} layers=${layers})
endforeach()

# Stages along the last and the middle mesh axis (tests/run/stages_axes.prime,
# 4 layers): every phase in form (explain), built and run with --check,
# counters against the prediction.
foreach(model opt_pp_last opt_pp_mid)
  add_test(NAME layers/stages/${model}
           COMMAND sh -c "\"$1\" explain \"$2\" --model \"$3\" --param layers=4 | grep -Eq '^program form: ([0-9]+) of \\1 phases rank-parametric$' && echo 'every phase in form' && \"$1\" build \"$2\" --model \"$3\" --param layers=4 -o \"$4\" && \"$4/$3\" --check"
                   sh $<TARGET_FILE:primec> ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_axes.prime
                   ${model} ${PRIMEC_STAGES_DIR}/${model})
  set_tests_properties(layers/stages/${model} PROPERTIES LABELS run TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "every phase in form.*counters equal the compiler's prediction.*check passed"
                       FAIL_REGULAR_EXPRESSION "FAIL|DIFFER|MISSING|per-rank tables")
endforeach()

# The same MLP in 4 micro-batches in 1F1B's order (tests/run/stages_1f1b.prime):
# built and run with --check, and its predicted peak on every device below
# the GPipe order's (tests/run/peak_order.sh).
primec_build_check(layers/stages/stages_1f1b ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_1f1b.prime
                   stages_1f1b ${PRIMEC_STAGES_DIR}/stages_1f1b)
# The same in 1F1B's order with each stage's forward recomputed before its
# backward (`recompute`; stages_1f1b_rc on 2 stages, stages_1f1b_s4_rc on
# 4; stages_gpipe_rc in GPipe's order): --check with counters equal to the
# prediction, and the predicted and counted peaks below those of the runs
# without on every stage but the last (tests/run/peak_recompute.sh).
foreach(model stages_1f1b_rc stages_1f1b_s4_rc stages_gpipe_rc)
  primec_build_check(layers/stages/${model} ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_1f1b.prime
                     ${model} ${PRIMEC_STAGES_DIR}/${model})
endforeach()
foreach(pair "stages_1f1b;stages_1f1b_rc" "stages_1f1b_s4;stages_1f1b_s4_rc"
             "stages_gpipe;stages_gpipe_rc")
  list(GET pair 0 base)
  list(GET pair 1 rc)
  add_test(NAME layers/stages/peak_${rc}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/peak_recompute.sh $<TARGET_FILE:primec>
                   ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_1f1b.prime ${base} ${rc})
  set_tests_properties(layers/stages/peak_${rc} PROPERTIES LABELS run TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()
add_test(NAME layers/stages/peak_1f1b
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/peak_order.sh $<TARGET_FILE:primec>
                 ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_1f1b.prime stages_gpipe stages_1f1b)
set_tests_properties(layers/stages/peak_1f1b PROPERTIES LABELS run TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL")
add_test(NAME layers/stages/peak_1f1b_s4
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/peak_order.sh $<TARGET_FILE:primec>
                 ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_1f1b.prime stages_gpipe_s4 stages_1f1b_s4)
set_tests_properties(layers/stages/peak_1f1b_s4 PROPERTIES LABELS run TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL")

# The square grid's emitted program does not grow with the mesh: a square
# matmul's C on 2x2, 4x4 and 8x8 is the same up to its numbers (and the
# 8x8 one passes --check), and the small OPT model's square plan emits as
# many action forms on 8x8 as on 4x4, its C within 2% on all three
# (tests/run/mesh_form.sh).
add_test(NAME layers/mesh/matmul_square
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/mesh_form.sh $<TARGET_FILE:primec>
                 ${CMAKE_CURRENT_BINARY_DIR}/layers/mesh/matmul_square matmul)
add_test(NAME layers/mesh/opt_small_square
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/mesh_form.sh $<TARGET_FILE:primec>
                 ${CMAKE_CURRENT_BINARY_DIR}/layers/mesh/opt_small_square model
                 ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime opt_small_square)
set_tests_properties(layers/mesh/matmul_square layers/mesh/opt_small_square PROPERTIES
                     LABELS run TIMEOUT 600 PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL:")

# The predicted step in 1F1B's order is not above GPipe's (the boundary
# sends posted where the value is made; tests/run/order_time.sh).
foreach(pair "stages_gpipe;stages_1f1b" "stages_gpipe_s4;stages_1f1b_s4")
  list(GET pair 1 onef1b)
  list(GET pair 0 gpipe)
  add_test(NAME layers/stages/time_${onef1b}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/order_time.sh $<TARGET_FILE:primec>
                   ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_1f1b.prime ${gpipe} ${onef1b})
  set_tests_properties(layers/stages/time_${onef1b} PROPERTIES LABELS run TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()

# primec plan --training -o writes the stages and micro-batches it chose
# (tests/run/stages_plan_write.sh): the written plan equals
# tests/run/stages_plan_write.expected and builds and passes --check.
add_test(NAME layers/stages/plan_write
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_plan_write.sh $<TARGET_FILE:primec>
                 ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                 ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_plan_write.expected
                 ${PRIMEC_STAGES_DIR}/plan_write)
set_tests_properties(layers/stages/plan_write PROPERTIES LABELS run TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL")

# And one the search chooses to recompute (the same script, case rc):
# the written plan carries `recompute`, equals
# tests/run/stages_plan_write_rc.expected and builds and passes --check.
add_test(NAME layers/stages/plan_write_rc
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_plan_write.sh $<TARGET_FILE:primec>
                 ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                 ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_plan_write_rc.expected
                 ${PRIMEC_STAGES_DIR}/plan_write_rc rc)
set_tests_properties(layers/stages/plan_write_rc PROPERTIES LABELS run TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL")

# The same for a batched layer (tests/run/stages_plan_write_b.sh): the
# replicas written along mesh axis r, the micro-batches over the batch b;
# builds, passes --check, and primec cost of the file is compared with the
# search's figures.
add_test(NAME layers/stages/plan_write_b
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_plan_write_b.sh $<TARGET_FILE:primec>
                 ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                 ${CMAKE_CURRENT_SOURCE_DIR}/run/stages_plan_write_b.expected
                 ${PRIMEC_STAGES_DIR}/plan_write_b)
set_tests_properties(layers/stages/plan_write_b PROPERTIES LABELS run TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL")
