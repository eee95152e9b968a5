# The planner's exactness (label "unit"): dynamic program = exhaustive
# search = layer matrix power, under a deterministic cost.
add_executable(test_plan ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_plan.c)
target_link_libraries(test_plan PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_plan PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME plan COMMAND test_plan)
set_tests_properties(plan PROPERTIES LABELS unit TIMEOUT 120)
