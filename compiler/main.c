/*
 * main.c — the primec command line.
 *
 *   primec check FILE                 diagnostics only
 *   primec explain FILE [--json]      phases, steps, moves, collectives, memory
 *   primec explain FILE --svg DIR     the same as pictures (svg.h)
 *   primec build FILE --target cpu -o DIR
 *                                     emit C, compile it against the runtime
 *   primec import CONFIG.json         a Hugging Face config as a model (import_hf.h)
 *   primec lsp                        a language server on stdio (lsp.c)
 *
 * Exit codes: 0 success, 1 errors in the input, 2 usage or I/O errors,
 * 3 internal errors (including a C compiler rejecting emitted code).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "budget.h"
#include "cost_cli.h"
#include "emit_cuda.h"
#include "explain.h"
#include "format.h"
#include "import_hf.h"
#include "lsp.h"
#include "paths.h"
#include "pipeline.h"
#include "plan_cli.h"
#include "svg.h"

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2, EXIT_INTERNAL = 3 };

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: primec COMMAND FILE [options]\n"
        "\n"
        "commands:\n"
        "  check FILE             check a .prime file; print diagnostics only\n"
        "  explain FILE           per phase and step: tiles, shifts, collectives, bytes, memory\n"
        "  build FILE             emit a program and compile it\n"
        "  plan FILE              choose partitions for --devices N on --profile P (see "
        "docs/planner.md)\n"
        "  calibrate              measure this machine and write a profile (see "
        "docs/cost-model.md)\n"
        "  cost FILE              predicted time per phase and step on --profile P\n"
        "  import CONFIG.json     a Hugging Face config (OPT, Llama, BLOOM) as a .prime model "
        "(see docs/import.md)\n"
        "  lsp                    a language server on stdin/stdout (see docs/lsp.md)\n"
        "\n"
        "options:\n"
        "  --model NAME           only this model or run (default: every model and run in FILE)\n"
        "  --param NAME=VALUE     a value for a parameter or mesh size of the model (repeatable)\n"
        "  --json                 explain: write JSON instead of text\n"
        "  --ranks N|all          explain: list per-device detail for ranks 0..N-1 (default 16;\n"
        "                         0 on meshes of more than 64 devices)\n"
        "  --svg DIR              explain: write SVG pictures of every phase and a timeline\n"
        "                         (on --profile P, default v100) into DIR (see docs/svg.md)\n"
        "  --target cpu|mpi|cuda  build: the backend (cpu: a thread per device; mpi: an MPI "
        "process each;\n"
        "                         cuda: every device on a GPU, kernels by nvcc, see docs/cuda.md)\n"
        "  --dtype f32|bf16|f16   build --target cuda: the GEMMs' A and B operand type, fp32\n"
        "                         accumulation and output either way (default f32; docs/cuda.md)\n"
        "  -o DIR                 build: output directory (default: .)\n"
        "  --emit-only            build: write the C (and .cu) file but do not compile it\n"
        "  --no-fuse              build: no kernels fused across instances (see docs/kernels.md)\n"
        "  --library              build: DIR/libM.a and DIR/M.h (the program without main:\n"
        "                         prime_program_main(prime_model_M(), argc, argv) runs it)\n"
        "  --cc CC                build: the C compiler (default: %s; cuda: nvcc)\n"
        "  --cflags FLAGS         build: more flags for the C compiler, after primec's own, so\n"
        "                         that -O1 or -g there wins (default: PRIMEC_CFLAGS, else none)\n"
        "  --dump-after=PASS      print the IR after PASS and stop (%s)\n"
        "  --max-memory BYTES     stop with an error past BYTES of the compiler's memory\n"
        "                         (8G, 512M, none; default: PRIMEC_MAX_MEMORY, else half of\n"
        "                         this machine's memory)\n"
        "  --help                 this text\n"
        "  --version              the version\n"
        "  --print-paths          where primec finds the runtime and the profiles\n"
        "\n"
        "exit codes: 0 ok, 1 errors in the input, 2 usage or I/O error, 3 internal error\n",
        PRIMEC_CC, pipeline_pass_list());
}

/* mkdir -p */
static int make_dirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return 0;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; ++i) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return 0;
            buf[i] = c;
        }
    }
    return 1;
}

