/*
 * test_runtime_rendezvous.c — the rendezvous of the one-process-per-GPU
 * CUDA runtime (runtime/rendezvous.c) between forked processes on
 * 127.0.0.1: every rank receives rank 0's id and every rank's blob of an
 * all-gather; a rank that never comes makes rank 0 give up with a message
 * naming it (and the rank that came learns that rank 0 gave up); a
 * connection refused until the deadline; a rank with another world size
 * is refused; a connection that is not a rank's is dropped; bad RANK / WORLD_SIZE / MASTER_PORT
 * values and options; the id file written by rank 0 and read by another rank, its absence and a
 * file of the wrong size.
 *
 * Rank 0 is the test process itself: it listens on a port the system
 * chooses (port 0, prime_rdv_port), so tests running in parallel never
 * meet, and forks the other ranks after that. A child reports by its
 * exit status: 0 when every check of its side held.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rendezvous.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ID_BYTES 128

static PrimeRdvConfig config(int rank, int size, int port, double timeout_s) {
    PrimeRdvConfig cfg;
    prime_rdv_config_init(&cfg);
    cfg.rank = rank;
    cfg.world_size = size;
    cfg.port = port;
    cfg.timeout_s = timeout_s;
    snprintf(cfg.host, sizeof cfg.host, "127.0.0.1");
    return cfg;
}

static void fill_id(unsigned char *id) {
    for (int i = 0; i < ID_BYTES; ++i)
        id[i] = (unsigned char)(i * 7 + 3);
}

/* A rank's blob of the all-gather: 5 doubles that say whose they are. */
static void fill_blob(double *blob, int rank) {
    for (int i = 0; i < 5; ++i)
        blob[i] = 100.0 * rank + i;
}

static int check_all(const double *all, int size) {
    for (int r = 0; r < size; ++r)
        for (int i = 0; i < 5; ++i)
            if (all[5 * r + i] != 100.0 * r + i)
                return 0;
    return 1;
}

