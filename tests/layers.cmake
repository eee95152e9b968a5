# Transformer layers beyond the per-model runs of tests/models.cmake
# (label "run"): each example's Megatron-LM model on one device, and the
# plan `primec plan` chooses for it, built and checked. The MPI runs of the
# layers are in tests/mpi.cmake.
set(PRIMEC_LAYER_SH ${CMAKE_CURRENT_SOURCE_DIR}/run/model_run.sh)
foreach(family opt llama2 bloom)
  set(file ${CMAKE_SOURCE_DIR}/examples/${family}_layer.prime)
  foreach(mode d1 plan)
    add_test(NAME layers/${mode}/${family}_small_megatron
             COMMAND sh ${PRIMEC_LAYER_SH} ${mode} $<TARGET_FILE:primec> ${file}
                     ${family}_small_megatron ${CMAKE_CURRENT_BINARY_DIR}/layers/${mode}/${family})
    set_tests_properties(layers/${mode}/${family}_small_megatron PROPERTIES
                         LABELS run TIMEOUT 600 PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL:")
  endforeach()
endforeach()
