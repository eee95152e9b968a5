# Unit tests of the schedule pass (label "unit"): the Schedule IR of the
# stdlib's matmul partitions — phases, sweep order, move kinds,
# collectives, redistributions, replication and predicted bytes.
add_executable(test_schedule ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_schedule.c)
target_link_libraries(test_schedule PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_schedule PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME schedule COMMAND test_schedule)
set_tests_properties(schedule PROPERTIES LABELS unit TIMEOUT 60)
