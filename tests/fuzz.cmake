# Structure-aware fuzzing (label "fuzz"; docs/fuzzing.md): fuzz/fuzz_gen.c
# decodes bytes into mostly valid programs and fuzz/fuzz_model.c runs
# parse .. schedule on them.
#
#   fuzz/corpus-replay     every build: the committed corpus through the
#                          target, with this build's compiler and sanitizers,
#                          and at least half of it must reach schedule
#   fuzz/libfuzzer-corpus  the libFuzzer binary over the corpus (-runs=0);
#                          built with -DPRIMEC_FUZZ=ON (clang, with
#                          PRIMEC_SANITIZE), reported as skipped otherwise
#
# The bounded CI run and the long run are tests/fuzz/run.sh and
# bench/fuzz_long.sh.

option(PRIMEC_FUZZ "Build the libFuzzer target prime_fuzz (needs clang and PRIMEC_SANITIZE)" OFF)

set(PRIMEC_FUZZ_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)

add_library(prime_fuzz_model STATIC ${PRIMEC_FUZZ_DIR}/fuzz_gen.c ${PRIMEC_FUZZ_DIR}/fuzz_gen_compose.c
            ${PRIMEC_FUZZ_DIR}/fuzz_model.c)
target_include_directories(prime_fuzz_model PUBLIC ${PRIMEC_FUZZ_DIR})
target_link_libraries(prime_fuzz_model PUBLIC primec_core)
target_compile_options(prime_fuzz_model PRIVATE ${PRIMEC_WARNINGS})

add_executable(prime_fuzz_replay ${PRIMEC_FUZZ_DIR}/fuzz_replay.c)
target_link_libraries(prime_fuzz_replay PRIVATE prime_fuzz_model)
target_compile_options(prime_fuzz_replay PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME fuzz/corpus-replay
         COMMAND prime_fuzz_replay --min-reached 50 ${PRIMEC_FUZZ_DIR}/corpus)
set_tests_properties(fuzz/corpus-replay PROPERTIES LABELS "fuzz;unit" TIMEOUT 300)

if(PRIMEC_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "PRIMEC_FUZZ needs clang (cmake -DCMAKE_C_COMPILER=clang)")
  endif()
  if(NOT PRIMEC_SANITIZE)
    message(FATAL_ERROR "PRIMEC_FUZZ needs PRIMEC_SANITIZE=ON (the fuzzer runs under ASan and UBSan)")
  endif()
  # Coverage feedback from the compiler's passes, not only from the target.
  foreach(target primec_core prime_fuzz_model)
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  endforeach()
  add_executable(prime_fuzz ${PRIMEC_FUZZ_DIR}/fuzz_libfuzzer.c)
  target_link_libraries(prime_fuzz PRIVATE prime_fuzz_model)
  target_compile_options(prime_fuzz PRIVATE ${PRIMEC_WARNINGS} -fsanitize=fuzzer)
  target_link_options(prime_fuzz PRIVATE -fsanitize=fuzzer)
  add_test(NAME fuzz/libfuzzer-corpus
           COMMAND prime_fuzz -runs=0 -timeout=30 ${PRIMEC_FUZZ_DIR}/corpus)
  set_tests_properties(fuzz/libfuzzer-corpus PROPERTIES LABELS fuzz TIMEOUT 300)
else()
  add_test(NAME fuzz/libfuzzer-corpus
           COMMAND sh -c "echo '[SKIP] prime_fuzz needs a clang build with -DPRIMEC_FUZZ=ON (docs/fuzzing.md)'; exit 77")
  set_tests_properties(fuzz/libfuzzer-corpus PROPERTIES LABELS fuzz SKIP_RETURN_CODE 77)
endif()
