/*
 * prime_options.c — the command line of an emitted program (see
 * prime_options.h): every numeric value validated, exit 2 on a bad one.
 */
#define _POSIX_C_SOURCE 200809L
#include "prime_options.h"

#include "prime_rt.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [--check] [--seed N] [--init fan-in|uniform] [--trace FILE] [--json FILE] "
            "[--repeat N] [--timeout SECONDS] [--weights DIR] [--weights-map FILE] "
            "[--save-grads DIR] [--list-weights]\n",
            argv0);
}

/* Longest --timeout accepted: about 31 years. */
#define TIMEOUT_MAX_S 1e9

/* A whole decimal argument of digits only, within 64 bits. */
static int parse_u64(const char *s, unsigned long long *out) {
    if (*s < '0' || *s > '9')
        return 0;
    char *end = NULL;
    errno = 0;
    *out = strtoull(s, &end, 10);
    return errno == 0 && *end == '\0';
}

/* A whole decimal number of seconds, finite, in [0, TIMEOUT_MAX_S]. */
static int parse_seconds(const char *s, double *out) {
    if ((*s < '0' || *s > '9') && *s != '.')
        return 0;
    for (const char *p = s; *p; ++p)
        if (!strchr("0123456789.eE+-", *p))
            return 0;
    char *end = NULL;
    errno = 0;
    *out = strtod(s, &end);
    return errno == 0 && *end == '\0' && end != s && isfinite(*out) && *out >= 0 &&
           *out <= TIMEOUT_MAX_S;
}

int prime_parse_options(const char *name, int argc, char **argv, Options *o) {
    memset(o, 0, sizeof *o);
    o->repeat = 1;
    o->seed = 1;
    o->timeout = PRIME_RT_DEFAULT_TIMEOUT_S;
    o->fan_in = 1;
    for (int i = 1; i < argc; ++i) {
        const char *opt = argv[i];
        int takes_value = strcmp(opt, "--seed") == 0 || strcmp(opt, "--trace") == 0 ||
                          strcmp(opt, "--json") == 0 || strcmp(opt, "--repeat") == 0 ||
                          strcmp(opt, "--timeout") == 0 || strcmp(opt, "--init") == 0 ||
                          strcmp(opt, "--weights") == 0 || strcmp(opt, "--weights-map") == 0 ||
                          strcmp(opt, "--save-grads") == 0;
        if (strcmp(opt, "--check") == 0 || strcmp(opt, "--list-weights") == 0) {
            *(strcmp(opt, "--check") == 0 ? &o->check : &o->list_weights) = 1;
            continue;
        }
        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
            usage(argv[0]);
            return 1;
        }
        if (!takes_value) {
            fprintf(stderr, "%s: unknown option '%s'\n", name, opt);
            usage(argv[0]);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: option '%s' needs a value\n", name, opt);
            usage(argv[0]);
            return 2;
        }
        const char *val = argv[++i];
        unsigned long long n = 0;
        if (strcmp(opt, "--trace") == 0 || strcmp(opt, "--json") == 0) {
            if (!*val) {
                fprintf(stderr, "%s: option '%s' needs a file name\n", name, opt);
                return 2;
            }
            *(strcmp(opt, "--trace") == 0 ? &o->trace : &o->json) = val;
        } else if (strcmp(opt, "--weights") == 0 || strcmp(opt, "--weights-map") == 0 ||
                   strcmp(opt, "--save-grads") == 0) {
            if (!*val) {
                fprintf(stderr, "%s: option '%s' needs a path\n", name, opt);
                return 2;
            }
            *(strcmp(opt, "--weights") == 0      ? &o->weights
              : strcmp(opt, "--save-grads") == 0 ? &o->save_grads
                                                 : &o->weights_map) = val;
        } else if (strcmp(opt, "--init") == 0) {
            if (strcmp(val, "fan-in") == 0 || strcmp(val, "uniform") == 0) {
                o->fan_in = strcmp(val, "fan-in") == 0;
            } else {
                fprintf(stderr, "%s: --init takes 'fan-in' or 'uniform', not '%s'\n", name, val);
                return 2;
            }
        } else if (strcmp(opt, "--seed") == 0) {
            if (!parse_u64(val, &o->seed)) {
                fprintf(stderr, "%s: --seed needs an integer from 0 to %llu, not '%s'\n", name,
                        ULLONG_MAX, val);
                return 2;
            }
        } else if (strcmp(opt, "--repeat") == 0) {
            if (!parse_u64(val, &n) || n < 1 || n > INT_MAX) {
                fprintf(stderr, "%s: --repeat needs an integer from 1 to %d, not '%s'\n", name,
                        INT_MAX, val);
                return 2;
            }
            o->repeat = (int)n;
        } else if (!parse_seconds(val, &o->timeout)) {
            fprintf(stderr,
                    "%s: --timeout needs a number of seconds from 0 (no deadline) to %g, not "
                    "'%s'\n",
                    name, TIMEOUT_MAX_S, val);
            return 2;
        }
    }
    return 0;
}

FILE *prime_open_output(const char *name, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "%s: cannot write '%s': %s\n", name, path, strerror(errno));
    return f;
}

int prime_dir_writable(const char *name, const char *dir) {
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(dir, W_OK) != 0) {
        fprintf(stderr, "%s: --save-grads needs a writable directory, not '%s'\n", name, dir);
        return 0;
    }
    return 1;
}
