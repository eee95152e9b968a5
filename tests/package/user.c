/* A program of the outside project that links the model as a library
 * (primec_add_model(... LIBRARY)) and runs it from its own main. */
#include <stdio.h>

#include "matmul_square.h"

int main(int argc, char **argv) {
    const PrimeProgram *program = prime_model_matmul_square();
    printf("user: model %s on %d devices\n", program->name, program->ndev);
    return prime_program_main(program, argc, argv);
}
