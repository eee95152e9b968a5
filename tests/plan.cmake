# The planner's exactness (label "unit"): dynamic program = exhaustive
# search = layer matrix power, under a deterministic cost.
add_executable(test_plan ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_plan.c)
target_link_libraries(test_plan PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_plan PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME plan COMMAND test_plan)
set_tests_properties(plan PROPERTIES LABELS unit TIMEOUT 120)

# The training search's exactness (label "unit"): train_search = the best
# of every layer assignment x mesh x micro-batch x stages x replicas x
# recomputation; attention over folded sequences priced per sequence.
add_executable(test_plan_train ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_plan_train.c)
target_link_libraries(test_plan_train PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_plan_train PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME plan/train COMMAND test_plan_train)
set_tests_properties(plan/train PROPERTIES LABELS unit TIMEOUT 120)

# The command: a published-shape layer on 4096 devices (data x tensor
# parallelism), and a memory limit no plan meets.
add_test(NAME plan/cli/opt-4096
         COMMAND $<TARGET_FILE:primec> plan ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                 --model opt_megatron --devices 4096 --profile v100 --elem-bytes 2 --json)
set_tests_properties(plan/cli/opt-4096 PROPERTIES LABELS unit TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "\"devices\": 4096.*\"pinned\": {[ \n]*\"dp\": [0-9]+,[ \n]*\"time_s\": [0-9]")
add_test(NAME plan/cli/memory-limit
         COMMAND $<TARGET_FILE:primec> plan ${CMAKE_SOURCE_DIR}/examples/matmul_square.prime
                 --memory-limit 1K)
set_tests_properties(plan/cli/memory-limit PROPERTIES LABELS unit TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "the smallest found needs [0-9]+")

# The whole OPT-175B model (96 layers, the example's layer repeated): on
# 32 H200 devices the layers are composed as a (min,+) matrix power; on 32
# V100s no tensor- and data-parallel plan fits the devices' memory. The
# H200 case skips the whole-program check (--no-program): scheduling 96
# layers as one program takes 4 s and 1.2 GB in a Release build but more
# than the machine's 24 GB under ASan (every arena allocation is a malloc
# there).
set(PRIMEC_OPT96 ${CMAKE_CURRENT_BINARY_DIR}/opt96.prime)
add_test(NAME plan/cli/opt-96-layers
         COMMAND sh -c "sed 's/param layers = 1, s = 2048/param layers = 96, s = 2048/' \"$1\" >\"$2\" && \"$3\" plan \"$2\" --model opt_megatron --devices 32 --profile h200 --elem-bytes 2 --json --no-program"
                 sh ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime ${PRIMEC_OPT96} $<TARGET_FILE:primec>)
set_tests_properties(plan/cli/opt-96-layers PROPERTIES LABELS unit TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "\"use\": \"[a-z_]+\\(d: d\\)\"[ \n]*}[ \n]*\\].*\"layer_power\": true")
add_test(NAME plan/cli/opt-96-layers-v100
         COMMAND sh -c "sed 's/param layers = 1, s = 2048/param layers = 96, s = 2048/' \"$1\" >\"$2.v100\" && \"$3\" plan \"$2.v100\" --model opt_megatron --devices 32 --profile v100 --elem-bytes 2"
                 sh ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime ${PRIMEC_OPT96} $<TARGET_FILE:primec>)
set_tests_properties(plan/cli/opt-96-layers-v100 PROPERTIES LABELS unit TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "fits in 34360000000 bytes per device: every plan needs at least [0-9]+")

# The search's estimate of the Megatron-LM plans counts the collective
# bytes their programs move: q, k and v's partial input gradients are
# all-reduced once (merge edges), as the program does; the program's
# collective time is priced when it moves collective bytes.
foreach(family opt llama2 bloom)
  add_test(NAME plan/estimate-collectives/${family}
           COMMAND sh -c "\"$1\" plan \"$2\" --model \"$3\" --profile v100 --json | python3 -c 'import json, sys; p = json.load(sys.stdin)[\"pinned\"]; print(p[\"collective_bytes\"], p[\"schedule\"][\"collective_bytes\"]); x = p[\"schedule\"]; sys.exit(p[\"collective_bytes\"] != x[\"collective_bytes\"] or (x[\"collective_time_s\"] > 0) != (x[\"collective_bytes\"] > 0))'"
                   sh $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/examples/${family}_layer.prime
                   ${family}_small_megatron)
  set_tests_properties(plan/estimate-collectives/${family} PROPERTIES LABELS unit TIMEOUT 120)