static int write_file(const char *path, const char *text, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    int ok = fwrite(text, 1, len, f) == len;
    ok &= fclose(f) == 0;
    return ok;
}

/* Refuses an input that is not a regular file (a directory, a device such
 * as /dev/zero, a FIFO) before any work, with a clearer message than the
 * loader's errno. A file that does not exist is left to the loader. */
static int input_ok(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "primec: error: cannot open '%s': %s\n", path,
                S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
        return 0;
    }
    return 1;
}

/* Flushes stdout; reports and returns 0 if anything written to it was
 * lost. */
static int stdout_ok(void) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 1;
    fprintf(stderr, "primec: error: cannot write the output: %s\n",
            errno ? strerror(errno) : "write error");
    return 0;
}

/* What `build --target` compiles with and links against: the same
 * emitted C for every target. mpi uses the MPI compiler wrapper, which
 * adds MPI's own flags, and exists only when primec was built with MPI.
 * The runtime's headers and libraries are the installed ones or the build
 * tree's (paths.h). */
typedef enum BuildLib { LIB_RT, LIB_RT_MPI, LIB_RT_CUDA } BuildLib;

typedef struct BuildTarget {
    const char *name, *cc, *link;
    BuildLib lib; /* which runtime library it links */
} BuildTarget;

/* cuda: the C part with the C compiler, linked with the .cu's object (nvcc
 * compiles it, build_cuda), prime_rt_cuda, cuBLAS and the CUDA runtime;
 * there when primec was built with nvcc. */
static const BuildTarget build_targets[] = {
    {"cpu", PRIMEC_CC, PRIMEC_RUNTIME_LINK, LIB_RT},
#ifdef PRIMEC_RUNTIME_MPI_LIB
    {"mpi", PRIMEC_MPICC, PRIMEC_RUNTIME_MPI_LINK, LIB_RT_MPI},
#endif
#ifdef PRIMEC_RUNTIME_CUDA_LIB
    {"cuda", PRIMEC_CC, PRIMEC_RUNTIME_CUDA_LINK, LIB_RT_CUDA},
#endif
};

static const BuildTarget *build_target(const char *name) {
    for (size_t i = 0; i < sizeof build_targets / sizeof build_targets[0]; ++i)
        if (strcmp(build_targets[i].name, name) == 0)
            return &build_targets[i];
    return NULL;
}

/* What the emitted C is compiled with. None of these flags changes a
 * result: no reassociation, no FMA contraction, no fast-math.
 * -fno-math-errno and -fno-trapping-math say that errno and floating-point
 * exceptions are never looked at, which lets the loop nests' selects and
 * sqrt vectorise; -march=native gives them the building machine's vector
 * width (the program runs on machines with its instruction set; see
 * docs/kernels.md). */
#define PRIMEC_KERNEL_CFLAGS                                                                       \
    "-O3 -march=native -ffp-contract=off -fno-math-errno -fno-trapping-math"

/* Compiles src (and links link_obj, when not NULL) into the executable
 * out; or, given lib_obj, src into the object lib_obj and the static
 * library out (an archive of lib_obj, without main). */
