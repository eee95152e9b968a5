# `cmake --install BUILD --prefix PREFIX` (docs/cmake.md):
#
#   bin/primec, primec-calibrate[, primec-calibrate-mpi]
#   include/primec/             the runtime's public headers
#   lib/libprime_rt.a[, libprime_rt_mpi.a, libprime_rt_cuda.a]
#   lib/cmake/primec/           the CMake package: primecConfig.cmake, the
#                               exported targets primec::primec,
#                               primec::prime_rt[, primec::prime_rt_mpi,
#                               primec::prime_rt_cuda],
#                               and primec_add_model (primecModel.cmake)
#   lib/pkgconfig/prime_rt.pc[, prime_rt_mpi.pc]
#   share/primec/stdlib/        the stdlib (primec embeds it; installed to read)
#   share/primec/profiles/      the hardware profiles `--profile NAME` finds
#
# The prefix is relocatable: primec finds the runtime and the profiles
# relative to its own binary (compiler/paths.h), the package relative to
# primecConfig.cmake, and pkg-config relative to the .pc file.

include(CMakePackageConfigHelpers)

set(PRIMEC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/primec)
set(PRIMEC_RUNTIME_TARGETS prime_rt)
set(PRIMEC_PROGRAMS primec primec-calibrate)
set(PRIMEC_HAS_MPI OFF)
if(TARGET prime_rt_mpi)
  list(APPEND PRIMEC_RUNTIME_TARGETS prime_rt_mpi)
  set(PRIMEC_HAS_MPI ON)
endif()
set(PRIMEC_HAS_CUDA OFF)
if(TARGET prime_rt_cuda)
  list(APPEND PRIMEC_RUNTIME_TARGETS prime_rt_cuda)
  set(PRIMEC_HAS_CUDA ON)
  # What a CUDA program's two files include besides the common headers.
  install(FILES ${CMAKE_SOURCE_DIR}/runtime/prime_cuda.h ${CMAKE_SOURCE_DIR}/runtime/prime_cuda_math.cuh
          ${CMAKE_SOURCE_DIR}/runtime/prime_cuda_gemm.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/primec)
endif()
if(TARGET primec-calibrate-mpi)
  list(APPEND PRIMEC_PROGRAMS primec-calibrate-mpi)
endif()

install(TARGETS ${PRIMEC_PROGRAMS} EXPORT primecTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${PRIMEC_RUNTIME_TARGETS} EXPORT primecTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/runtime/prime_rt.h ${CMAKE_SOURCE_DIR}/runtime/prime_program.h
              ${CMAKE_SOURCE_DIR}/runtime/prime_sched.h ${CMAKE_SOURCE_DIR}/runtime/prime_form.h
              ${CMAKE_SOURCE_DIR}/runtime/prime_math.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/primec)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/stdlib/ DESTINATION ${CMAKE_INSTALL_DATADIR}/primec/stdlib
        FILES_MATCHING PATTERN "*.prime")
install(DIRECTORY ${CMAKE_SOURCE_DIR}/profiles/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/primec/profiles FILES_MATCHING PATTERN "*.profile")

install(EXPORT primecTargets NAMESPACE primec:: DESTINATION ${PRIMEC_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/primecConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/package/primecConfig.cmake
                              INSTALL_DESTINATION ${PRIMEC_CMAKE_DIR}
                              PATH_VARS CMAKE_INSTALL_DATADIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/primecConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/package/primecConfig.cmake
              ${CMAKE_BINARY_DIR}/package/primecConfigVersion.cmake
              ${CMAKE_SOURCE_DIR}/cmake/primecModel.cmake
        DESTINATION ${PRIMEC_CMAKE_DIR})

# pkg-config: the prefix is found from the .pc file's own directory.
file(RELATIVE_PATH PRIMEC_PC_PREFIX_REL ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig
     ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" PRIMEC_PC_PREFIX_REL "${PRIMEC_PC_PREFIX_REL}")
set(PRIMEC_PC_SANITIZE "")
if(PRIMEC_SANITIZE)
  set(PRIMEC_PC_SANITIZE "-fsanitize=address,undefined")
endif()
foreach(lib ${PRIMEC_RUNTIME_TARGETS})
  if(lib STREQUAL "prime_rt_cuda")
    continue() # CUDA programs are built by primec or primec_add_model, not by pkg-config
  endif()
  if(lib STREQUAL "prime_rt_mpi")
    set(PRIMEC_PC_DESCRIPTION
        "the runtime of programs emitted by primec, MPI backend (compile and link with mpicc)")
  else()
    set(PRIMEC_PC_DESCRIPTION "the runtime of programs emitted by primec, threads backend")
  endif()
  set(PRIMEC_PC_LIB ${lib})
  configure_file(${CMAKE_SOURCE_DIR}/cmake/prime_rt.pc.in ${CMAKE_BINARY_DIR}/package/${lib}.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/package/${lib}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
