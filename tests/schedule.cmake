# Unit tests of the schedule pass (label "unit"): the Schedule IR of the
# stdlib's matmul partitions — phases, sweep order, move kinds,
# collectives, redistributions, replication and predicted bytes.
add_executable(test_schedule ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_schedule.c)
target_link_libraries(test_schedule PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_schedule PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME schedule COMMAND test_schedule)
set_tests_properties(schedule PROPERTIES LABELS unit TIMEOUT 60)

# The accumulators' merge and pool (sched_accumulate.c) against the plain
# definition of a merge, on random accumulators.
add_executable(test_sched_acc ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sched_acc.c)
target_link_libraries(test_sched_acc PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_sched_acc PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME schedule/accumulators COMMAND test_sched_acc)
set_tests_properties(schedule/accumulators PROPERTIES LABELS unit TIMEOUT 60)

# The indexed stores, the holder counts and the kept accumulators' index
# (sched_machine.c, sched_accumulate.c) against a scan of the lists, on
# random adds, removals, clears and restores.
add_executable(test_sched_store ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sched_store.c)
target_link_libraries(test_sched_store PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_sched_store PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME schedule/stores COMMAND test_sched_store)
set_tests_properties(schedule/stores PROPERTIES LABELS unit TIMEOUT 60)

# Pipeline stages and micro-batches (docs/language.md, "Pipeline stages"):
# the ranks of other stages take no part in a staged instance's phase, the
# boundary activation and its gradient cross between the stages, and a
# micro-batched weight gradient is all-reduced once.
add_executable(test_stages ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_stages.c)
target_link_libraries(test_stages PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_stages PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME schedule/stages COMMAND test_stages)
set_tests_properties(schedule/stages PROPERTIES LABELS unit TIMEOUT 60)

# A schedule for `check` alone, whose actions are folded into the
# predictions as they are made (schedule_check_from), against the schedule
# that keeps its action lists: the same action counts, moves, collectives
# and predicted bytes and peaks per rank, on the small examples, runs of
# opt_layer with stages and micro-batches, sequence parallelism (whose
# all-reduces become reduce-scatters) and data parallelism on the square
# grid, the golden check inputs and a few
# larger meshes (written in the test).
file(GLOB SCHED_FOLD_INPUTS ${CMAKE_SOURCE_DIR}/examples/matmul_*.prime
     ${CMAKE_SOURCE_DIR}/tests/golden/check/*.prime)
# (without the inputs that are there to be large or deep: each takes a
# second or more, and none is about the schedule)
list(FILTER SCHED_FOLD_INPUTS EXCLUDE REGEX
     "/(resource-[^/]*|steps-live-tiles|depth-[^/]*|radix-[^/]*|size-expression-[^/]*)\\.prime$")
list(SORT SCHED_FOLD_INPUTS)
foreach(m opt_small_megatron_sp opt_small_square_dp opt_small_megatron_pp_mb)
  list(APPEND SCHED_FOLD_INPUTS ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime@${m})
endforeach()
list(APPEND SCHED_FOLD_INPUTS ${CMAKE_SOURCE_DIR}/examples/opt_mlp.prime)
add_executable(test_sched_fold ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sched_fold.c
                               ${CMAKE_CURRENT_SOURCE_DIR}/unit/sched_test.c)
target_link_libraries(test_sched_fold PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_sched_fold PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME schedule/fold COMMAND test_sched_fold ${SCHED_FOLD_INPUTS})
set_tests_properties(schedule/fold PROPERTIES LABELS unit TIMEOUT 120)

# The predictions after fusion across instances, which fold the fused
# groups' rewritten phases alone (sched_predict_again), against predicting
# the rewritten lists anew; and the derived expressions that instances of
# one operator share (the emitter's kernel key).
file(GLOB SCHED_REFOLD_INPUTS ${CMAKE_SOURCE_DIR}/examples/*.prime)
list(SORT SCHED_REFOLD_INPUTS)
add_executable(test_sched_refold ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sched_refold.c)
target_link_libraries(test_sched_refold PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_sched_refold PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME schedule/refold COMMAND test_sched_refold ${SCHED_REFOLD_INPUTS})
set_tests_properties(schedule/refold PROPERTIES LABELS unit TIMEOUT 120)

# A phase whose residency trials repeat an earlier phase's takes their
# result (sched_learn_needs): the schedule, the emitted C and check's
# output must not change when every trial runs (tests/run/trial_reuse.sh).
foreach(case "opt_small_square;layers=8" "opt_small_megatron;layers=8" "opt_square;layers=4")
    list(GET case 0 model)
    list(GET case 1 layers)
    add_test(NAME schedule/trial_reuse/${model}
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run/trial_reuse.sh $<TARGET_FILE:primec>
                     ${CMAKE_CURRENT_BINARY_DIR}/schedule/trial_reuse/${model}
                     ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime ${model} --param ${layers})
    set_tests_properties(schedule/trial_reuse/${model} PROPERTIES
                         LABELS run TIMEOUT 300 PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL:")
endforeach()

# `check` from one replica's simulation (sched_orbit.c) against the
# simulation of every rank: the same diagnostics, tensors, moves,
# redistributions, collectives, per-rank action counts and peaks and
# predicted bytes, on every example (their models with data-parallel
# replicas and the Megatron plans, whose head and column splits are
# replica axes too), the golden check and schedule inputs, and models
# written in the test (replicas on larger meshes, a replica axis that is
# not the first, and two whose proof must fail).
file(GLOB SCHED_ORBIT_INPUTS ${CMAKE_SOURCE_DIR}/examples/*.prime
     ${CMAKE_SOURCE_DIR}/tests/golden/check/*.prime)
list(FILTER SCHED_ORBIT_INPUTS EXCLUDE REGEX
     "/(resource-[^/]*|steps-live-tiles|depth-[^/]*|radix-[^/]*|size-expression-[^/]*)\\.prime$")
list(SORT SCHED_ORBIT_INPUTS)
add_executable(test_sched_orbit ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sched_orbit.c
                                ${CMAKE_CURRENT_SOURCE_DIR}/unit/sched_test.c)
target_link_libraries(test_sched_orbit PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_sched_orbit PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME schedule/orbit COMMAND test_sched_orbit ${SCHED_ORBIT_INPUTS})
set_tests_properties(schedule/orbit PROPERTIES LABELS unit TIMEOUT 300)

# `explain` of a mesh of more than 64 devices with replica axes analyses
# one replica (schedule_summary_from): its report, JSON and text, equals
# the one of every rank simulated (PRIMEC_FULL_SIMULATION=1) but for the
# program form, on Megatron-LM with sequence parallelism (redistributions
# whose layouts are translated to the listed ranks), a square grid and a
# two-axis orbit; no rank listed by default (tests/run/explain_summary.py).
foreach(case "bloom_layer bloom_small_megatron_sp_dp R=64 b=64"
             "bloom_layer bloom_small_square_dp R=32 b=32"
             "opt_layer opt_megatron_dp layers=2 R=16 P=8 b=16 s=256")
  separate_arguments(words UNIX_COMMAND "${case}")
  list(POP_FRONT words file model)
  set(params)
  foreach(p ${words})
    list(APPEND params --param ${p})
  endforeach()
  add_test(NAME schedule/explain_summary/${model}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/run/explain_summary.py $<TARGET_FILE:primec>
                   ${CMAKE_SOURCE_DIR}/examples/${file}.prime ${model} ${params})
  set_tests_properties(schedule/explain_summary/${model} PROPERTIES LABELS run TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "equals every rank's analysis" FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()
