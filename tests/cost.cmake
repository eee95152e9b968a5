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
