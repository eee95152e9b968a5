# Unit tests of the runtime (runtime/): one cmocka executable per area
# (fill: new tiles filled only where their first use reads them).
foreach(part world p2p collective kernels fill)
  add_executable(test_runtime_${part} ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_runtime_${part}.c)
  target_link_libraries(test_runtime_${part} PRIVATE prime_rt PkgConfig::CMOCKA)
  target_compile_options(test_runtime_${part} PRIVATE ${PRIMEC_WARNINGS})
  add_test(NAME runtime_${part} COMMAND test_runtime_${part})
  set_tests_properties(runtime_${part} PROPERTIES LABELS unit TIMEOUT 60)
endforeach()

# The rendezvous of the one-process-per-GPU CUDA runtime
# (runtime/rendezvous.c) between forked processes on 127.0.0.1: the id's
# broadcast, all-gathers, a missing rank, a refused connection, a wrong
# world size, bad RANK / WORLD_SIZE / MASTER_PORT and options, the id file.
add_executable(test_runtime_rendezvous ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_runtime_rendezvous.c
                                       $<TARGET_OBJECTS:prime_rdv_objects>)
target_include_directories(test_runtime_rendezvous PRIVATE ${PROJECT_SOURCE_DIR}/runtime)
target_link_libraries(test_runtime_rendezvous PRIVATE PkgConfig::CMOCKA)
target_compile_options(test_runtime_rendezvous PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME runtime_rendezvous COMMAND test_runtime_rendezvous)
set_tests_properties(runtime_rendezvous PROPERTIES LABELS unit TIMEOUT 60)

# The fp32 kernels' vectorisable exp and log (runtime/prime_math.h)
# against libm over a sweep of every fp32 exponent.
add_executable(test_prime_math ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_prime_math.c)
target_include_directories(test_prime_math PRIVATE ${PROJECT_SOURCE_DIR}/runtime)
target_link_libraries(test_prime_math PRIVATE PkgConfig::CMOCKA m)
target_compile_options(test_prime_math PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME runtime_prime_math COMMAND test_prime_math)
set_tests_properties(runtime_prime_math PROPERTIES LABELS unit TIMEOUT 60)

# Deadlines of the threads backend (tests/unit/test_runtime_deadline.c):
# waits whose peer never answers, an injected stall (PRIME_FAULT), a
# device that never returns, timeout values.
add_executable(test_runtime_deadline ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_runtime_deadline.c)
target_link_libraries(test_runtime_deadline PRIVATE prime_rt PkgConfig::CMOCKA)
target_compile_options(test_runtime_deadline PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME runtime_deadline COMMAND test_runtime_deadline)
set_tests_properties(runtime_deadline PROPERTIES LABELS unit TIMEOUT 60)

# The same with every message copied by its source's communication thread
# and waits that sleep at once (PRIME_INLINE_BYTES=0, PRIME_POLLS=0), and
# with device threads pinned to cores (PRIME_PIN=1): the defaults copy
# small messages in the thread that matches them and leave placement to
# the kernel (runtime/transport_threads.c, runtime/world_threads.c).
foreach(part world p2p collective deadline)
  add_test(NAME runtime_${part}/queued COMMAND test_runtime_${part})
  set_tests_properties(runtime_${part}/queued PROPERTIES LABELS unit TIMEOUT 60
                       ENVIRONMENT "PRIME_INLINE_BYTES=0;PRIME_POLLS=0")
endforeach()
# Collectives as rings of messages (PRIME_COLLECTIVES=ring, what the MPI
# backend runs) instead of in shared memory (runtime/collective_threads.c).
foreach(part collective deadline)
  add_test(NAME runtime_${part}/ring COMMAND test_runtime_${part})
  set_tests_properties(runtime_${part}/ring PROPERTIES LABELS unit TIMEOUT 60
                       ENVIRONMENT "PRIME_COLLECTIVES=ring")
endforeach()
foreach(part world p2p)
  add_test(NAME runtime_${part}/pinned COMMAND test_runtime_${part})
  set_tests_properties(runtime_${part}/pinned PROPERTIES LABELS unit TIMEOUT 60
                       ENVIRONMENT "PRIME_PIN=1")
endforeach()

# The host side of --dtype bf16 and f16 (runtime/pcu_host_gemm.c): the
# roundings against independent references over a sweep of fp32, and the
# narrow GEMMs against fp64 sums of the rounded operands.
add_executable(test_runtime_dtype ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_runtime_dtype.c)
target_link_libraries(test_runtime_dtype PRIVATE prime_rt_cuda_host PkgConfig::CMOCKA)
target_compile_options(test_runtime_dtype PRIVATE ${PRIMEC_WARNINGS})
add_test(NAME runtime_dtype COMMAND test_runtime_dtype)
set_tests_properties(runtime_dtype PROPERTIES LABELS unit TIMEOUT 60)
