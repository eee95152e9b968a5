/*
 * fuzz_replay.c — runs the structure-aware fuzz target over files without
 * libFuzzer, with any C compiler: the corpus test of every build, and the
 * way to see what a crashing input is.
 *
 *   prime_fuzz_replay FILE|DIR...          compile each input's program
 *   prime_fuzz_replay --print FILE...      print each input's program
 *   prime_fuzz_replay --min-reached PCT DIR...
 *                                          fail unless PCT% of the inputs
 *                                          reach the schedule pass
 *
 * Exits 0 when every input ran (a crash or an ICE ends the process), 2 on
 * a usage or I/O error, 1 when fewer inputs than --min-reached got to the
 * schedule pass.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_model.h"

static int print_only;
static long ran, reached;

static int run_file(const char *name) {
    FILE *f = fopen(name, "rb");
    if (!f) {
        perror(name);
        return 0;
    }
    uint8_t *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            data = realloc(data, cap);
            if (!data)
                abort();
        }
        size_t n = fread(data + len, 1, cap - len, f);
        if (n == 0)
            break;
        len += n;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        perror(name);
        free(data);
        return 0;
    }
    if (print_only) {
        size_t tlen;
        char *text = fuzz_model_program(data, len, &tlen);
        printf("// %s\n%s", name, text);
        free(text);
    } else {
        reached += fuzz_model_run(data, len);
        ran++;
    }
    free(data);
    return 1;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory's regular files, in name order (so runs are reproducible). */
static int run_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return 0;
    }
    char **names = NULL;
    int n = 0, cap = 0, ok = 1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, (size_t)cap * sizeof *names);
            if (!names)
                abort();
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        if (!names[n])
            abort();
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    for (int i = 0; i < n; ++i) {
        ok &= run_file(names[i]);
        free(names[i]);
    }
    free(names);
    return ok;
}

int main(int argc, char **argv) {
    double min_reached = -1;
    int i = 1, ok = 1;
    for (; i < argc && argv[i][0] == '-'; ++i) {
        if (strcmp(argv[i], "--print") == 0) {
            print_only = 1;
        } else if (strcmp(argv[i], "--min-reached") == 0 && i + 1 < argc) {
            char *end;
            min_reached = strtod(argv[++i], &end);
            if (*end || min_reached < 0 || min_reached > 100) {
                fprintf(stderr, "prime_fuzz_replay: --min-reached takes a percentage\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: prime_fuzz_replay [--print] [--min-reached PCT] FILE|DIR...\n");
            return 2;
        }
    }
    if (i == argc) {
        fprintf(stderr, "usage: prime_fuzz_replay [--print] [--min-reached PCT] FILE|DIR...\n");
        return 2;
    }
    fuzz_model_init();
    for (; i < argc; ++i) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
            ok &= run_dir(argv[i]);
        else
            ok &= run_file(argv[i]);
    }
    if (!ok)
        return 2;
    if (!print_only) {
        printf("prime_fuzz_replay: %ld inputs, %ld reached the schedule pass\n", ran, reached);
        if (min_reached >= 0 && ran > 0 && 100.0 * (double)reached / (double)ran < min_reached) {
            fprintf(stderr, "prime_fuzz_replay: fewer than %.0f%% of the inputs reached schedule\n",
                    min_reached);
            return 1;
        }
    }
    return 0;
}
