/*
 * calibrate_mpi.c — starting primec-calibrate-mpi under mpiexec and
 * reading its samples (calibrate_mpi.h).
 *
 * Children are started with fork and execv (no shell, so paths need no
 * quoting), standard input from /dev/null (mpiexec would otherwise
 * forward primec's to rank 0), standard output into a pipe that is read
 * to its end, standard error shared with primec so that MPI's own
 * messages reach the user.
 */
#define _POSIX_C_SOURCE 200809L
#include "calibrate_mpi.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PATH_LEN 4096

/* An executable regular file? */
static int is_executable(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* `name` as a path (when it has a '/') or looked up in PATH, as execvp
 * would. Returns 1 with the path in buf. */
static int find_program(const char *name, char *buf, size_t len) {
    if (strchr(name, '/')) {
        if (strlen(name) >= len || !is_executable(name))
            return 0;
        strcpy(buf, name);
        return 1;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *colon = strchr(p, ':');
        size_t dl = colon ? (size_t)(colon - p) : strlen(p);
        int n = snprintf(buf, len, "%.*s%s%s", (int)dl, p, dl ? "/" : "", name);
        if (n > 0 && (size_t)n < len && is_executable(buf))
            return 1;
        if (!colon)
            return 0;
        p = colon + 1;
    }
}

/* The directory of the running binary. */
static int self_dir(char *buf, size_t len) {
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n <= 0 || (size_t)n >= len - 1)
        return 0;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    return 1;
}

/* Runs argv[0] (a path) with argv, its standard output collected into
 * *out (malloc'd, NUL-terminated). Returns the wait status, or -1 with a
 * message in err when it could not be started. */
static int run_capture(char *const argv[], char **out, char *err, size_t errlen) {
    *out = NULL;
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(err, errlen, "cannot create a pipe: %s", strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "cannot start '%s': %s", argv[0], strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0)
            dup2(null, STDIN_FILENO);
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        execv(argv[0], argv);
        static const char msg[] = "primec: error: calibrate: execv failed\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(127);
    }
    close(fd[1]);
    size_t len = 0, cap = 4096;
    char *text = malloc(cap);
    int ok = text != NULL;
    for (;;) {
        char chunk[4096];
        ssize_t n = read(fd[0], chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (ok && len + (size_t)n + 1 > cap) {
            while (len + (size_t)n + 1 > cap)
                cap *= 2;
            char *grown = realloc(text, cap);
            if (grown)
                text = grown;
            else
                ok = 0;
        }
        if (ok) {
            memcpy(text + len, chunk, (size_t)n);
            len += (size_t)n;
        }
    }
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            status = -1;
            break;
        }
    }
    if (!ok) {
        free(text);
        snprintf(err, errlen, "out of memory reading the output of '%s'", argv[0]);
        return -1;
    }
    text[len] = '\0';
    *out = text;
    return status;
}

/* Open MPI's mpiexec (it needs --oversubscribe to start more processes
 * than cores, and --allow-run-as-root under root)? */
static int is_open_mpi(const char *mpiexec) {
    char *argv[] = {(char *)mpiexec, "--version", NULL};
    char *text = NULL, err[256];
    int status = run_capture(argv, &text, err, sizeof err);
    int yes = status >= 0 && text && (strstr(text, "Open MPI") || strstr(text, "OpenRTE"));
    free(text);
    return yes;
}

