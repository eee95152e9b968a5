/*
 * pcu_host_nccl.c — the NCCL calls of prime_cuda_nccl_dev.h on the host,
 * for the host emulation of the CUDA runtime (prime_rt_cuda_host), as
 * pcu_host.c is for the CUDA calls: a communicator of one rank, whose
 * group calls and stream waits have nothing to wait for. A communicator
 * of more ranks is refused at its creation (the emulation has no
 * transport between processes), which is how a multi-process run ends
 * in the tests, after its rendezvous: with the message of a failed
 * ncclCommInitRankConfig and a non-zero exit.
 */
#define _POSIX_C_SOURCE 200809L
#include "prime_cuda_nccl_dev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct PncComm {
    int nranks;
};

int pnc_unique_id(void *id, char *err, size_t cap) {
    (void)err, (void)cap;
    memset(id, 0, PNC_ID_BYTES);
    long pid = (long)getpid();
    memcpy(id, &pid, sizeof pid);
    return 0;
}

int pnc_comm_init(PncComm **out, int nranks, const void *id, int rank, int gpu, double timeout_s,
                  char *err, size_t cap) {
    (void)id, (void)rank, (void)gpu, (void)timeout_s;
    *out = NULL;
    if (nranks != 1) {
        snprintf(err, cap,
                 "ncclCommInitRankConfig: the host emulation has communicators of one rank "
                 "only, not %d",
                 nranks);
        return 1;
    }
    PncComm *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, cap, "out of host memory");
        return 1;
    }
    c->nranks = nranks;
    *out = c;
    return 0;
}

void pnc_comm_abort(PncComm *c) {
    free(c);
}

void pnc_comm_destroy(PncComm *c) {
    free(c);
}

int pnc_group_start(char *err, size_t cap) {
    (void)err, (void)cap;
    return 0;
}

int pnc_group_end(PncComm *c, double timeout_s, char *err, size_t cap) {
    (void)c, (void)timeout_s, (void)err, (void)cap;
    return 0;
}

/* A rank of a world of one has no peer. */
static int no_peer(const char *call, int peer, char *err, size_t cap) {
    snprintf(err, cap, "%s rank %d: a communicator of one rank has no peer", call, peer);
    return 1;
}

int pnc_send(PncComm *c, PcuDev *d, int stream, const float *buf, size_t n, int peer, char *err,
             size_t cap) {
    (void)c, (void)d, (void)stream, (void)buf, (void)n;
    return no_peer("ncclSend to", peer, err, cap);
}

int pnc_recv(PncComm *c, PcuDev *d, int stream, float *buf, size_t n, int peer, char *err,
             size_t cap) {
    (void)c, (void)d, (void)stream, (void)buf, (void)n;
    return no_peer("ncclRecv from", peer, err, cap);
}

/* One member: its buffer is the result already. */
int pnc_allreduce(PncComm *c, PcuDev *d, int stream, float *buf, size_t n, int max,
                  double timeout_s, char *err, size_t cap) {
    (void)c, (void)d, (void)stream, (void)buf, (void)n, (void)max, (void)timeout_s, (void)err,
        (void)cap;
    return 0;
}

int pnc_reduce_scatter(PncComm *c, PcuDev *d, int stream, float *buf, size_t chunk, int pos,
                       int max, double timeout_s, char *err, size_t cap) {
    (void)c, (void)d, (void)stream, (void)buf, (void)chunk, (void)pos, (void)max, (void)timeout_s,
        (void)err, (void)cap;
    return 0;
}

int pnc_allgather(PncComm *c, PcuDev *d, int stream, float *buf, size_t chunk, int pos,
                  double timeout_s, char *err, size_t cap) {
    (void)c, (void)d, (void)stream, (void)buf, (void)chunk, (void)pos, (void)timeout_s, (void)err,
        (void)cap;
    return 0;
}

int pnc_bcast(PncComm *c, PcuDev *d, int stream, float *buf, size_t n, int root, double timeout_s,
              char *err, size_t cap) {
    (void)c, (void)d, (void)stream, (void)buf, (void)n, (void)root, (void)timeout_s, (void)err,
        (void)cap;
    return 0;
}

/* The emulation's streams run in order on the calling thread. */
int pnc_sync(PncComm *c, PcuDev *d, double timeout_s, char *err, size_t cap) {
    (void)c, (void)d, (void)timeout_s, (void)err, (void)cap;
    return 0;
}

int pnc_host_allgather(PncComm *c, int rank, int nranks, void *buf, size_t per_rank,
                       double timeout_s, char *err, size_t cap) {
    (void)c, (void)rank, (void)buf, (void)per_rank, (void)timeout_s;
    if (nranks == 1)
        return 0;
    snprintf(err, cap, "ncclAllGather: a communicator of one rank, not %d", nranks);
    return 1;
}
