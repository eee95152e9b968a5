# Transformer layer tests (label "run"): the example models of OPT,
# Llama 2 and BLOOM layers (examples/*_layer.prime) and of OPT's MLP block
# (examples/opt_mlp.prime), whose operators are
# stdlib/transformer.prime and stdlib/elementwise.prime.
#
# Every model and run is found by reading the files (a model without a
# mesh is a computation that runs only through its runs):
# - a model whose name contains "_small" (small shapes, two layers) is
#   built with primec and run with --check: its outputs, input gradients
#   and weight gradients must match the dense single-device reference,
#   and its counted bytes and peak memory the compiler's prediction (the
#   program exits non-zero otherwise);
# - every other model (one layer at a published shape, for explain) must
#   pass `primec check`;
# - each file as a whole must pass `primec check`.

set(PRIMEC_MODELS_DIR ${CMAKE_CURRENT_BINARY_DIR}/models)
# primec build -o creates only the last component of its output directory.
file(MAKE_DIRECTORY ${PRIMEC_MODELS_DIR})

set(PRIMEC_MODEL_FILES opt_layer llama2_layer bloom_layer opt_mlp)
set(PRIMEC_MODELS_COUNT 0)
foreach(file ${PRIMEC_MODEL_FILES})
  set(path ${CMAKE_SOURCE_DIR}/examples/${file}.prime)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${path})

  add_test(NAME models/check/${file} COMMAND $<TARGET_FILE:primec> check ${path})
  set_tests_properties(models/check/${file} PROPERTIES LABELS run TIMEOUT 120)

  file(STRINGS ${path} lines REGEX "^(model +[A-Za-z_][A-Za-z0-9_]* *\\{|run +[A-Za-z_][A-Za-z0-9_]* *=)")
  # The models that plans are of: computations, tested through their runs.
  file(STRINGS ${path} plans REGEX "^plan +[A-Za-z0-9_]+ +of +[A-Za-z0-9_]+")
  set(computations "")
  foreach(plan ${plans})
    string(REGEX REPLACE "^plan +[A-Za-z0-9_]+ +of +([A-Za-z0-9_]+).*" "\\1" of "${plan}")
    list(APPEND computations ${of})
  endforeach()
  foreach(line ${lines})
    string(REGEX REPLACE "^(model|run) +([A-Za-z0-9_]+).*" "\\2" model "${line}")
    if(line MATCHES "^model" AND model IN_LIST computations)
      continue()
    endif()
    if(model MATCHES "_small")
      set(dir ${PRIMEC_MODELS_DIR}/${model})
      add_test(NAME models/run/${model}
               COMMAND sh -c "\"$1\" build \"$2\" --model \"$3\" -o \"$4\" && \"$4/$3\" --check"
                       sh $<TARGET_FILE:primec> ${path} ${model} ${dir})
      set_tests_properties(models/run/${model} PROPERTIES
                           LABELS run TIMEOUT 300
                           FAIL_REGULAR_EXPRESSION "FAIL|DIFFER|MISSING")
    else()
      add_test(NAME models/check/${model}
               COMMAND $<TARGET_FILE:primec> check ${path} --model ${model})
      set_tests_properties(models/check/${model} PROPERTIES LABELS run TIMEOUT 120)
    endif()
    math(EXPR PRIMEC_MODELS_COUNT "${PRIMEC_MODELS_COUNT} + 1")
  endforeach()
endforeach()
if(PRIMEC_MODELS_COUNT LESS 12)
  message(FATAL_ERROR "tests/models.cmake found ${PRIMEC_MODELS_COUNT} models in examples/*_layer.prime; expected at least 12")
endif()