/* A rank other than 0: the broadcast id and two all-gathers. */
static int child_rank(int rank, int size, int port) {
    PrimeRdvConfig cfg = config(rank, size, port, 10);
    PrimeRdv *rdv = NULL;
    char err[512];
    if (prime_rdv_open(&cfg, &rdv, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    unsigned char id[ID_BYTES], want[ID_BYTES];
    fill_id(want);
    memset(id, 0, sizeof id);
    int ok = prime_rdv_bcast(rdv, id, sizeof id, err, sizeof err) == 0 &&
             memcmp(id, want, sizeof id) == 0;
    for (int round = 0; ok && round < 2; ++round) {
        double all[5 * 8];
        memset(all, 0, sizeof all);
        fill_blob(all + 5 * rank, rank);
        ok = prime_rdv_allgather(rdv, all, 5 * sizeof(double), err, sizeof err) == 0 &&
             check_all(all, size);
    }
    if (!ok)
        fprintf(stderr, "rank %d: %s\n", rank, err);
    prime_rdv_close(rdv);
    return ok ? 0 : 1;
}

static pid_t spawn(int (*fn)(int, int, int), int rank, int size, int port) {
    pid_t pid = fork();
    if (pid == 0) {
        int rc = fn(rank, size, port);
        _exit(rc);
    }
    return pid;
}

static int exit_status(pid_t pid) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static void test_tcp_exchange(void **state) {
    (void)state;
    const int size = 4;
    PrimeRdvConfig cfg = config(0, size, 0, 10);
    PrimeRdv *rdv = NULL;
    char err[512] = "";
    assert_int_equal(prime_rdv_listen(&cfg, &rdv, err, sizeof err), 0);
    int port = prime_rdv_port(rdv);
    assert_true(port > 0);
    pid_t pids[8];
    for (int r = 1; r < size; ++r)
        pids[r] = spawn(child_rank, r, size, port);
    int rc = prime_rdv_connect(rdv, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(prime_rdv_rank(rdv), 0);
    assert_int_equal(prime_rdv_size(rdv), size);
    unsigned char id[ID_BYTES];
    fill_id(id);
    assert_int_equal(prime_rdv_bcast(rdv, id, sizeof id, err, sizeof err), 0);
    for (int round = 0; round < 2; ++round) {
        double all[5 * 8];
        memset(all, 0, sizeof all);
        fill_blob(all, 0);
        assert_int_equal(prime_rdv_allgather(rdv, all, 5 * sizeof(double), err, sizeof err), 0);
        assert_true(check_all(all, size));
    }
    prime_rdv_close(rdv);
    for (int r = 1; r < size; ++r)
        assert_int_equal(exit_status(pids[r]), 0);
}

/* A connection that is not a rank's (12 bytes of zeros), then rank 1. */
static int child_after_stray(int rank, int size, int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    char zeros[12] = {0};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        write(fd, zeros, sizeof zeros) != (ssize_t)sizeof zeros)
        return 3;
    close(fd);
    return child_rank(rank, size, port);
}

static void test_stray_connection(void **state) {
    (void)state;
    PrimeRdvConfig cfg = config(0, 2, 0, 10);
    PrimeRdv *rdv = NULL;
    char err[512] = "";
    assert_int_equal(prime_rdv_listen(&cfg, &rdv, err, sizeof err), 0);
    pid_t pid = spawn(child_after_stray, 1, 2, prime_rdv_port(rdv));
    assert_int_equal(prime_rdv_connect(rdv, err, sizeof err), 0);
    unsigned char id[ID_BYTES];
    fill_id(id);
    assert_int_equal(prime_rdv_bcast(rdv, id, sizeof id, err, sizeof err), 0);
    for (int round = 0; round < 2; ++round) {
        double all[5 * 2];
        fill_blob(all, 0);
        assert_int_equal(prime_rdv_allgather(rdv, all, 5 * sizeof(double), err, sizeof err), 0);
        assert_true(check_all(all, 2));
    }
    prime_rdv_close(rdv);
    assert_int_equal(exit_status(pid), 0);
}

/* Rank 1 of 3 comes, rank 2 never: rank 1 must hear that rank 0 gave up. */
static int child_left_alone(int rank, int size, int port) {
    PrimeRdvConfig cfg = config(rank, size, port, 10);
    PrimeRdv *rdv = NULL;
    char err[512] = "";
    if (prime_rdv_open(&cfg, &rdv, err, sizeof err) == 0) {
        prime_rdv_close(rdv);
        return 1;
    }
    return strstr(err, "rank 1: connect to 127.0.0.1:") && strstr(err, "rank 0 gave up") ? 0 : 2;
}

static void test_missing_rank(void **state) {
    (void)state;
    PrimeRdvConfig cfg = config(0, 3, 0, 1.0);
    PrimeRdv *rdv = NULL;
    char err[512] = "";
    assert_int_equal(prime_rdv_listen(&cfg, &rdv, err, sizeof err), 0);
    pid_t pid = spawn(child_left_alone, 1, 3, prime_rdv_port(rdv));
    assert_int_equal(prime_rdv_connect(rdv, err, sizeof err), PRIME_RDV_TIMEOUT);
    prime_rdv_close(rdv);
    assert_string_equal(err, "rank 0: accept: 2 of 3 ranks connected within 1 s (missing: 2)");
    assert_int_equal(exit_status(pid), 0);
}

/* A port nobody listens on: bound, read, closed. */
static int dead_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void test_connect_refused(void **state) {
    (void)state;
    int port = dead_port();
    PrimeRdvConfig cfg = config(1, 2, port, 0.5);
    PrimeRdv *rdv = NULL;
    char err[512] = "", want[512];
    assert_int_equal(prime_rdv_open(&cfg, &rdv, err, sizeof err), PRIME_RDV_TIMEOUT);
    assert_null(rdv);
    snprintf(want, sizeof want, "rank 1: connect to 127.0.0.1:%d: connection refused after 0.5 s",
             port);
    assert_string_equal(err, want);
}

/* Rank 1 thinks the world has 3 ranks; rank 0 says 2. */
static int child_wrong_size(int rank, int size, int port) {
    (void)size;
    PrimeRdvConfig cfg = config(rank, 3, port, 10);
    PrimeRdv *rdv = NULL;
    char err[512] = "";
    if (prime_rdv_open(&cfg, &rdv, err, sizeof err) == 0) {
        prime_rdv_close(rdv);
        return 1;
    }
    return strstr(err, "rank 0 refused this rank") ? 0 : 2;
}

static void test_wrong_world_size(void **state) {
    (void)state;
    PrimeRdvConfig cfg = config(0, 2, 0, 10);
    PrimeRdv *rdv = NULL;
    char err[512] = "";
    assert_int_equal(prime_rdv_listen(&cfg, &rdv, err, sizeof err), 0);
    pid_t pid = spawn(child_wrong_size, 1, 2, prime_rdv_port(rdv));
    assert_int_not_equal(prime_rdv_connect(rdv, err, sizeof err), 0);
    prime_rdv_close(rdv);
    assert_string_equal(err, "rank 0: accept: rank 1 says the world has 3 ranks, rank 0 says 2");
    assert_int_equal(exit_status(pid), 0);
}

/* The environment's variable name=value must be refused with want. */
static void env_refused(const char *name, const char *value, const char *want) {
    PrimeRdvConfig cfg;
    prime_rdv_config_init(&cfg);
    char err[512] = "";
    setenv(name, value, 1);
    assert_int_not_equal(prime_rdv_config_env(&cfg, err, sizeof err), 0);
    unsetenv(name);
    assert_string_equal(err, want);
}

static void test_bad_environment(void **state) {
    (void)state;
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("LOCAL_RANK");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    env_refused("MASTER_PORT", "abc", "MASTER_PORT 'abc' is not a number from 1 to 65535");
    env_refused("MASTER_PORT", "70000", "MASTER_PORT '70000' is not a number from 1 to 65535");
    env_refused("WORLD_SIZE", "0", "WORLD_SIZE '0' is not a number from 1 to 65536");
    env_refused("RANK", "-1", "RANK '-1' is not a number from 0 to 65535");
    env_refused("MASTER_ADDR", "", "MASTER_ADDR '' is not a host name or address");

    PrimeRdvConfig cfg;
    prime_rdv_config_init(&cfg);
    char err[512] = "";
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("MASTER_ADDR", "10.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    assert_int_equal(prime_rdv_config_env(&cfg, err, sizeof err), 0);
    assert_int_equal(prime_rdv_config_check(&cfg, err, sizeof err), 0);
    assert_int_equal(cfg.rank, 3);
    assert_int_equal(cfg.world_size, 4);
    assert_int_equal(cfg.local_rank, 1);
    assert_int_equal(cfg.port, 29500);
    assert_string_equal(cfg.host, "10.0.0.1");
    setenv("WORLD_SIZE", "2", 1);
    prime_rdv_config_init(&cfg);
    assert_int_equal(prime_rdv_config_env(&cfg, err, sizeof err), 0);
    assert_int_not_equal(prime_rdv_config_check(&cfg, err, sizeof err), 0);
    assert_string_equal(err, "rank 3 is not below the world size 2");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("LOCAL_RANK");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
}

/* argv's options must be taken, or refused with want. */
static int take_options(PrimeRdvConfig *cfg, int argc, char **argv, char *err, size_t cap) {
    for (int i = 0; i < argc; ++i)
        if (prime_rdv_config_option(cfg, argc, argv, &i, err, cap) < 0)
            return -1;
    return 0;
}

static void test_options(void **state) {
    (void)state;
    PrimeRdvConfig cfg;
    prime_rdv_config_init(&cfg);
    char err[512] = "";
    char *good[] = {"--rank", "1", "--world-size", "2", "--master", "node7:29501", "--check"};
    assert_int_equal(take_options(&cfg, 7, good, err, sizeof err), 0);
    assert_int_equal(cfg.rank, 1);
    assert_int_equal(cfg.world_size, 2);
    assert_string_equal(cfg.host, "node7");
    assert_int_equal(cfg.port, 29501);
    assert_int_equal(prime_rdv_config_check(&cfg, err, sizeof err), 0);

    struct {
        char *argv[2];
        int argc;
        const char *want;
    } bad[] = {
        {{"--master", "node7"},
         2,
         "--master needs ADDR:PORT with a port from 1 to 65535, not 'node7'"},
        {{"--master", "node7:0"},
         2,
         "--master needs ADDR:PORT with a port from 1 to 65535, not 'node7:0'"},
        {{"--rank", "x"}, 2, "--rank needs a number from 0 to 65535, not 'x'"},
        {{"--world-size", "0"}, 2, "--world-size needs a number from 1 to 65536, not '0'"},
        {{"--nccl-id-file", NULL}, 1, "--nccl-id-file needs a value"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
        prime_rdv_config_init(&cfg);
        assert_int_not_equal(take_options(&cfg, bad[k].argc, bad[k].argv, err, sizeof err), 0);
        assert_string_equal(err, bad[k].want);
    }

    prime_rdv_config_init(&cfg);
    char *two[] = {"--rank", "0", "--world-size", "2"};
    assert_int_equal(take_options(&cfg, 4, two, err, sizeof err), 0);
    assert_int_not_equal(prime_rdv_config_check(&cfg, err, sizeof err), 0);
    assert_string_equal(err, "a world of 2 ranks needs rank 0's address (MASTER_ADDR and "
                             "MASTER_PORT, or --master ADDR:PORT) or an id file "
                             "(--nccl-id-file PATH)");
    prime_rdv_config_init(&cfg);
    assert_int_not_equal(prime_rdv_config_check(&cfg, err, sizeof err), 0);
    assert_string_equal(err, "the world size is not given (WORLD_SIZE or --world-size)");
    /* One rank needs no address. */
    cfg.world_size = 1;
    assert_int_equal(prime_rdv_config_check(&cfg, err, sizeof err), 0);
}

static char id_path[256];

/* Rank 1 waits for the file rank 0 writes a little later. */
static int child_reads_id(int rank, int size, int port) {
    (void)size;
    (void)port;
    unsigned char id[ID_BYTES], want[ID_BYTES];
    char err[512] = "";
    fill_id(want);
    if (prime_rdv_id_read(id_path, rank, id, sizeof id, 10, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    return memcmp(id, want, sizeof id) == 0 ? 0 : 2;
}

static void test_id_file(void **state) {
    (void)state;
    snprintf(id_path, sizeof id_path, "/tmp/prime-rdv-test-%ld.id", (long)getpid());
    unlink(id_path);
    pid_t pid = spawn(child_reads_id, 1, 2, 0);
    struct timespec ts = {0, 200000000L};
    nanosleep(&ts, NULL);
    unsigned char id[ID_BYTES];
    char err[512] = "";
    fill_id(id);
    assert_int_equal(prime_rdv_id_write(id_path, 0, id, sizeof id, err, sizeof err), 0);
    assert_int_equal(exit_status(pid), 0);

    /* A file of another size. */
    assert_int_equal(prime_rdv_id_write(id_path, 0, id, 16, err, sizeof err), 0);
    char want[512];
    assert_int_equal(prime_rdv_id_read(id_path, 2, id, sizeof id, 1, err, sizeof err), -1);
    snprintf(want, sizeof want, "rank 2: read the NCCL id file %s: 16 bytes, not 128", id_path);
    assert_string_equal(err, want);
    unlink(id_path);

    /* No file at all. */
    assert_int_equal(prime_rdv_id_read(id_path, 1, id, sizeof id, 0.3, err, sizeof err),
                     PRIME_RDV_TIMEOUT);
    snprintf(want, sizeof want, "rank 1: open the NCCL id file %s: not there after 0.3 s", id_path);
    assert_string_equal(err, want);

    /* A directory that is not there. */
    assert_int_not_equal(
        prime_rdv_id_write("/nonexistent-dir/x.id", 0, id, sizeof id, err, sizeof err), 0);
    assert_non_null(strstr(err, "rank 0: write the NCCL id file /nonexistent-dir/x.id (open): "
                                "no such file or directory"));
}

/* A world of one needs no socket. */
static void test_world_of_one(void **state) {
    (void)state;
    PrimeRdvConfig cfg;
    prime_rdv_config_init(&cfg);
    cfg.world_size = 1;
    PrimeRdv *rdv = NULL;
    char err[512] = "";
    assert_int_equal(prime_rdv_open(&cfg, &rdv, err, sizeof err), 0);
    double all[5];
    fill_blob(all, 0);
    assert_int_equal(prime_rdv_allgather(rdv, all, sizeof all, err, sizeof err), 0);
    assert_true(check_all(all, 1));
    prime_rdv_close(rdv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_exchange),     cmocka_unit_test(test_missing_rank),
        cmocka_unit_test(test_connect_refused),  cmocka_unit_test(test_wrong_world_size),
        cmocka_unit_test(test_bad_environment),  cmocka_unit_test(test_options),
        cmocka_unit_test(test_id_file),          cmocka_unit_test(test_world_of_one),
        cmocka_unit_test(test_stray_connection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