static void describe_status(int status, char *buf, size_t len) {
    if (WIFEXITED(status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, len, "ended abnormally");
}

int calibrate_mpi_sweep(const CalibrateOptions *opt, const char *mpiexec, const char *helper,
                        CalibrateWorld *worlds, char *err, size_t errlen) {
    if (!calibrate_options_check(opt, err, errlen))
        return 2;
    char launcher[PATH_LEN], prog[PATH_LEN];
    if (!mpiexec)
        mpiexec = "mpiexec";
    if (!find_program(mpiexec, launcher, sizeof launcher)) {
        snprintf(
            err, errlen,
            "cannot find the MPI launcher '%s'%s (install MPI, e.g. openmpi-bin, or name one with "
            "--mpiexec PATH)",
            mpiexec, strchr(mpiexec, '/') ? "" : " in PATH");
        return 2;
    }
    if (helper) {
        snprintf(prog, sizeof prog, "%s", helper);
    } else {
        char dir[PATH_LEN];
        if (!self_dir(dir, sizeof dir)) {
            snprintf(err, errlen,
                     "cannot find the directory of the primec binary (no /proc/self/exe)");
            return 2;
        }
        if ((size_t)snprintf(prog, sizeof prog, "%s/" CALIBRATE_MPI_HELPER, dir) >= sizeof prog) {
            snprintf(err, errlen, "the path of the primec binary is too long");
            return 2;
        }
    }
    if (!is_executable(prog)) {
        snprintf(err, errlen,
                 "cannot find the MPI calibration program '%s' (it is built with primec when CMake "
                 "finds "
                 "MPI, and must stay in the directory of the primec binary)",
                 prog);
        return 2;
    }
    int open_mpi = is_open_mpi(launcher);
    int largest = 0;
    for (int i = 1; i < opt->nworlds; ++i)
        if (opt->worlds[i] > opt->worlds[largest])
            largest = i;
    for (int wi = 0; wi < opt->nworlds; ++wi) {
        int g = opt->worlds[wi];
        if (g < 1 || g > CALIBRATE_MAX_DEVICES) {
            snprintf(err, errlen, "a calibration world needs 1 to %d devices, not %d",
                     CALIBRATE_MAX_DEVICES, g);
            return 2;
        }
        /* The helper's options: the first four always, the rest with --compute. */
        static const char *const flag[] = {"--devices",  "--min-bytes", "--max-bytes", "--reps",
                                           "--gemm-min", "--gemm-max",  "--mem-floats"};
        const long value[] = {g,
                              opt->min_bytes,
                              opt->max_bytes,
                              opt->reps,
                              opt->gemm_min,
                              opt->gemm_max,
                              opt->mem_floats};
        char num[8][24];
        char *argv[32];
        int n = 0;
        argv[n++] = launcher;
        if (open_mpi) {
            argv[n++] = "--oversubscribe";
            if (geteuid() == 0)
                argv[n++] = "--allow-run-as-root";
        }
        argv[n++] = "-n";
        snprintf(num[7], sizeof num[7], "%d", g);
        argv[n++] = num[7];
        argv[n++] = prog;
        if (wi == largest)
            argv[n++] = "--compute";
        for (int f = 0; f < (wi == largest ? 7 : 4); ++f) {
            snprintf(num[f], sizeof num[f], "%ld", value[f]);
            argv[n++] = (char *)flag[f];
            argv[n++] = num[f];
        }
        argv[n] = NULL;
        char *text = NULL;
        int status = run_capture(argv, &text, err, errlen);
        if (status < 0)
            return 3;
        if (status != 0) {
            char how[64];
            describe_status(status, how, sizeof how);
            snprintf(err, errlen,
                     "the MPI calibration run on %d processes failed: %s -n %d %s ... %s", g,
                     launcher, g, prog, how);
            free(text);
            return 3;
        }
        char perr[256];
        int ok = calibrate_world_parse(text, &worlds[wi], perr, sizeof perr);
        free(text);
        if (!ok) {
            snprintf(err, errlen,
                     "the MPI calibration run on %d processes printed no usable samples: %s", g,
                     perr);
            return 3;
        }
        if (worlds[wi].ndev != g || worlds[wi].nsamples == 0 ||
            (wi == largest && worlds[wi].compute.ngemm == 0)) {
            snprintf(err, errlen,
                     "the MPI calibration run on %d processes printed the samples of another sweep",
                     g);
            return 3;
        }
    }
    return 0;
}
