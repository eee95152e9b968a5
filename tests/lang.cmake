# Models without plans (label "golden"): a run resolves into the same
# model, and schedules into the same schedule, as the written model of the
# same name in the examples.
add_test(NAME lang/same-schedule/opt
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/plan/same_schedule.sh $<TARGET_FILE:primec>
                 ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                 ${CMAKE_CURRENT_SOURCE_DIR}/plan/opt_runs.prime
                 opt_small_megatron opt_small_megatron_d2 opt_small_megatron_d8
                 opt_small_megatron_sp)
set_tests_properties(lang/same-schedule/opt PROPERTIES LABELS golden TIMEOUT 120)