endforeach()

# --memory-limit none: no limit (the default is the profile's device memory).
add_test(NAME plan/cli/memory-limit-none
         COMMAND $<TARGET_FILE:primec> plan ${CMAKE_SOURCE_DIR}/examples/matmul_square.prime
                 --memory-limit none)
set_tests_properties(plan/cli/memory-limit-none PROPERTIES LABELS unit TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "as one program \\(what `primec build` of this plan runs\\)")

# --no-program: the search's estimate only; neither plan is scheduled as
# one program.
add_test(NAME plan/cli/no-program
         COMMAND $<TARGET_FILE:primec> plan ${CMAKE_SOURCE_DIR}/examples/matmul_square.prime
                 --devices 4 --profile h200 --no-program)
set_tests_properties(plan/cli/no-program PROPERTIES LABELS unit TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "as one program: not scheduled \\(--no-program\\)"
                     FAIL_REGULAR_EXPRESSION "as one program \\(what")

# plan --training: OPT-6.7B's shape (the example's layer with --param) on
# 8 V100s, meshes of at most 4 devices and micro-batches of 2 (to stay
# fast under ASan). The search's candidates include the pinned Megatron-LM
# partitions, so its iteration is never slower than theirs; both report
# the four memory terms within the devices' memory.
add_test(NAME plan/cli/training-opt-6.7b
         COMMAND sh -c "\"$1\" plan \"$2\" --model opt_megatron --param h=4096 --param a=32 --param f=16384 --training --layers 32 --global-batch 1024 --vocab 50272 --devices 8 --profile v100 --elem-bytes 2 --tp-max 4 --micro-batch 2 --json | python3 -c 'import json, sys; r = json.load(sys.stdin); s, p = r[\"search\"], r[\"pinned\"]; print(s[\"iteration_s\"], p[\"iteration_s\"]); m = [x[\"memory\"] for x in (s, p)]; ok = s[\"iteration_s\"] <= p[\"iteration_s\"] * (1 + 1e-12) and all(abs(x[\"total\"] - x[\"weights\"] - x[\"gradients\"] - x[\"optimizer\"] - x[\"activations\"]) <= 1e-6 * x[\"total\"] and x[\"total\"] <= 34.36e9 for x in m) and s[\"stages\"] * s[\"replicas\"] * s[\"tensor_devices\"] == 8 and 32 % s[\"stages\"] == 0; sys.exit(0 if ok else 1)'"
                 sh $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime)
set_tests_properties(plan/cli/training-opt-6.7b PROPERTIES LABELS unit TIMEOUT 300)

# A memory limit no training plan meets: OPT-175B on 32 V100s needs at
# least 16 bytes per parameter / 32 devices (no optimizer-state sharding;
# meshes of at most 4 devices, micro-batches of 1, to stay fast).
add_test(NAME plan/cli/training-memory
         COMMAND $<TARGET_FILE:primec> plan ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                 --model opt_megatron --training --layers 96 --global-batch 1024 --vocab 50272
                 --devices 32 --profile v100 --elem-bytes 2 --tp-max 4 --micro-batch 1)
set_tests_properties(plan/cli/training-memory PROPERTIES LABELS unit TIMEOUT 300 WILL_FAIL FALSE
                     PASS_REGULAR_EXPRESSION "opt_layer.prime:[0-9]+:[0-9]+: error: no training plan of 'opt_megatron' fits in 34360000000 bytes per device: the smallest peak any plan reaches is [0-9]+ bytes .*dominated by optimizer state")

