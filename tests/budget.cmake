# The compiler's memory budget (compiler/budget.h; label "golden"): past
# PRIMEC_MAX_MEMORY or --max-memory the compiler reports an error at the
# model it was working on and exits with 1, instead of being killed by the
# system. The --max-memory cases are goldens (tests/golden/cli/budget-*);
# here the variable, for check and for plan.
add_test(NAME budget/env-exceeded
         COMMAND $<TARGET_FILE:primec> check ${CMAKE_CURRENT_SOURCE_DIR}/golden/cli/budget.prime)
set_tests_properties(budget/env-exceeded PROPERTIES LABELS golden TIMEOUT 60
                     ENVIRONMENT "PRIMEC_MAX_MEMORY=16M"
                     PASS_REGULAR_EXPRESSION "budget.prime:4:7: error: the schedule of 'ring256' on 256 devices needs more than 16.0 MiB of memory")
add_test(NAME budget/env-bad
         COMMAND $<TARGET_FILE:primec> check ${CMAKE_CURRENT_SOURCE_DIR}/golden/cli/model.prime)
set_tests_properties(budget/env-bad PROPERTIES LABELS golden TIMEOUT 60
                     ENVIRONMENT "PRIMEC_MAX_MEMORY=lots"
                     PASS_REGULAR_EXPRESSION "primec: error: bad PRIMEC_MAX_MEMORY 'lots'")
# The exit codes: 1 past the budget, 2 for a malformed variable.
add_test(NAME budget/exit-codes
         COMMAND sh -c "PRIMEC_MAX_MEMORY=16M \"$1\" check \"$2/budget.prime\" >/dev/null 2>&1; a=$?; PRIMEC_MAX_MEMORY=lots \"$1\" check \"$2/model.prime\" >/dev/null 2>&1; b=$?; PRIMEC_MAX_MEMORY=none \"$1\" check \"$2/model.prime\" >/dev/null 2>&1; c=$?; echo \"$a $b $c\"; [ \"$a $b $c\" = '1 2 0' ]"
                 sh $<TARGET_FILE:primec> ${CMAKE_CURRENT_SOURCE_DIR}/golden/cli)
set_tests_properties(budget/exit-codes PROPERTIES LABELS golden TIMEOUT 60)
# What one phase's trial runs make and drop is held in a scratch arena
# reset after every phase (compiler/schedule.c, run_phases), so `check` of
# one OPT layer (128 heads) on a 16 x 16 square grid fits in 64 MiB; with
# the trials' memory kept to the end it needed more than 112 MiB
# (docs/program-form.md, "The square grid on 64x64: the trials' memory").
# The figure is that of a build without assertions: a Debug build's
# checks of the trials copy the whole machine for every trial
# (sched_machine_snapshot, held for the phase: more than 128 MiB for this
# run, measured), and a sanitizer build (PRIMEC_ARENA_MALLOC) is a Debug
# one; so the test is of the builds that define NDEBUG.
if(NOT PRIMEC_ARENA_MALLOC AND CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo|MinSizeRel)$")
  add_test(NAME budget/square-16x16-opt-layer
           COMMAND $<TARGET_FILE:primec> check ${CMAKE_SOURCE_DIR}/examples/opt_layer.prime
                   --model opt_square --param P=16 --param a=128 --param e=96 --max-memory 64M)
  set_tests_properties(budget/square-16x16-opt-layer PROPERTIES LABELS golden TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "opt_square: ok: 24 instances on 256 devices; 273 collectives, 3 redistributions"
                       FAIL_REGULAR_EXPRESSION "error")
endif()
