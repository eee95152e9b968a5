# The sources keep the project's .clang-format (label "unit"): clang-format
# must leave every C file of the compiler, the runtime, the tools and the
# unit tests as it is. Reformat with `clang-format -i` on the files it names.
file(GLOB PRIMEC_FORMATTED_SOURCES CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/compiler/*.c ${CMAKE_SOURCE_DIR}/compiler/*.h
     ${CMAKE_SOURCE_DIR}/runtime/*.c ${CMAKE_SOURCE_DIR}/runtime/*.h
     ${CMAKE_SOURCE_DIR}/tools/*.c ${CMAKE_SOURCE_DIR}/tests/unit/*.c)
list(SORT PRIMEC_FORMATTED_SOURCES)
add_test(NAME format/sources
         COMMAND ${CLANG_FORMAT_EXECUTABLE} --dry-run -Werror --style=file ${PRIMEC_FORMATTED_SOURCES})
set_tests_properties(format/sources PROPERTIES LABELS unit TIMEOUT 120)
