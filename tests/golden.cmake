# Golden tests (label "golden"): tests/golden/<stage>/<case>.prime next to
# one expected file (.err, .explain, .c, .dump; cli cases are <case>.args
# next to <case>.out; gen cases are <case>.sh, a script that prints the
# program, next to <case>.err). golden/golden.sh runs one case and prints a unified
# diff on a mismatch; `cmake --build BUILD --target update-golden`
# rewrites every expected file for review with `git diff`.

set(PRIMEC_GOLDEN_DIR ${CMAKE_CURRENT_SOURCE_DIR}/golden)
set(PRIMEC_GOLDEN_WORK ${CMAKE_CURRENT_BINARY_DIR}/golden)
set(PRIMEC_GOLDEN_SH ${PRIMEC_GOLDEN_DIR}/golden.sh)

foreach(stage check cli explain dump emit gen)
  if(stage STREQUAL "cli")
    set(pattern ${PRIMEC_GOLDEN_DIR}/${stage}/*.args)
  elseif(stage STREQUAL "gen")
    set(pattern ${PRIMEC_GOLDEN_DIR}/${stage}/*.sh)
  else()
    set(pattern ${PRIMEC_GOLDEN_DIR}/${stage}/*.prime)
  endif()
  # CONFIGURE_DEPENDS: a new case file registers its test on the next build.
  file(GLOB cases CONFIGURE_DEPENDS ${pattern})
  list(SORT cases)
  foreach(input ${cases})
    get_filename_component(name ${input} NAME_WLE)
    add_test(NAME golden/${stage}/${name}
             COMMAND sh ${PRIMEC_GOLDEN_SH} check $<TARGET_FILE:primec> ${PRIMEC_GOLDEN_DIR}
                     ${PRIMEC_GOLDEN_WORK} ${stage} ${name})
    # The largest meshes (resource-*: 3 to 4 s of processor time in
    # Release) take 15 to 20 s under ASan, 50 s on loaded cores.
    set(timeout 60)
    if(PRIMEC_SANITIZE AND name MATCHES "^resource-")
      set(timeout 300)
    endif()
    set_tests_properties(golden/${stage}/${name} PROPERTIES LABELS golden TIMEOUT ${timeout})
  endforeach()
endforeach()

add_custom_target(update-golden
  COMMAND sh ${PRIMEC_GOLDEN_SH} update-all $<TARGET_FILE:primec> ${PRIMEC_GOLDEN_DIR}
          ${PRIMEC_GOLDEN_WORK}
  DEPENDS primec
  COMMENT "rewriting tests/golden expected files (review them with git diff)"
  VERBATIM)

# Write errors (a full disk) are I/O errors: exit 2 and a message, never a
# silent success. Their output is the command's whole output, so they are
# checked by status and message rather than as golden files.
foreach(case "explain;model.prime;>/dev/full;cannot write the output"
             "check;model.prime;>/dev/full;cannot write the output"
             "plan;model.prime -o /dev/full;>/dev/null;cannot write '/dev/full'")
  list(GET case 0 command)
  list(GET case 1 args)
  list(GET case 2 redirect)
  list(GET case 3 message)
  string(REPLACE "model.prime -o /dev/full" "output" what "${args}")
  string(REPLACE "model.prime" "stdout" what "${what}")
  add_test(NAME golden/cli/write-error-${command}-${what}
           COMMAND sh -c "cd '${PRIMEC_GOLDEN_DIR}/cli' && \"$1\" ${command} ${args} ${redirect} 2>\"$2\"; rc=$?; cat \"$2\"; [ $rc -eq 2 ] && grep -q \"${message}\" \"$2\""
                   sh $<TARGET_FILE:primec> ${PRIMEC_GOLDEN_WORK}/write-error-${command}.stderr)
  set_tests_properties(golden/cli/write-error-${command}-${what} PROPERTIES LABELS golden TIMEOUT 60)
endforeach()
