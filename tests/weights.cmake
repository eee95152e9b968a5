# Real weights (label "run"): programs load safetensors files with
# --weights (F32, F16 and BF16, sharded checkpoints, --weights-map names),
# --check passes on the loaded values, and --save-grads writes gradients
# that equal the ones computed in the test from the values it wrote; bad
# files and maps exit with 2 and a message, and a corpus of truncated and
# corrupted files never crashes the reader (weights/weights_test.py).

find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "python3 not found: the weights tests are not registered")
  return()
endif()

foreach(case matmul map opt bad fuzz names random)
  add_test(NAME weights/${case}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/weights/weights_test.py
                   $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/weights/${case}
                   ${case})
  set_tests_properties(weights/${case} PROPERTIES LABELS run TIMEOUT 300)
endforeach()

# The same loading and gathering with the MPI backend, 4 processes
# (the launcher's flags and environment from tests/mpi.cmake).
if(TARGET prime_rt_mpi AND MPIEXEC_EXECUTABLE)
  add_test(NAME weights/mpi
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/weights/weights_test.py
                   $<TARGET_FILE:primec> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/weights/mpi
                   mpi ${MPIEXEC_EXECUTABLE} ${PRIMEC_MPIEXEC_FLAGS})
  set_tests_properties(weights/mpi PROPERTIES LABELS "mpi;run" TIMEOUT 300
                       ENVIRONMENT "${PRIMEC_MPI_TEST_ENV}")
endif()
