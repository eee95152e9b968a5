#!/bin/sh
# run.sh — the CMake package test (tests/package.cmake; docs/cmake.md).
#
#   run.sh BUILD SOURCE WORK GENERATOR C_COMPILER BUILD_TYPE
#
# Installs the primec of BUILD into a prefix and moves the prefix (an
# installed primec is relocatable), then, against the moved prefix:
#   1. primec --print-paths names the prefix's runtime and profiles;
#   2. `primec build` of examples/matmul_square.prime runs --check;
#   3. tests/package/CMakeLists.txt, a project outside primec, is
#      configured with find_package(primec) and built: primec_add_model
#      compiles the model ahead of time, and its test runs --check (with
#      MPI, also as TARGET mpi on 4 processes); the same model as a
#      LIBRARY runs --check from the project's own main (user.c);
#   4. after model.prime changes, the build emits and compiles it again;
#   5. the emitted C compiled with pkg-config's flags for prime_rt runs;
#   6. primec_add_model(... TARGET cuda) builds and starts (without a GPU:
#      "no CUDA device", exit 2), or, where primec has no CUDA, is refused
#      at configure time with a message.
set -u

build=$1
source=$2
work=$3
generator=$4
cc=$5
build_type=$6

fail() {
    printf 'package: %s\n' "$*" >&2
    exit 1
}
step() {
    printf '\npackage: %s\n' "$*"
}

rm -rf "$work" && mkdir -p "$work" || fail "cannot create $work"
step "cmake --install $build --prefix $work/staged, moved to $work/prefix"
cmake --install "$build" --prefix "$work/staged" >"$work/install.log" 2>&1 ||
    fail "cmake --install failed: $(cat "$work/install.log")"
mv "$work/staged" "$work/prefix" || fail "cannot move the prefix"
prefix=$work/prefix
primec=$prefix/bin/primec

step "1. $primec --print-paths"
"$primec" --print-paths | tee "$work/paths.txt" || fail "primec --print-paths failed"
grep -qx "installed: yes" "$work/paths.txt" || fail "the installed primec does not know it is installed"
grep -qx "runtime include: $prefix/bin/.*include/primec" "$work/paths.txt" ||
    fail "the installed primec does not use the prefix's headers"
grep -qx "runtime library: $prefix/bin/.*/libprime_rt.a" "$work/paths.txt" ||
    fail "the installed primec does not use the prefix's runtime"
grep -qx "profiles: $prefix/bin/.*share/primec/profiles" "$work/paths.txt" ||
    fail "the installed primec does not use the prefix's profiles"

mkdir -p "$work/src" || fail "cannot create $work/src"
cp "$source/tests/package/CMakeLists.txt" "$source/tests/package/user.c" "$work/src/" ||
    fail "cannot copy the project"
cp -r "$source/tests/package/cuda" "$work/src/" || fail "cannot copy the cuda project"
cp "$source/examples/matmul_square.prime" "$work/src/model.prime" || fail "cannot copy the model"

step "2. primec build model.prime --model matmul_square (installed primec)"
"$primec" build "$work/src/model.prime" --model matmul_square -o "$work/direct" ||
    fail "the installed primec build failed"
"$work/direct/matmul_square" --check >"$work/direct.log" 2>&1 ||
    fail "matmul_square --check failed: $(cat "$work/direct.log")"
tail -n 1 "$work/direct.log"

step "3. find_package(primec) and primec_add_model in a project outside primec"
cmake -S "$work/src" -B "$work/obj" -G "$generator" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE="$build_type" >"$work/configure.log" 2>&1 ||
    fail "configuring the project failed: $(cat "$work/configure.log")"
cmake --build "$work/obj" || fail "building the project failed"
emitted=$work/obj/primec/matmul/matmul_square.c
[ -f "$emitted" ] || fail "no emitted $emitted"
cp "$emitted" "$work/emitted-before.c"
ctest --test-dir "$work/obj" --output-on-failure -R '^matmul_check$' || fail "the project's matmul_check failed"
[ -f "$work/obj/primec/matmul_lib/matmul_square.h" ] || fail "LIBRARY: no emitted matmul_square.h"
"$work/obj/matmul_user" --check >"$work/user.log" 2>&1 ||
    fail "LIBRARY: matmul_user --check failed: $(cat "$work/user.log")"
