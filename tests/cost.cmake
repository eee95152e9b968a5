# Unit tests of the cost model (label "unit"): hardware profiles
# (profiles/*.profile, compiler/profile.c), the cost of schedules
# (compiler/cost.c) and calibration fits and a tiny sweep
# (compiler/calibrate.c, in primec_calibrate with the runtime).
add_executable(test_cost ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cost.c)
target_link_libraries(test_cost PRIVATE primec_calibrate PkgConfig::CMOCKA)
target_compile_options(test_cost PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME cost COMMAND test_cost)
set_tests_properties(cost PROPERTIES LABELS unit TIMEOUT 60)