static int run_cc(const BuildTarget *t, const char *cc, const char *cflags, const char *src,
                  const char *link_obj, const char *out, const char *lib_obj) {
    const PrimecPaths *paths = primec_paths();
    const char *lib = t->lib == LIB_RT_MPI    ? paths->runtime_mpi_lib
                      : t->lib == LIB_RT_CUDA ? paths->runtime_cuda_lib
                                              : paths->runtime_lib;
    size_t n = strlen(cc) + strlen(src) + 3 * strlen(out) + strlen(paths->runtime_include) +
               strlen(lib) + strlen(t->link) + strlen(PRIMEC_RUNTIME_CFLAGS) + strlen(cflags) +
               (link_obj ? strlen(link_obj) : 0) + (lib_obj ? 2 * strlen(lib_obj) : 0) + 256;
    char *cmd = malloc(n);
    if (!cmd)
        return 0;
    if (lib_obj)
        snprintf(cmd, n,
                 "%s -std=c11 " PRIMEC_KERNEL_CFLAGS
                 " -Wall -Wextra -Werror %s %s -DPRIME_MODEL_LIBRARY -I'%s' -c '%s' -o '%s'"
                 " && rm -f '%s' && ar rcs '%s' '%s'",
                 cc, PRIMEC_RUNTIME_CFLAGS, cflags, paths->runtime_include, src, lib_obj, out, out,
                 lib_obj);
    else
        snprintf(cmd, n,
                 "%s -std=c11 " PRIMEC_KERNEL_CFLAGS
                 " -Wall -Wextra -Werror %s %s -I'%s' '%s' %s%s%s -o '%s' '%s' %s",
                 cc, PRIMEC_RUNTIME_CFLAGS, cflags, paths->runtime_include, src,
                 link_obj ? "'" : "", link_obj ? link_obj : "", link_obj ? "'" : "", out, lib,
                 t->link);
    int status = system(cmd);
    free(cmd);
    return status == 0;
}

/* build --library: DIR/M.h, declaring the model's program descriptor. */
static int write_model_header(const char *path, const char *model) {
    FILE *f = fopen(path, "w");
    if (!f)
        return 0;
    fprintf(f,
            "/* %s.h: the model %s compiled by primec as a library (primec build --library).\n"
            " * Link lib%s.a and the runtime (prime_rt); then\n"
            " *     prime_program_main(prime_model_%s(), argc, argv)\n"
            " * runs it as its executable would, with the same options (prime_program.h). */\n"
            "#ifndef PRIME_MODEL_%s_H\n#define PRIME_MODEL_%s_H\n\n"
            "#include \"prime_program.h\"\n\n"
            "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
            "const PrimeProgram *prime_model_%s(void);\n\n"
            "#ifdef __cplusplus\n}\n#endif\n\n#endif\n",
            model, model, model, model, model, model, model);
    return fclose(f) == 0;
}

/* build --target cuda, before the C part: DIR/M.cu, and with nvcc (no
 * --emit-only) its object DIR/M.o, which *obj names then. */
static int build_cuda(Compilation *c, const Schedule *s, const char *outdir, const char *nvcc,
                      const char **obj) {
    size_t len;
    char *raw = emit_cuda_program(s, &c->sources, c->input ? c->input : "<none>", &len);
    const char *err = NULL;
    char *text = format_c(raw, len, &len, &err);
    free(raw);
    if (!text) {
        fprintf(stderr, "primec: error: %s\n", err);
        return EXIT_INTERNAL;
    }
    char *src = arena_printf(c->arena, "%s/%s.cu", outdir, s->model->name);
    *obj = nvcc ? arena_printf(c->arena, "%s/%s.o", outdir, s->model->name) : NULL;
    int rc = EXIT_OK;
    if (!write_file(src, text, len)) {
        fprintf(stderr, "primec: error: cannot write '%s': %s\n", src, strerror(errno));
        rc = EXIT_USAGE;
    } else if (nvcc && !cuda_compile(nvcc, primec_paths()->runtime_include, src, *obj)) {
        fprintf(stderr, "primec: internal error: nvcc rejected '%s'\n", src);
        rc = EXIT_INTERNAL;
    } else if (!nvcc) {
        printf("%s\n", src);
    }
    free(text);
    return rc;
}

