/*
 * prime_options.h — the command line of an emitted program
 * (prime_options.c; docs/check.md, docs/timing.md, docs/weights.md):
 * parsed and validated before any work, and the output paths opened or
 * checked up front.
 */
#ifndef PRIME_OPTIONS_H
#define PRIME_OPTIONS_H

#include <stdio.h>

/* The options of an emitted program (prime_program.h). */
typedef struct Options {
    int check;
    int repeat;
    unsigned long long seed;
    double timeout; /* seconds, 0: none */
    int fan_in;     /* --init fan-in (1, the default) or uniform (0) */
    const char *trace;
    const char *json;
    const char *weights;     /* --weights DIR */
    const char *weights_map; /* --weights-map FILE */
    const char *save_grads;  /* --save-grads DIR */
    int list_weights;        /* --list-weights */
} Options;

/* 0: run with *o; 1: --help was asked for (printed); 2: a bad command
 * line (said why, after the program's name). */
int prime_parse_options(const char *name, int argc, char **argv, Options *o);

/* Opens an output file (mode "w") before the run, so that a missing
 * folder or a read-only file is reported before any work; NULL after
 * saying why. */
FILE *prime_open_output(const char *name, const char *path);

/* Whether dir is a directory this process may write in (said why when
 * not). */
int prime_dir_writable(const char *name, const char *dir);

#endif
