# Unit tests of the cost model (label "unit"): hardware profiles
# (profiles/*.profile, compiler/profile.c), the cost of schedules
# (compiler/cost.c) and calibration fits and a tiny sweep
# (compiler/calibrate.c, in primec_calibrate with the runtime).
add_executable(test_cost ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cost.c)
target_link_libraries(test_cost PRIVATE primec_calibrate PkgConfig::CMOCKA)
target_compile_options(test_cost PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME cost COMMAND test_cost)
set_tests_properties(cost PROPERTIES LABELS unit TIMEOUT 60)

# Fused kernels priced as the program runs them (compiler/cost_kernel.c):
# the bytes of every group against its kernel IR, and the unfused,
# rewritten and planner's prices of one layer agree.
add_executable(test_cost_fused ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cost_fused.c)
target_link_libraries(test_cost_fused PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_cost_fused PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME cost/fused COMMAND test_cost_fused ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime)
set_tests_properties(cost/fused PROPERTIES LABELS unit TIMEOUT 60)

# The training planner and `primec cost` price one layer the same, its
# kernels fused across instances: OPT-6.7B's layer under Megatron-LM's
# partitions on 2 devices (the pinned plan of `plan --training`, mesh
# fixed), per sequence: the forward equal; the backward within 5% (the
# planner prices instances one by one and adds what the layer's fused
# kernels save; `cost` prices the layer as one program: 3.2% apart).
add_test(NAME cost/plan-agrees
         COMMAND sh -c "f=$(mktemp -d)/l.prime && printf 'import \"%s\";\\nshape o_shape of opt { param layers = 1, s = 2048, h = 4096, a = 32, e = 128, f = 16384; }\\nrun o = megatron(P = 2) on o_shape;\\n' \"$2\" > $f && \"$1\" plan $f --model o --training --layers 32 --global-batch 64 --micro-batch 1 --vocab 50272 --devices 8 --profile a100 --elem-bytes 2 --mesh 2 --json > $f.plan && \"$1\" cost $f --model o --profile a100 --elem-bytes 2 --json --layers 32 --stages 1 --micro-batch 1 --global-batch 64 > $f.cost && python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))[\"pinned\"][\"pipeline\"]; c = json.load(open(sys.argv[2]))[\"pipeline\"]; print(p[\"layer_fwd_us\"], c[\"layer_fwd_us\"], p[\"layer_bwd_us\"], c[\"layer_bwd_us\"]); ok = abs(p[\"layer_fwd_us\"] - c[\"layer_fwd_us\"]) <= 1e-5 * c[\"layer_fwd_us\"] and abs(p[\"layer_bwd_us\"] - c[\"layer_bwd_us\"]) <= 0.05 * c[\"layer_bwd_us\"]; sys.exit(0 if ok else 1)' $f.plan $f.cost; rc=$?; rm -rf $(dirname $f); exit $rc"
                 sh $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime)
set_tests_properties(cost/plan-agrees PROPERTIES LABELS unit TIMEOUT 120)
