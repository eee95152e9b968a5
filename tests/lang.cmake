# Models without plans (label "golden"): each run of the examples at the
# small shape resolves into the same model, and schedules into the same
# schedule, as the written model of the same name in
# tests/plan/*_written.prime (the examples as they were written before
# plans: one full model per plan). The published-shape runs carry the
# model's loss, which the written published-shape models lacked.
foreach(case "opt_layer:opt_small_megatron,opt_small_megatron_d2,opt_small_megatron_d8,opt_small_megatron_sp,opt_small_square"
             "llama2_layer:llama2_small_megatron,llama2_small_megatron_d2,llama2_small_megatron_d8,llama2_small_megatron_sp,llama2_small_square"
             "bloom_layer:bloom_small_megatron,bloom_small_megatron_d2,bloom_small_megatron_d8,bloom_small_megatron_sp,bloom_small_square"
             "opt_mlp:opt_mlp_small"
             "opt_blocks:opt_blocks_megatron,opt_blocks_megatron_sp,opt_blocks_megatron_seq,opt_blocks_megatron_175b")
  string(REPLACE ":" ";" parts "${case}")
  list(GET parts 0 file)
  list(GET parts 1 runs)
  string(REPLACE "," ";" runs "${runs}")
  add_test(NAME lang/same-schedule/${file}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/plan/same_schedule.sh $<TARGET_FILE:primec>
                   ${CMAKE_CURRENT_SOURCE_DIR}/plan/${file}_written.prime
                   ${CMAKE_SOURCE_DIR}/examples/${file}.prime ${runs})
  set_tests_properties(lang/same-schedule/${file} PROPERTIES LABELS golden TIMEOUT 120)
endforeach()

# primec plan -o writes a plan block and a run of the model it came from:
# `check` and `build` take it, and its size does not grow with the layer
# count (the rules name the layer body's instances).
add_test(NAME lang/plan-writes-plan
         COMMAND sh -c "set -e; d=\"$3\"; mkdir -p \"$d\"; for l in 2 8; do \"$1\" plan \"$2\" --model opt_small_megatron --param layers=$l --profile v100 --no-program -o \"$d/p$l.prime\" >/dev/null; done; grep -q '^plan opt_small_megatron_planned of opt on mesh' \"$d/p2.prime\"; grep -q '^import \"' \"$d/p2.prime\"; ! grep -q '^import \"/' \"$d/p2.prime\"; grep -q 'layers = 8' \"$d/p8.prime\"; [ $(wc -l <\"$d/p2.prime\") -eq $(wc -l <\"$d/p8.prime\") ]; \"$1\" check \"$d/p8.prime\" --model opt_small_megatron_planned | grep -q '201 instances'; \"$1\" build \"$d/p2.prime\" --model opt_small_megatron_planned -o \"$d/bin\" >/dev/null; \"$d/bin/opt_small_megatron_planned\" --check | grep -q '^check passed$'"
                 sh $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                 ${CMAKE_CURRENT_BINARY_DIR}/lang-plan)
set_tests_properties(lang/plan-writes-plan PROPERTIES LABELS golden TIMEOUT 300)

# A batched model's replicas, written as the mesh axis its plan splits the
# batch along (tests/plan/replicas_written.sh): every device, the whole
# batch, the gradient all-reduce across the replicas, --check passes.
add_test(NAME lang/plan-writes-replicas
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/plan/replicas_written.sh $<TARGET_FILE:primec>
                 ${CMAKE_SOURCE_DIR}/examples ${CMAKE_CURRENT_BINARY_DIR}/lang-plan-replicas)
set_tests_properties(lang/plan-writes-replicas PROPERTIES LABELS golden TIMEOUT 300)

# Meshes of any size (label "run"): the square grid on 3 x 3 devices, the
# ring and the row split on 6, built and run with --check (results against
# the dense reference, counters against the prediction); the Megatron-LM
# OPT run on 6 devices (6 heads); and the planner on 6, 12 and 24 devices.
foreach(model matmul_square3 matmul_ring6 matmul_row6)
  add_test(NAME lang/mesh/${model}
           COMMAND sh -c "\"$1\" build \"$2\" --model \"$3\" -o \"$4\" >/dev/null && \"$4/$3\" --check"
                   sh $<TARGET_FILE:primec> ${CMAKE_CURRENT_SOURCE_DIR}/plan/meshes.prime ${model}
                   ${CMAKE_CURRENT_BINARY_DIR}/lang-mesh/${model})
  set_tests_properties(lang/mesh/${model} PROPERTIES LABELS run TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "counters equal the compiler's prediction.*check passed")
endforeach()
add_test(NAME lang/mesh/opt_small_megatron_6
         COMMAND sh -c "\"$1\" build \"$2\" --model opt_small_megatron --param P=6 --param a=6 --param f=192 -o \"$3\" >/dev/null && \"$3/opt_small_megatron\" --check"
                 sh $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                 ${CMAKE_CURRENT_BINARY_DIR}/lang-mesh/opt6)
set_tests_properties(lang/mesh/opt_small_megatron_6 PROPERTIES LABELS run TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "counters equal the compiler's prediction.*check passed")
foreach(n 6 12 24)
  add_test(NAME lang/plan-devices-${n}
           COMMAND $<TARGET_FILE:primec> plan ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                   --model opt_megatron --devices ${n} --profile h200 --no-program)
  set_tests_properties(lang/plan-devices-${n} PROPERTIES LABELS unit TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "plan for opt_megatron on ${n} devices")
endforeach()

# A run of composites with a renamed partition by role (label "run"):
# examples/opt_blocks.prime's megatron_seq, built and run with --check
# (results against the dense reference, counters against the prediction).
add_test(NAME lang/composite-run/opt_blocks_megatron_seq
         COMMAND sh -c "\"$1\" build \"$2\" --model opt_blocks_megatron_seq -o \"$3\" >/dev/null && \"$3/opt_blocks_megatron_seq\" --check"
                 sh $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/examples/opt_blocks.prime
                 ${CMAKE_CURRENT_BINARY_DIR}/lang-composite/seq)
set_tests_properties(lang/composite-run/opt_blocks_megatron_seq PROPERTIES LABELS run TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "counters equal the compiler's prediction.*check passed")