/* --dtype NAME: f32, bf16 or f16 (GEMM_DTYPE_*); else a message and 0. */
static int parse_dtype(const char *name, int *out) {
    static const char *const names[] = {"f32", "bf16", "f16"};
    for (int i = 0; i < 3; ++i)
        if (strcmp(name, names[i]) == 0) {
            *out = i;
            return 1;
        }
    fprintf(stderr, "primec: error: --dtype takes f32, bf16 or f16, not '%s'\n", name);
    return 0;
}

/* `primec --print-paths`: where this primec finds the runtime and the
 * profiles (installed, relative to its binary, or in its build tree). */
static void print_paths(void) {
    const PrimecPaths *p = primec_paths();
    printf("installed: %s\n", p->installed ? "yes" : "no (the build tree)");
    printf("runtime include: %s\n", p->runtime_include);
    printf("runtime library: %s\n", p->runtime_lib);
    printf("mpi runtime library: %s\n", p->runtime_mpi_lib ? p->runtime_mpi_lib : "(none)");
    printf("cuda runtime library: %s\n", p->runtime_cuda_lib ? p->runtime_cuda_lib : "(none)");
    printf("profiles: %s\n", p->profile_dir);
}

/* `primec calibrate ...` runs primec-calibrate, next to this binary: the
 * compiler itself does not link the runtime or BLAS. */
static int run_calibrate(char **argv) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 32);
    if (n > 0)
        self[n] = '\0';
    char *slash = n > 0 ? strrchr(self, '/') : NULL;
    if (!slash) {
        fprintf(stderr, "primec: error: cannot find the directory of the primec binary\n");
        return EXIT_USAGE;
    }
    strcpy(slash + 1, "primec-calibrate");
    argv[0] = self;
    execv(self, argv);
    fprintf(stderr, "primec: error: cannot run '%s': %s\n", self, strerror(errno));
    return EXIT_USAGE;
}

