/*
 * The shared-memory watchdog of an MPI process (world_mpi.c).
 *
 * Open MPI's shared-memory transport keeps one file per process in
 * /dev/shm, and only the launcher's daemon removes them. A process that
 * dies with its launcher (killed by PR_SET_PDEATHSIG, see world_mpi.c)
 * would leave them behind: nobody is left to clean up. So, once MPI is
 * initialised, the process notes the /dev/shm files it has mapped and
 * forks a small watchdog. The watchdog does nothing until the process it
 * watches is gone; then, if the launcher is gone too (killed, or a zombie
 * nobody has reaped), it removes those files and exits. When the launcher
 * is still alive it exits at once: the launcher cleans up as usual.
 *
 * The watchdog is a fork of a process that has threads, so it calls only
 * async-signal-safe functions (open, read, close, unlink, nanosleep,
 * getppid, _exit): everything it needs is prepared before the fork. It
 * closes every descriptor it inherited (the launcher's output pipes) and
 * ignores the signals a terminal sends to the whole process group.
 */
#define _POSIX_C_SOURCE 200809L

#include "internal.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__

enum { SHM_MAX_FILES = 16, SHM_PATH_MAX = 256, STAT_PATH_MAX = 64 };

static char shm_files[SHM_MAX_FILES][SHM_PATH_MAX];
static int shm_count;

/* Adds the path in /proc/self/maps line `line`, if it is a file in
 * /dev/shm not noted yet. */
static void note_mapping(const char *line) {
    const char *path = strstr(line, " /dev/shm/");
    if (!path)
        return;
    path++;
    size_t n = strcspn(path, "\n");
    if (n == 0 || n >= SHM_PATH_MAX)
        return;
    for (int i = 0; i < shm_count; i++)
        if (strncmp(shm_files[i], path, n) == 0 && shm_files[i][n] == '\0')
            return;
    if (shm_count == SHM_MAX_FILES)
        return;
    memcpy(shm_files[shm_count], path, n);
    shm_files[shm_count][n] = '\0';
    shm_count++;
}

/* Whether process `pid` exists and is not a zombie: reads the state
 * field of /proc/PID/stat (after the command's closing parenthesis). */
static int process_alive(const char *stat_path) {
    int fd = open(stat_path, O_RDONLY);
    if (fd < 0)
        return 0;
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *paren = strrchr(buf, ')');
    if (!paren || paren[1] != ' ')
        return 0;
    char state = paren[2];
    return state != 'Z' && state != 'X' && state != 'x';
}

static void watchdog_main(pid_t watched, const char *launcher_stat, long max_fd) {
    for (long fd = 0; fd < max_fd; fd++)
        close((int)fd);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    struct timespec nap = {0, 50000000};
    while (getppid() == watched)
        nanosleep(&nap, NULL);
    if (!process_alive(launcher_stat))
        for (int i = 0; i < shm_count; i++)
            unlink(shm_files[i]);
    _exit(0);
}

void prime_rt_watch_shm(pid_t launcher) {
    if (launcher <= 1)
        return;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return;
    char line[1024];
    while (fgets(line, sizeof line, maps))
        note_mapping(line);
    fclose(maps);
    if (shm_count == 0)
        return;
    char launcher_stat[STAT_PATH_MAX];
    snprintf(launcher_stat, sizeof launcher_stat, "/proc/%ld/stat", (long)launcher);
    long max_fd = sysconf(_SC_OPEN_MAX);
    if (max_fd < 0 || max_fd > 65536)
        max_fd = 65536;
    pid_t self = getpid();
    /* Output buffered before the fork must not be written twice. */
    fflush(NULL);
    pid_t child = fork();
    if (child == 0)
        watchdog_main(self, launcher_stat, max_fd);
    /* Without a watchdog (fork failed) the process runs as before. */
}

#else

void prime_rt_watch_shm(pid_t launcher) {
    (void)launcher;
}

#endif
