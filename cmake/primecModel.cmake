# primec_add_model: a model of a .prime file compiled ahead of time in the
# user's build (docs/cmake.md).
#
#   primec_add_model(NAME name FILE file.prime MODEL model
#                    [TARGET cpu|mpi|cuda] [RANKS n] [LIBRARY] [DEPENDS files...])
#
# The build runs `primec build FILE --model MODEL --target TARGET
# --emit-only` into ${CMAKE_CURRENT_BINARY_DIR}/primec/NAME whenever FILE,
# a file in DEPENDS (the files FILE imports), the stdlib or primec itself
# changes, and compiles the emitted C with the project's C compiler into
# the executable target NAME, linked to primec::prime_rt (cpu, the
# default) or primec::prime_rt_mpi (mpi). The target NAME_check runs
# `NAME --check` (the partitioned program against its dense reference,
# and the predicted bytes and memory against the runtime's counters), and
# the same command is registered as the test NAME_check. An mpi model
# runs as RANKS processes (the model's device count) under mpiexec.
#
# With LIBRARY, NAME is a static library instead (the emitted C without its
# main, `primec build --library`), whose include directory holds MODEL.h:
# it declares `const PrimeProgram *prime_model_MODEL(void)`, and the
# caller's own main runs the program with
# `prime_program_main(prime_model_MODEL(), argc, argv)` (the executable's
# options, --check included). The runtime is a public dependency, so an
# executable that links NAME needs nothing else. No NAME_check is made: the
# caller's executable is what runs.
# A cuda model (a primec built with the CUDA toolkit) is built from the
# MODEL.c and MODEL.o (nvcc's) that `primec build --target cuda` writes,
# linked to primec::prime_rt_cuda; NAME_check runs `NAME --local --check`
# (every mesh device on one GPU; without a GPU it exits 2, "no CUDA
# device").

function(primec_add_model)
  cmake_parse_arguments(PARSE_ARGV 0 arg "LIBRARY" "NAME;FILE;MODEL;TARGET;RANKS" "DEPENDS")
  foreach(required NAME FILE MODEL)
    if(NOT arg_${required})
      message(FATAL_ERROR "primec_add_model: ${required} is required "
                          "(primec_add_model(NAME n FILE f.prime MODEL m TARGET cpu|mpi))")
    endif()
  endforeach()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "primec_add_model(${arg_NAME}): unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_TARGET)
    set(arg_TARGET cpu)
  endif()
  if(arg_TARGET STREQUAL "cuda")
    if(NOT TARGET primec::prime_rt_cuda OR NOT primec_HAS_CUDA)
      message(FATAL_ERROR "primec_add_model(${arg_NAME}): TARGET cuda needs a primec built with "
                          "the CUDA toolkit (nvcc found when primec was built)")
    endif()
    if(arg_LIBRARY)
      message(FATAL_ERROR "primec_add_model(${arg_NAME}): LIBRARY is for TARGET cpu and mpi")
    endif()
    set(runtime primec::prime_rt_cuda)
  elseif(arg_TARGET STREQUAL "mpi")
    if(NOT TARGET primec::prime_rt_mpi OR NOT primec_HAS_MPI)
      message(FATAL_ERROR "primec_add_model(${arg_NAME}): TARGET mpi needs a primec built with "
                          "MPI, and MPI found in this project")
    endif()
    if(NOT arg_RANKS AND NOT arg_LIBRARY)
      message(FATAL_ERROR "primec_add_model(${arg_NAME}): TARGET mpi needs RANKS n, the model's "
                          "device count, to run its --check")
    endif()
    set(runtime primec::prime_rt_mpi)
  elseif(arg_TARGET STREQUAL "cpu")
    set(runtime primec::prime_rt)
  else()
    message(FATAL_ERROR "primec_add_model(${arg_NAME}): unknown TARGET '${arg_TARGET}' "
                        "(cpu, mpi, cuda)")
  endif()

  get_filename_component(file "${arg_FILE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  set(depends "${file}")
  foreach(dep ${arg_DEPENDS})
    get_filename_component(dep "${dep}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND depends "${dep}")
  endforeach()
  if(primec_STDLIB_DIR)
    file(GLOB stdlib "${primec_STDLIB_DIR}/*.prime")
    list(APPEND depends ${stdlib})
  endif()
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/primec/${arg_NAME}")
  set(source "${dir}/${arg_MODEL}.c")
  if(arg_LIBRARY)
    set(header "${dir}/${arg_MODEL}.h")
    set(library_flag --library)
  else()
    set(header)
    set(library_flag)
  endif()
  if(arg_TARGET STREQUAL "cuda")
    # primec writes MODEL.c and MODEL.cu and compiles the .cu with nvcc
    # (its flags, docs/cuda.md) into MODEL.o; the C part and the link are
    # the project's. (primec also links DIR/MODEL itself; NAME is built
    # here, from the same two files.)
    set(object "${dir}/${arg_MODEL}.o")
    add_custom_command(
      OUTPUT "${source}" "${object}" "${dir}/${arg_MODEL}.cu"
      COMMAND primec::primec build "${file}" --model "${arg_MODEL}" --target cuda -o "${dir}"
      DEPENDS ${depends} "$<TARGET_FILE:primec::primec>"
      COMMENT "primec: ${arg_MODEL} from ${arg_FILE} (CUDA)"
      VERBATIM)
    set_source_files_properties("${object}" PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  else()
    set(object)
    add_custom_command(
      OUTPUT "${source}" ${header}
      COMMAND primec::primec build "${file}" --model "${arg_MODEL}" --target "${arg_TARGET}"
              ${library_flag} --emit-only -o "${dir}"
      DEPENDS ${depends} "$<TARGET_FILE:primec::primec>"
      COMMENT "primec: ${arg_MODEL} from ${arg_FILE}"
      VERBATIM)
  endif()

  if(arg_LIBRARY)
    add_library(${arg_NAME} STATIC "${source}" "${header}")
    target_compile_definitions(${arg_NAME} PRIVATE PRIME_MODEL_LIBRARY)
    target_include_directories(${arg_NAME} PUBLIC "${dir}")
    target_link_libraries(${arg_NAME} PUBLIC ${runtime})
  else()
    add_executable(${arg_NAME} "${source}" ${object})
    target_link_libraries(${arg_NAME} PRIVATE ${runtime})
  endif()
  set_target_properties(${arg_NAME} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON
                                               C_EXTENSIONS OFF)
  if(arg_LIBRARY)
    return()
  endif()

  if(arg_TARGET STREQUAL "mpi")
    set(run ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${arg_RANKS} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:${arg_NAME}> ${MPIEXEC_POSTFLAGS} --check)
  elseif(arg_TARGET STREQUAL "cuda")
    # Every device of the mesh on this machine's GPU (cuda-local).
    set(run $<TARGET_FILE:${arg_NAME}> --local --check)
  else()
    set(run $<TARGET_FILE:${arg_NAME}> --check)
  endif()
  add_custom_target(${arg_NAME}_check COMMAND ${run} DEPENDS ${arg_NAME}
                    COMMENT "${arg_NAME} --check" VERBATIM)
  add_test(NAME ${arg_NAME}_check COMMAND ${run})
endfunction()