int main(int argc, char **argv) {
    const char *command = NULL, *file = NULL, *model = NULL, *dump_after = NULL;
    const char *target = "cpu", *outdir = ".", *cc = PRIMEC_CC, *dtype = NULL;
    const char *cflags = getenv("PRIMEC_CFLAGS") ? getenv("PRIMEC_CFLAGS") : "";
    int json = 0, emit_only = 0, library = 0, no_fuse = 0;
    int ranks = EXPLAIN_RANKS_DEFAULT; /* explain: ranks listed in detail; -1: every rank */
    const char *svg_dir = NULL, *profile = "v100"; /* explain --svg, --profile */
    ParamOverride params[64];
    int nparams = 0;

    /* The memory budget (budget.h), for every command but the language
     * server's. */
    if (!(argc > 1 && strcmp(argv[1], "lsp") == 0) && !budget_init_from_env())
        return EXIT_USAGE;
    if (argc > 1 && strcmp(argv[1], "plan") == 0)
        return plan_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "calibrate") == 0)
        return run_calibrate(argv + 1);
    if (argc > 1 && strcmp(argv[1], "cost") == 0)
        return cost_command_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "import") == 0)
        return import_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "lsp") == 0)
        return lsp_main(argc - 1, argv + 1);
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return EXIT_OK;
        } else if (strcmp(a, "--version") == 0) {
            printf("primec %s\n", PRIMEC_VERSION);
            return EXIT_OK;
        } else if (strcmp(a, "--print-paths") == 0) {
            print_paths();
            return stdout_ok() ? EXIT_OK : EXIT_USAGE;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--emit-only") == 0) {
            emit_only = 1;
        } else if (strcmp(a, "--library") == 0) {
            library = 1;
        } else if (strcmp(a, "--no-fuse") == 0) {
            no_fuse = 1;
        } else if (strncmp(a, "--dump-after=", 13) == 0) {
            dump_after = a + 13;
        } else if (strcmp(a, "--param") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "primec: error: option '%s' needs a value\n", a);
                return EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (nparams == (int)(sizeof params / sizeof params[0]) ||
                !resolve_parse_override(v, &params[nparams])) {
                fprintf(stderr,
                        "primec: error: --param takes NAME=VALUE (an integer value; at most %d), "
                        "not '%s'\n",
                        (int)(sizeof params / sizeof params[0]), v);
                return EXIT_USAGE;
            }
            nparams++;
        } else if (strcmp(a, "--max-memory") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "primec: error: option '%s' needs a value\n", a);
                return EXIT_USAGE;
            }
            const char *v = argv[++i];
            int ok = 1;
            long b = strcmp(v, "none") == 0 ? 0 : budget_parse_bytes(v, &ok);
            if (!ok) {
                fprintf(stderr,
                        "primec: error: --max-memory takes a byte count such as 8G, 512M, "
                        "2000000000, or none, not '%s'\n",
                        v);
                return EXIT_USAGE;
            }
            budget_set((size_t)b);
        } else if (strcmp(a, "--ranks") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "primec: error: option '%s' needs a value\n", a);
                return EXIT_USAGE;
            }
            const char *v = argv[++i];
            char *end = NULL;
            long n = strtol(v, &end, 10);
            if (strcmp(v, "all") == 0) {
                ranks = -1;
            } else if (!*v || *end || n < 0 || n > (1L << 20)) {
                fprintf(stderr,
                        "primec: error: --ranks takes a number of ranks from 0 to 1048576 or "
                        "'all', not '%s'\n",
                        v);
                return EXIT_USAGE;
            } else {
                ranks = (int)n;
            }
        } else if (strcmp(a, "--model") == 0 || strcmp(a, "--target") == 0 ||
                   strcmp(a, "-o") == 0 || strcmp(a, "--cc") == 0 || strcmp(a, "--svg") == 0 ||
                   strcmp(a, "--profile") == 0 || strcmp(a, "--cflags") == 0 ||
                   strcmp(a, "--dtype") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "primec: error: option '%s' needs a value\n", a);
                return EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (strcmp(a, "--model") == 0)
                model = v;
            else if (strcmp(a, "--target") == 0)
                target = v;
            else if (strcmp(a, "-o") == 0)
                outdir = v;
            else if (strcmp(a, "--svg") == 0)
                svg_dir = v;
            else if (strcmp(a, "--profile") == 0)
                profile = v;
            else if (strcmp(a, "--cflags") == 0)
                cflags = v;
            else if (strcmp(a, "--dtype") == 0)
                dtype = v;
            else
                cc = v;
        } else if (a[0] == '-') {
            fprintf(stderr, "primec: error: unknown option '%s'\n", a);
            usage(stderr);
            return EXIT_USAGE;
        } else if (!command) {
            command = a;
        } else if (!file) {
            file = a;
        } else {
            fprintf(stderr, "primec: error: unexpected argument '%s'\n", a);
            return EXIT_USAGE;
        }
    }
    if (!command || !file) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(command, "check") && strcmp(command, "explain") && strcmp(command, "build")) {
        fprintf(stderr, "primec: error: unknown command '%s'\n", command);
        usage(stderr);
        return EXIT_USAGE;
    }
    if (dump_after && !pipeline_has_pass(dump_after)) {
        fprintf(stderr, "primec: error: unknown pass '%s' (passes: %s)\n", dump_after,
                pipeline_pass_list());
        return EXIT_USAGE;
    }
    const BuildTarget *tgt = build_target(target);
    const int cuda = strcmp(target, "cuda") == 0;
    int gemm_dtype = GEMM_DTYPE_F32;
    if (dtype && !parse_dtype(dtype, &gemm_dtype))
        return EXIT_USAGE;
    if (dtype && strcmp(command, "build")) {
        fprintf(stderr, "primec: error: --dtype is an option of build --target cuda, not of %s\n",
                command);
        return EXIT_USAGE;
    }
    if (dtype && !cuda) {
        fprintf(stderr,
                "primec: error: --dtype is an option of build --target cuda: the %s target's "
                "GEMMs are fp32\n",
                target);
        return EXIT_USAGE;
    }
    const char *nvcc = NULL;
    if (strcmp(command, "build") == 0 && cuda && !emit_only) {
        nvcc = cuda_find_nvcc(strcmp(cc, PRIMEC_CC) ? cc : NULL);
        if (!nvcc) {
            fprintf(stderr,
                    "primec: error: target 'cuda' needs nvcc, the CUDA compiler: %s not "
                    "found%s (--emit-only writes the .cu alone)\n",
                    strcmp(cc, PRIMEC_CC) ? cc : "nvcc",
                    strcmp(cc, PRIMEC_CC) ? "" : " on PATH nor in /usr/local/cuda/bin");
            return EXIT_USAGE;
        }
    }
    if (strcmp(command, "build") == 0 && cuda && !emit_only && !tgt) {
        fprintf(stderr, "primec: error: target 'cuda' needs a primec built with the CUDA toolkit "
                        "(its runtime, prime_rt_cuda, was left out; --emit-only writes the "
                        "sources alone)\n");
        return EXIT_USAGE;
    }
    if (strcmp(command, "build") == 0 && !tgt && !cuda) {
        if (strcmp(target, "mpi") == 0)
            fprintf(stderr, "primec: error: target 'mpi' needs a primec built with MPI\n");
        else
            fprintf(stderr, "primec: error: unknown target '%s' (targets: cpu, mpi, cuda)\n",
                    target);
        return EXIT_USAGE;
    }
    if (tgt && strcmp(cc, PRIMEC_CC) == 0)
        cc = tgt->cc; /* no --cc: the target's own compiler */
    if (library && (strcmp(command, "build") || cuda)) {
        fprintf(stderr, "primec: error: --library is an option of build for the cpu and mpi "
                        "targets\n");
        return EXIT_USAGE;
    }
    if (cuda)
        cc = PRIMEC_CC; /* --cc named nvcc; the C part is the C compiler's */

    if (!input_ok(file))
        return EXIT_USAGE;
    /* explain --svg: the folder and the profile are checked before the work. */
    Profile svg_profile;
    if (svg_dir && strcmp(command, "explain")) {
        fprintf(stderr, "primec: error: --svg is an option of explain (and of plan)\n");
        return EXIT_USAGE;
    }
    char perr[512];
    if (svg_dir && !profile_load(profile, &svg_profile, perr, sizeof perr)) {
        fprintf(stderr, "primec: error: %s\n", perr);
        return EXIT_USAGE;
    }
    if (svg_dir && !svg_prepare_dir(svg_dir))
        return EXIT_USAGE;

    Compilation c;
    compilation_init(&c, file, stderr);
    c.model_name = model;
    c.nparams = nparams;
    c.params = params;
    c.dump_after = dump_after;
    c.predict_only = strcmp(command, "check") == 0 && !dump_after;
    c.summary = strcmp(command, "explain") == 0 && !dump_after && !svg_dir;
    c.no_fuse = no_fuse;
    c.gemm_dtype = gemm_dtype;
    if (cuda)
        c.emit_hooks = &emit_cuda_c_hooks;
    const char *last = strcmp(command, "build") == 0 || dump_after ? "emit" : "schedule";
    int ok = pipeline_run(&c, last);
    int rc = EXIT_OK;
    if (!ok) {
        diag_finish(&c.sink);
        rc = c.io_error ? EXIT_USAGE : EXIT_INPUT;
        compilation_free(&c);
        return rc;
    }
    if (c.dumped) {
        compilation_free(&c);
        return stdout_ok() ? EXIT_OK : EXIT_USAGE;
    }
    if (strcmp(command, "check") == 0) {
        for (int i = 0; i < c.schedules.count; ++i) {
            const Schedule *s = c.schedules.items[i];
            long coll = 0, bytes[PRIME_BYTES_KIND_COUNT] = {0};
            long redist = 0;
            for (int k = 0; k < s->phases.count; ++k) {
                const PhaseSched *ph = s->phases.items[k];
                coll += ph->collectives.count;
                redist += ph->boundary.count;
            }
            for (int kind = 0; kind < PRIME_BYTES_KIND_COUNT; ++kind)
                for (int d = 0; d < s->model->mesh.ndev; ++d)
                    bytes[kind] += s->pred_bytes[kind][d];
            printf("%s: ok: %d instance%s on %d devices; %ld collective%s, %ld redistribution%s; "
                   "%ld shift bytes, %ld collective bytes, %ld redistribution bytes\n",
                   s->model->name, s->model->ninstances, s->model->ninstances == 1 ? "" : "s",
                   s->model->mesh.ndev, coll, coll == 1 ? "" : "s", redist, redist == 1 ? "" : "s",
                   bytes[0], bytes[1], bytes[2]);
        }
        if (c.schedules.count == 0)
            printf("%s: ok (no model)\n", file);
    } else if (strcmp(command, "explain") == 0) {
        for (int i = 0; i < c.schedules.count; ++i) {
            if (svg_dir) {
                if (!svg_explain(c.schedules.items[i], c.arena, svg_dir, &svg_profile, stdout))
                    rc = EXIT_USAGE;
            } else if (json)
                explain_json(c.schedules.items[i], c.arena, stdout, ranks);
            else
                explain_text(c.schedules.items[i], c.arena, stdout, ranks);
        }
    } else {
        if (!make_dirs(outdir)) {
            fprintf(stderr, "primec: error: cannot create '%s': %s\n", outdir, strerror(errno));
            compilation_free(&c);
            return EXIT_USAGE;
        }
        for (int i = 0; i < c.emitted.count && rc == EXIT_OK; ++i) {
            const Schedule *s = c.schedules.items[i];
            const char *text = c.emitted.items[i];
            const char *err = NULL, *obj = NULL;
            if (cuda && (rc = build_cuda(&c, s, outdir, nvcc, &obj)) != EXIT_OK)
                break;
            size_t len;
            char *formatted = format_c(text, strlen(text), &len, &err);
            if (!formatted) {
                fprintf(stderr, "primec: error: %s\n", err);
                rc = EXIT_INTERNAL;
                break;
            }
            char *src = arena_printf(c.arena, "%s/%s.c", outdir, s->model->name);
            char *exe = library ? arena_printf(c.arena, "%s/lib%s.a", outdir, s->model->name)
                                : arena_printf(c.arena, "%s/%s", outdir, s->model->name);
            char *hdr = arena_printf(c.arena, "%s/%s.h", outdir, s->model->name);
            char *lib_obj =
                library ? arena_printf(c.arena, "%s/%s.o", outdir, s->model->name) : NULL;
            if (!write_file(src, formatted, len)) {
                fprintf(stderr, "primec: error: cannot write '%s': %s\n", src, strerror(errno));
                rc = EXIT_USAGE;
            } else if (library && !write_model_header(hdr, s->model->name)) {
                fprintf(stderr, "primec: error: cannot write '%s': %s\n", hdr, strerror(errno));
                rc = EXIT_USAGE;
            } else if (!emit_only && !run_cc(tgt, cc, cflags, src, obj, exe, lib_obj)) {
                fprintf(stderr, "primec: internal error: the C compiler rejected '%s'\n", src);
                rc = EXIT_INTERNAL;
            } else {
                printf("%s\n", emit_only ? src : exe);
            }
            free(formatted);
        }
    }
    /* Output that could not be written (a full disk, a closed pipe) is an
     * I/O error, not a success. */
    if (!stdout_ok() && rc == EXIT_OK)
        rc = EXIT_USAGE;
    compilation_free(&c);
    return rc;
}
