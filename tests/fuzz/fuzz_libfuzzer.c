/*
 * fuzz_libfuzzer.c — libFuzzer's entry points for the structure-aware
 * target (fuzz_model.h). Built only with clang (-fsanitize=fuzzer).
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_model_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_model_run(data, size);
    return 0;
}