grep -q "^user: model matmul_square on 4 devices" "$work/user.log" ||
    fail "LIBRARY: the project's main did not run: $(cat "$work/user.log")"
grep -q "^check passed" "$work/user.log" || fail "LIBRARY: no passed check: $(cat "$work/user.log")"
head -n 1 "$work/user.log"
tail -n 1 "$work/user.log"
if [ -x "$work/obj/matmul_mpi" ]; then
    # As tests/mpi.cmake runs MPI programs: Open MPI as root, more ranks
    # than cores, no CMA, no ssh; LeakSanitizer off (Open MPI's own
    # start-up allocations are never freed).
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
        OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_plm_rsh_agent= \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        ctest --test-dir "$work/obj" --output-on-failure -R '^matmul_mpi_check$' ||
        fail "the project's matmul_mpi_check (TARGET mpi, 4 processes) failed"
fi

step "4. model.prime changed (m = 96 -> m = 48): emitted and compiled again"
sed 's/m = 96/m = 48/' "$work/src/model.prime" >"$work/model.new" && mv "$work/model.new" "$work/src/model.prime" ||
    fail "cannot change the model"
grep -q "m = 48" "$work/src/model.prime" || fail "the model did not change"
cmake --build "$work/obj" >"$work/rebuild.log" 2>&1 || fail "rebuilding failed: $(cat "$work/rebuild.log")"
cat "$work/rebuild.log"
grep -q "primec: matmul_square from model.prime" "$work/rebuild.log" || fail "the model was not emitted again"
cmp -s "$emitted" "$work/emitted-before.c" && fail "the emitted C did not change"
ctest --test-dir "$work/obj" --output-on-failure -R '^matmul_check$' || fail "matmul_check failed after the change"

step "5. pkg-config prime_rt"
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig:${PKG_CONFIG_PATH:-}" pkg-config --cflags --libs prime_rt) ||
    fail "pkg-config prime_rt failed"
printf '%s\n' "$flags"
# shellcheck disable=SC2086
"$cc" -std=c11 "$emitted" -o "$work/pkgconfig-matmul" $flags || fail "compiling with pkg-config's flags failed"
"$work/pkgconfig-matmul" --check >"$work/pkgconfig.log" 2>&1 ||
    fail "the pkg-config build's --check failed: $(cat "$work/pkgconfig.log")"
tail -n 1 "$work/pkgconfig.log"

if [ -f "$prefix/lib/libprime_rt_cuda.a" ]; then
    step "6. primec_add_model(... TARGET cuda): built, and started"
    cmake -S "$work/src/cuda" -B "$work/obj-cuda" -G "$generator" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE="$build_type" >"$work/cuda.log" 2>&1 ||
        fail "configuring the TARGET cuda project failed: $(cat "$work/cuda.log")"
    cmake --build "$work/obj-cuda" >>"$work/cuda.log" 2>&1 ||
        fail "building the TARGET cuda project failed: $(cat "$work/cuda.log")"
    [ -x "$work/obj-cuda/matmul_cuda" ] || fail "no executable matmul_cuda"
    # Without a GPU the program says so and exits 2; with one, it passes.
    "$work/obj-cuda/matmul_cuda" --local --check >"$work/cuda-run.log" 2>&1
    rc=$?
    if [ $rc -eq 2 ] && grep -q "^matmul_square: no CUDA device: " "$work/cuda-run.log"; then
        grep "no CUDA device" "$work/cuda-run.log"
    elif [ $rc -eq 0 ] && grep -q "^check passed" "$work/cuda-run.log"; then
        tail -n 1 "$work/cuda-run.log"
    else
        fail "matmul_cuda --local --check: exit $rc: $(cat "$work/cuda-run.log")"
    fi
else
    step "6. primec_add_model(... TARGET cuda) is refused (primec built without CUDA)"
    if cmake -S "$work/src/cuda" -B "$work/obj-cuda" -G "$generator" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_C_COMPILER="$cc" >"$work/cuda.log" 2>&1; then
        fail "TARGET cuda was accepted"
    fi
    grep -q "TARGET cuda needs a primec built with the CUDA toolkit" "$work/cuda.log" ||
        fail "TARGET cuda refused without the message: $(cat "$work/cuda.log")"
    grep "TARGET cuda" "$work/cuda.log"
fi

printf '\npackage: ok\n'
