# The language server (label "unit"): tests/lsp/*.py start `primec lsp`,
# drive it with scripted JSON-RPC sessions (lsp_client.py) and check its
# answers against the compiler's own reports; grammar.py checks the
# TextMate grammar of editors/ against the lexer's keywords.

find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "python3 not found: the language server tests are not registered")
  return()
endif()

set(PRIMEC_LSP_DIR ${CMAKE_CURRENT_SOURCE_DIR}/lsp)
set(PRIMEC_LSP_FIXED ${CMAKE_CURRENT_SOURCE_DIR}/golden/explain/square-2x2.prime)

# Diagnostics: ranges and notes as `primec check` reports them.
foreach(case unknown-partition duplicate-partition syntax-error-steps shape-mismatch double-count)
  add_test(NAME lsp/diagnostics/${case}
           COMMAND ${Python3_EXECUTABLE} ${PRIMEC_LSP_DIR}/diagnostics.py $<TARGET_FILE:primec>
                   ${CMAKE_CURRENT_SOURCE_DIR}/golden/check/${case}.prime ${PRIMEC_LSP_FIXED})
endforeach()
# Characters in UTF-16 code units after non-ASCII text on the line.
add_test(NAME lsp/diagnostics/utf16
         COMMAND ${Python3_EXECUTABLE} ${PRIMEC_LSP_DIR}/diagnostics.py $<TARGET_FILE:primec>
                 ${PRIMEC_LSP_DIR}/utf16.prime ${PRIMEC_LSP_FIXED})

# Hover: slice tables, tiles, bytes and memory as the compiler reports them.
foreach(case square-2x2 row-4 ring-4)
  add_test(NAME lsp/hover/${case}
           COMMAND ${Python3_EXECUTABLE} ${PRIMEC_LSP_DIR}/hover.py $<TARGET_FILE:primec>
                   ${CMAKE_CURRENT_SOURCE_DIR}/golden/explain/${case}.prime)
endforeach()
add_test(NAME lsp/hover/cannon
         COMMAND ${Python3_EXECUTABLE} ${PRIMEC_LSP_DIR}/hover.py $<TARGET_FILE:primec>
                 ${PRIMEC_LSP_DIR}/cannon.prime cannon)

add_test(NAME lsp/definition
         COMMAND ${Python3_EXECUTABLE} ${PRIMEC_LSP_DIR}/definition.py $<TARGET_FILE:primec>
                 ${CMAKE_SOURCE_DIR}/stdlib)
add_test(NAME lsp/completion
         COMMAND ${Python3_EXECUTABLE} ${PRIMEC_LSP_DIR}/completion.py $<TARGET_FILE:primec>
                 ${CMAKE_SOURCE_DIR}/stdlib)
# Composite operators: definition of a composite at its use and of a part
# in its body; hover answers (examples/opt_blocks.prime).
add_test(NAME lsp/composite
         COMMAND ${Python3_EXECUTABLE} ${PRIMEC_LSP_DIR}/composite.py $<TARGET_FILE:primec>
                 ${CMAKE_SOURCE_DIR}/stdlib ${CMAKE_SOURCE_DIR}/examples/opt_blocks.prime)
add_test(NAME lsp/errors COMMAND ${Python3_EXECUTABLE} ${PRIMEC_LSP_DIR}/errors.py $<TARGET_FILE:primec>)
# An internal compiler error in any pass is a diagnostic, not the end of
# the server (fault injected with PRIMEC_FAULT=ice:PASS).
add_test(NAME lsp/ice COMMAND ${Python3_EXECUTABLE} ${PRIMEC_LSP_DIR}/ice.py $<TARGET_FILE:primec>)
add_test(NAME lsp/grammar COMMAND ${Python3_EXECUTABLE} ${PRIMEC_LSP_DIR}/grammar.py ${CMAKE_SOURCE_DIR})

get_property(PRIMEC_LSP_TESTS DIRECTORY PROPERTY TESTS)
list(FILTER PRIMEC_LSP_TESTS INCLUDE REGEX "^lsp/")
set_tests_properties(${PRIMEC_LSP_TESTS} PROPERTIES LABELS unit TIMEOUT 120)