# --uneven-stages: BLOOM-176B's 70 layers on 256 H100s fit only with a
# stage count that does not divide them (16 stages of 5 and 4 layers);
# with even stages no plan fits (meshes of at most 4 devices, micro-batches
# of 2, recomputation on, to stay fast).
add_test(NAME plan/cli/training-uneven-stages
         COMMAND sh -c "set -e; a=\"--model bloom_megatron --training --layers 70 --global-batch 2048 --vocab 250880 --devices 256 --profile h100 --elem-bytes 2 --tp-max 4 --micro-batch 2 --recompute on\"; ! \"$1\" plan \"$2\" $a >/dev/null 2>&1; \"$1\" plan \"$2\" $a --uneven-stages --json | python3 -c 'import json, sys; s = json.load(sys.stdin)[\"search\"]; p, n = s[\"stages\"], s[\"stage_layers\"]; print(p, n, s[\"memory\"][\"total\"]); sys.exit(0 if 70 % p and n == -(-70 // p) and s[\"memory\"][\"total\"] <= 85.9e9 else 1)'"
                 sh $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/examples/bloom_layer.prime)
set_tests_properties(plan/cli/training-uneven-stages PROPERTIES LABELS unit TIMEOUT 300)

# --training needs the layer count and the global batch.
add_test(NAME plan/cli/training-options
         COMMAND $<TARGET_FILE:primec> plan ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                 --model opt_megatron --training --layers 96)
set_tests_properties(plan/cli/training-options PROPERTIES LABELS unit TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "--training needs --layers L and --global-batch B")

# --training plans one layer: a model that repeats its layer is refused
# with a diagnostic at the model.
add_test(NAME plan/cli/training-one-layer
         COMMAND $<TARGET_FILE:primec> plan ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                 --model opt_small_megatron --training --layers 4 --global-batch 8 --devices 4)
set_tests_properties(plan/cli/training-one-layer PROPERTIES LABELS unit TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "opt_layer.prime:[0-9]+:[0-9]+: error: --training plans one layer of a model: 'opt_small_megatron' repeats its layer 2 times")

# plan --training -o: a choice the language cannot express is refused with
# a diagnostic at the model, and nothing is written: uneven stages (3
# layers on 2 stages, --uneven-stages) and recomputed activations on one
# stage (`recompute` needs stages; on several, layers/stages/plan_write_rc).
set(PRIMEC_PLAN_WRITE_DIR ${CMAKE_CURRENT_BINARY_DIR}/plan/write)
file(MAKE_DIRECTORY ${PRIMEC_PLAN_WRITE_DIR})
set(PRIMEC_TRAIN_SMALL --model opt --param layers=1 --training --global-batch 8 --devices 8
    --profile v100 --tp-max 2)
add_test(NAME plan/cli/training-write-uneven
         COMMAND sh -c "p=$1 f=$2 o=$3; shift 3; rm -f \"$o\"; ! \"$p\" plan \"$f\" \"$@\" -o \"$o\" && test ! -e \"$o\""
                 sh $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                 ${PRIMEC_PLAN_WRITE_DIR}/uneven.prime ${PRIMEC_TRAIN_SMALL} --layers 3
                 --memory-limit 1500000 --recompute off --uneven-stages)
set_tests_properties(plan/cli/training-write-uneven PROPERTIES LABELS unit TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "opt_layer.prime:[0-9]+:[0-9]+: error: the training plan chosen for 'opt' cannot be written as a program: 2 stages do not divide the 3 layers \\(uneven stages\\)")
add_test(NAME plan/cli/training-write-recompute
         COMMAND sh -c "p=$1 f=$2 o=$3; shift 3; rm -f \"$o\"; ! \"$p\" plan \"$f\" \"$@\" -o \"$o\" && test ! -e \"$o\""
                 sh $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                 ${PRIMEC_PLAN_WRITE_DIR}/recompute.prime ${PRIMEC_TRAIN_SMALL} --layers 1
                 --recompute on)
set_tests_properties(plan/cli/training-write-recompute PROPERTIES LABELS unit TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "opt_layer.prime:[0-9]+:[0-9]+: error: the training plan chosen for 'opt' cannot be written as a program: it recomputes activations on one pipeline stage")
