# Unit tests of the rank-parametric program form (label "unit"): every
# phase's form, expanded by the runtime on every rank, equals the per-rank
# schedule, for the stdlib's matmul partitions on meshes up to 16 and 4x4
# and for every example model.
add_executable(test_form ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_form.c)
target_link_libraries(test_form PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_form PRIVATE ${PRIMEC_WARNINGS})
target_compile_definitions(test_form PRIVATE PRIMEC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_test(NAME form COMMAND test_form)
set_tests_properties(form PROPERTIES LABELS unit TIMEOUT 300)
