# Unit tests of the front end (arena, source map, diagnostics, lexer,
# parser, AST printing): cmocka, label "unit".
add_executable(test_frontend ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_frontend.c)
target_link_libraries(test_frontend PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_frontend PRIVATE ${PRIMEC_WARNINGS})
target_compile_definitions(test_frontend PRIVATE
  PRIMEC_STDLIB_DIR="${CMAKE_CURRENT_SOURCE_DIR}/../stdlib")
add_test(NAME frontend COMMAND test_frontend)
set_tests_properties(frontend PROPERTIES LABELS unit TIMEOUT 60)

# Robustness: every prefix and a few thousand mutations of matmul.prime.
add_executable(test_frontend_fuzz ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_frontend_fuzz.c)
target_link_libraries(test_frontend_fuzz PRIVATE primec_core PkgConfig::CMOCKA)
target_compile_options(test_frontend_fuzz PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME frontend_fuzz COMMAND test_frontend_fuzz)
set_tests_properties(frontend_fuzz PROPERTIES LABELS unit TIMEOUT 300)

# The arena's PRIMEC_ARENA_MALLOC mode, checked in every build: the arena
# tests of test_frontend.c against a copy of the arena compiled in that mode.
set(PRIMEC_FRONTEND_COMPILER_DIR ${CMAKE_CURRENT_SOURCE_DIR}/../compiler)
add_executable(test_frontend_arena_malloc
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_frontend.c
  ${PRIMEC_FRONTEND_COMPILER_DIR}/arena.c
  ${PRIMEC_FRONTEND_COMPILER_DIR}/budget.c
  ${PRIMEC_FRONTEND_COMPILER_DIR}/source.c
  ${PRIMEC_FRONTEND_COMPILER_DIR}/diag.c)
target_include_directories(test_frontend_arena_malloc PRIVATE ${PRIMEC_FRONTEND_COMPILER_DIR})
target_link_libraries(test_frontend_arena_malloc PRIVATE PkgConfig::CMOCKA)
target_compile_options(test_frontend_arena_malloc PRIVATE ${PRIMEC_WARNINGS})
target_compile_definitions(test_frontend_arena_malloc PRIVATE FRONTEND_ARENA_ONLY=1 PRIMEC_ARENA_MALLOC=1)
add_test(NAME frontend_arena_malloc COMMAND test_frontend_arena_malloc)
set_tests_properties(frontend_arena_malloc PROPERTIES LABELS unit TIMEOUT 60)
