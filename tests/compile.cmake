# Compile tests (label "compile"): the C that primec emits is
# deterministic (two emissions are byte-identical), formatted (clang-format
# with compiler/format.c's style changes nothing), and compiles: `primec
# build` runs the C compiler with -std=c11 -Wall -Wextra -Werror, so every
# example in examples/ must build.

set(PRIMEC_COMPILE_DIR ${CMAKE_CURRENT_BINARY_DIR}/compile)
set(PRIMEC_COMPILE_SH ${CMAKE_CURRENT_SOURCE_DIR}/run/compile_check.sh)
# primec build -o creates only the last component of its output directory.
file(MAKE_DIRECTORY ${PRIMEC_COMPILE_DIR}/build)

# One-model examples here; the transformer layer files hold several models
# each and are built and run per model by tests/models.cmake, which also
# checks one of them for determinism and formatting (below).
file(GLOB PRIMEC_EXAMPLES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/examples/matmul_*.prime)
list(SORT PRIMEC_EXAMPLES)
foreach(example ${PRIMEC_EXAMPLES})
  get_filename_component(name ${example} NAME_WE)

  add_test(NAME compile/build/${name}
           COMMAND $<TARGET_FILE:primec> build ${example} -o ${PRIMEC_COMPILE_DIR}/build/${name})
  set_tests_properties(compile/build/${name} PROPERTIES LABELS compile TIMEOUT 120)

  add_test(NAME compile/determinism/${name}
           COMMAND sh ${PRIMEC_COMPILE_SH} determinism $<TARGET_FILE:primec>
                   ${PRIMEC_COMPILE_DIR}/determinism/${name} ${example})
  set_tests_properties(compile/determinism/${name} PROPERTIES LABELS compile TIMEOUT 60)

  add_test(NAME compile/format/${name}
           COMMAND sh ${PRIMEC_COMPILE_SH} format $<TARGET_FILE:primec>
                   ${PRIMEC_COMPILE_DIR}/format/${name} ${example}
                   ${CLANG_FORMAT_EXECUTABLE} ${CMAKE_SOURCE_DIR}/compiler/format.c)
  set_tests_properties(compile/format/${name} PROPERTIES LABELS compile TIMEOUT 60)
endforeach()

# A whole transformer layer (many instances, conversions, collectives):
# deterministic and formatted too.
foreach(mode determinism format)
  add_test(NAME compile/${mode}/opt_small_square
           COMMAND ${CMAKE_COMMAND} -E env PRIMEC_MODEL=opt_small_square
                   sh ${PRIMEC_COMPILE_SH} ${mode} $<TARGET_FILE:primec>
                   ${PRIMEC_COMPILE_DIR}/${mode}/opt_small_square ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                   ${CLANG_FORMAT_EXECUTABLE} ${CMAKE_SOURCE_DIR}/compiler/format.c)
  set_tests_properties(compile/${mode}/opt_small_square PROPERTIES LABELS compile TIMEOUT 300)
endforeach()

# A model with more stored tensors than programs once held (6 layers of
# the small OPT model, 556 stored tensors; the runtime's store grows with
# the program): it builds, and its --check passes with counters equal to
# the prediction.
set(PRIMEC_OPT6 ${PRIMEC_COMPILE_DIR}/opt_6_layers.prime)
add_test(NAME compile/opt-6-layers
         COMMAND sh -c "sed 's/param layers = 2, s = 16, h = 64/param layers = 6, s = 16, h = 64/' \"$1\" >\"$2\" && \"$3\" check \"$2\" --model opt_small_megatron && \"$3\" build \"$2\" --model opt_small_megatron -o \"$4\" && \"$4/opt_small_megatron\" --check"
                 sh ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime ${PRIMEC_OPT6} $<TARGET_FILE:primec>
                 ${PRIMEC_COMPILE_DIR}/opt_6_layers)
set_tests_properties(compile/opt-6-layers PROPERTIES LABELS compile TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "ok: 151 instances.*counters equal the compiler's prediction.*check passed")
