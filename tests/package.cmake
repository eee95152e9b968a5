# The CMake package (label "run"; docs/cmake.md): this build installed
# into a prefix, and a project outside primec (tests/package/) configured
# with find_package(primec) and built against it, its model checked
# (tests/package/run.sh). It runs the install and two small builds: about
# 10 seconds.
add_test(NAME package/find-package
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/package/run.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/package ${CMAKE_GENERATOR} ${CMAKE_C_COMPILER}
                 "${CMAKE_BUILD_TYPE}")
set_tests_properties(package/find-package PROPERTIES LABELS run TIMEOUT 300)
