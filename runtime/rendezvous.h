/*
 * rendezvous.h — how the processes of a one-process-per-GPU run find each
 * other without MPI: the NCCL unique id (opaque bytes here) reaches every
 * rank, and the runtime's host-side exchanges (the counters after a run,
 * prime_world_share) travel over the same sockets.
 *
 * Two ways in:
 *   - a file (--nccl-id-file PATH): rank 0 writes the id atomically (a
 *     temporary name in the same directory, then rename), every other
 *     rank waits for the file to appear, with a timeout;
 *   - TCP: rank 0 listens on MASTER_ADDR:MASTER_PORT (any address of the
 *     host), accepts WORLD_SIZE - 1 connections, and every other rank
 *     connects (retrying while rank 0 is not listening yet). Each rank
 *     says who it is first (its rank and the world size it was told);
 *     rank 0 refuses a rank out of range, twice the same, or a different
 *     world size, and drops a connection that is not a rank's. The sockets form a star around rank
 * 0: a broadcast is rank 0 writing to every peer, an all-gather every peer writing its blob to rank
 * 0 and rank 0 writing the whole array back.
 *
 * The configuration comes from the usual environment (RANK, WORLD_SIZE,
 * LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or from options (--rank,
 * --world-size, --master ADDR:PORT, --nccl-id-file PATH); options win.
 *
 * Every call that waits has a deadline (PrimeRdvConfig.timeout_s), and
 * every failure returns non-zero after writing into err a message naming
 * this rank, the peer and the call:
 *   "rank 1: connect to 127.0.0.1:29500: connection refused after 30 s"
 *   "rank 0: accept: 2 of 4 ranks connected within 5 s (missing: 2 3)"
 * No call blocks without a deadline, and no call raises SIGPIPE. A call
 * that gave up at its deadline returns PRIME_RDV_TIMEOUT, any other
 * failure -1.
 */
#ifndef PRIME_RENDEZVOUS_H
#define PRIME_RENDEZVOUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PRIME_RDV_HOST_MAX 256
#define PRIME_RDV_TIMEOUT (-2)

typedef struct PrimeRdvConfig {
    int rank;                      /* -1: not given */
    int world_size;                /* -1: not given */
    int local_rank;                /* -1: not given (the GPU is then rank % GPUs) */
    char host[PRIME_RDV_HOST_MAX]; /* "" : not given */
    int port;                      /* -1: not given; 0 (rank 0 only): any free port */
    char id_file[1024];            /* "" : not given */
    double timeout_s;              /* every wait's deadline */
} PrimeRdvConfig;

/* Nothing given, timeout_s 60. */
void prime_rdv_config_init(PrimeRdvConfig *cfg);

/* Takes RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT from
 * the environment (those set). Non-zero with err for a value that is not
 * a number in range, naming the variable and its value. */
int prime_rdv_config_env(PrimeRdvConfig *cfg, char *err, size_t cap);

/* One option of argv at *i (--rank N, --world-size N, --master ADDR:PORT,
 * --nccl-id-file PATH): returns 1 and advances *i past its value when
 * argv[*i] is one of them, 0 when it is not, -1 with err for a missing or
 * bad value. */
int prime_rdv_config_option(PrimeRdvConfig *cfg, int argc, char **argv, int *i, char *err,
                            size_t cap);

/* Checks that the configuration names a world: rank and world size given
 * with 0 <= rank < world size, and either an id file or an address and
 * a port. Non-zero with err naming what is missing. */
int prime_rdv_config_check(const PrimeRdvConfig *cfg, char *err, size_t cap);

typedef struct PrimeRdv PrimeRdv;

/* Rank 0's half, first step: binds and listens on cfg->port (0: a free
 * port, see prime_rdv_port). Other ranks: nothing happens yet. */
int prime_rdv_listen(const PrimeRdvConfig *cfg, PrimeRdv **out, char *err, size_t cap);
/* The port rank 0 listens on (the one the system chose for port 0). */
int prime_rdv_port(const PrimeRdv *rdv);
/* Second step: rank 0 accepts every other rank, the others connect to
 * rank 0; when it returns 0 every rank of the world is connected. */
int prime_rdv_connect(PrimeRdv *rdv, char *err, size_t cap);
/* Both steps. */
int prime_rdv_open(const PrimeRdvConfig *cfg, PrimeRdv **out, char *err, size_t cap);
void prime_rdv_close(PrimeRdv *rdv);

int prime_rdv_rank(const PrimeRdv *rdv);
/* The deadline of every later exchange, in seconds. */
void prime_rdv_set_timeout(PrimeRdv *rdv, double timeout_s);
int prime_rdv_size(const PrimeRdv *rdv);

/* Rank 0's n bytes of buf reach every rank's buf. */
int prime_rdv_bcast(PrimeRdv *rdv, void *buf, size_t n, char *err, size_t cap);
/* buf holds size * per_rank bytes, this rank's at rank * per_rank; on
 * return every rank's part is filled in on every rank. */
int prime_rdv_allgather(PrimeRdv *rdv, void *buf, size_t per_rank, char *err, size_t cap);

/* The id file: rank 0 writes n bytes (a temporary name, then rename);
 * the others read n bytes once the file exists, waiting up to timeout_s
 * for it. A file of another size is an error naming its size. */
int prime_rdv_id_write(const char *path, int rank, const void *id, size_t n, char *err, size_t cap);
int prime_rdv_id_read(const char *path, int rank, void *id, size_t n, double timeout_s, char *err,
                      size_t cap);

#ifdef __cplusplus
}
#endif

#endif
