# Pictures (label "golden"): `primec explain --svg` and `primec plan --svg`,
# checked by structure against the same model's `explain --json` and
# `cost --json` (svg/check_svg.py): tiles per device and step, their
# colours, arrows per transfer, collective marks, redistribution panels,
# the timeline's step and compute times.
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "python3 not found: the svg tests are not registered")
  return()
endif()

set(PRIMEC_SVG_CHECK ${CMAKE_CURRENT_SOURCE_DIR}/svg/check_svg.py)
foreach(case "explain;matmul_square;matmul_square"
             "explain;matmul_column;matmul_column"
             "explain;matmul_row;matmul_row"
             "explain;matmul_ring;matmul_ring"
             "explain;opt_layer;opt_small_megatron"
             "explain;opt_layer;opt_small_megatron_sp"
             "explain;opt_layer;opt_small_square"
             "plan;matmul_square;matmul_square"
             "plan;opt_layer;opt_small_megatron")
  list(GET case 0 mode)
  list(GET case 1 file)
  list(GET case 2 model)
  add_test(NAME svg/${mode}/${model}
           COMMAND ${Python3_EXECUTABLE} ${PRIMEC_SVG_CHECK} ${mode} $<TARGET_FILE:primec>
                   ${CMAKE_SOURCE_DIR}/examples/${file}.prime ${model}
                   ${CMAKE_CURRENT_BINARY_DIR}/svg/${mode}-${model})
  set_tests_properties(svg/${mode}/${model} PROPERTIES LABELS golden TIMEOUT 120)
endforeach()

# A mesh larger than the pictures draw (a ring of 32): a line says so, and
# the timeline is still written (its first ranks).
add_test(NAME svg/explain/large-mesh
         COMMAND sh -c "sed 's/mesh(d: 4)/mesh(d: 32)/; s/m = 96, k = 64, n = 80/m = 64, k = 64, n = 64/' \"$1\" >\"$2.prime\" && rm -rf \"$2\" && \"$3\" explain \"$2.prime\" --svg \"$2\" >\"$2.out\" && cat \"$2.out\" && grep -q 'mesh of 1 x 32 devices not drawn' \"$2.out\" && [ \"$(ls \"$2\")\" = matmul_ring.timeline.svg ]"
                 sh ${CMAKE_SOURCE_DIR}/examples/matmul_ring.prime
                 ${CMAKE_CURRENT_BINARY_DIR}/svg/large $<TARGET_FILE:primec>)
set_tests_properties(svg/explain/large-mesh PROPERTIES LABELS golden TIMEOUT 120)

# A profile that does not exist is refused before the folder is made.
add_test(NAME svg/explain/bad-profile
         COMMAND sh -c "rm -rf \"$2\"; \"$1\" explain \"$3\" --svg \"$2\" --profile nope; rc=$?; [ $rc -eq 2 ] && [ ! -e \"$2\" ]"
                 sh $<TARGET_FILE:primec> ${CMAKE_CURRENT_BINARY_DIR}/svg/bad-profile
                 ${CMAKE_SOURCE_DIR}/examples/matmul_square.prime)
set_tests_properties(svg/explain/bad-profile PROPERTIES LABELS golden TIMEOUT 60)

# The square matmul on the largest mesh drawn (16 x 16): every device's
# tiles and arrows, and the cap on step panels (8 steps of 256 devices).
add_test(NAME svg/explain/square-16x16
         COMMAND sh -c "sed 's/mesh(i: 2, j: 2)/mesh(i: 16, j: 16)/; s/m = 96, k = 64, n = 80/m = 16, k = 16, n = 16/' \"$1\" >\"$2.prime\" && \"$3\" \"$4\" explain \"$5\" \"$2.prime\" matmul_square \"$2\" && grep -q 'the first 8 of 16 steps drawn' \"$2/svg/matmul_square.01.forward.y.svg\""
                 sh ${CMAKE_SOURCE_DIR}/examples/matmul_square.prime
                 ${CMAKE_CURRENT_BINARY_DIR}/svg/square-16x16 ${Python3_EXECUTABLE}
                 ${PRIMEC_SVG_CHECK} $<TARGET_FILE:primec>)
set_tests_properties(svg/explain/square-16x16 PROPERTIES LABELS golden TIMEOUT 300)
