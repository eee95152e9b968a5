/*
 * pcu_host_nccl.c — the NCCL calls of prime_cuda_nccl_dev.h on the host,
 * for the host emulation of the CUDA runtime (prime_rt_cuda_host), as
 * pcu_host.c is for the CUDA calls: communicators of any number of ranks
 * across the processes of one machine, so that the NCCL world's table
 * (prime_cuda_nccl.c) runs a whole multi-process schedule without a GPU.
 *
 * The unique id names a fresh directory ($TMPDIR or /tmp, pnc-XXXXXX).
 * Creating a communicator, rank r listens on the Unix socket DIR/r,
 * connects to every lower rank (saying its rank), accepts every higher
 * one, and removes its socket once all are connected (the last one out
 * removes the directory): a socket per pair of ranks. Every message is a
 * header (its float count) and the floats, so two posts that do not match
 * are an error naming both sizes, not garbage.
 *
 * NCCL's semantics, as the table relies on them:
 *   - a group (pnc_group_start .. pnc_group_end) queues its sends and
 *     receives; pnc_group_end progresses all of them together (poll over
 *     their sockets), so a ring's sends and receives complete together.
 *     Messages between two ranks match in posting order;
 *   - a send or receive outside a group is a group of one;
 *   - collectives are groups too: every member sends what the others
 *     need and reduces what it received in rank order, so every member
 *     gets the same result, bit for bit;
 *   - a broadcast inside a group joins that group.
 * The emulation's streams run in order on the calling thread, so each of
 * these completes before it returns and pnc_sync has nothing to wait for.
 *
 * Every wait has the caller's deadline. A peer that closed its socket (it
 * exited, or aborted its communicator) or a deadline fails the call with
 * the call, the peer and why, and aborts the communicator: its sockets
 * are shut down, so the peers waiting on this rank fail at once too,
 * rather than at their deadline.
 *
 * PNC_HOST_EXIT=N (read once) makes this process exit (status 9, as if
 * killed) at its N-th group (from 0), so tests see the peers of a rank
 * that went away end with a message naming it.
 */
#define _POSIX_C_SOURCE 200809L
#include "prime_cuda_nccl_dev.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct PncComm {
    int nranks, rank;
    int *fd; /* per rank: the socket to it (-1: this rank) */
    int aborted;
};

/* One send or receive of a group. */
typedef struct Op {
    PncComm *comm;
    int send, peer;
    char *buf;
    size_t n;      /* floats */
    uint64_t head; /* the header: sent, or received */
    size_t done;   /* bytes of header and floats moved */
    const char *call;
} Op;

/* The open group of this process (the NCCL world has one device). */
static struct {
    int open;
    Op *ops;
    int nops, cap;
    int failed;
    char err[400];
} group;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int left_ms(double deadline) {
    double left = (deadline - now_s()) * 1000.0;
    return left <= 0 ? 0 : left < 100 ? (int)left + 1 : 100;
}

/* Ends every operation on c: the peers see its sockets close. */
static void abort_comm(PncComm *c) {
    if (!c || c->aborted)
        return;
    c->aborted = 1;
    for (int r = 0; r < c->nranks; ++r)
        if (c->fd[r] >= 0)
            shutdown(c->fd[r], SHUT_RDWR);
}

static void close_comm(PncComm *c) {
    if (!c)
        return;
    for (int r = 0; c->fd && r < c->nranks; ++r)
        if (c->fd[r] >= 0)
            close(c->fd[r]);
    free(c->fd);
    free(c);
}

#define PNC_LIVE(c)                                                                                \
    do {                                                                                           \
        if ((c)->aborted) {                                                                        \
            snprintf(err, cap, "NCCL: the communicator was aborted after an earlier failure");     \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* The PNC_HOST_EXIT point: exits at the N-th group of the process. */
static void exit_point(void) {
    static long target = -2, groups;
    if (target == -2) {
        const char *env = getenv("PNC_HOST_EXIT");
        target = env && *env ? strtol(env, NULL, 10) : -1;
    }
    if (target >= 0 && groups++ == target)
        _exit(9);
}

int pnc_unique_id(void *id, char *err, size_t cap) {
    memset(id, 0, PNC_ID_BYTES);
    const char *tmp = getenv("TMPDIR");
    char dir[PNC_ID_BYTES];
    /* The directory and a socket's name in it must fit sun_path. */
    if (!tmp || !*tmp || strlen(tmp) > 80)
        tmp = "/tmp";
    snprintf(dir, sizeof dir, "%s/pnc-XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        snprintf(err, cap, "ncclGetUniqueId: mkdtemp %s: %s", dir, strerror(errno));
        return 1;
    }
    memcpy(id, dir, strlen(dir) + 1);
    return 0;
}

static int sock_path(struct sockaddr_un *a, const char *dir, int rank) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path, sizeof a->sun_path, "%s/%d", dir, rank);
    return n > 0 && (size_t)n < sizeof a->sun_path;
}

/* Reads or writes exactly n bytes of fd (non-blocking) by the deadline:
 * 0, or -1 (closed or failed) or -2 (deadline) with errno kept. */
static int move_all(int fd, void *p, size_t n, int out, double deadline) {
    char *b = p;
    while (n) {
        struct pollfd q = {fd, (short)(out ? POLLOUT : POLLIN), 0};
        int w = poll(&q, 1, left_ms(deadline));
        if (w == 0 && now_s() >= deadline)
            return -2;
        if (w <= 0)
            continue;
        ssize_t k = out ? send(fd, b, n, MSG_NOSIGNAL) : recv(fd, b, n, 0);
        if (k == 0)
            return -1;
        if (k < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            return -1;
        }
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Rank c->rank's connections: to every lower rank, from every higher. */
static int connect_ranks(PncComm *c, const char *dir, int lfd, double deadline, char *err,
                         size_t cap) {
    for (int q = 0; q < c->rank; ++q) {
        struct sockaddr_un a;
        sock_path(&a, dir, q);
        for (;;) {
            int fd = socket(AF_UNIX, SOCK_STREAM, 0);
            if (fd < 0) {
                snprintf(err, cap, "socket: %s", strerror(errno));
                return 1;
            }
            if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
                fcntl(fd, F_SETFL, O_NONBLOCK);
                c->fd[q] = fd;
                int32_t me = c->rank;
                if (move_all(fd, &me, sizeof me, 1, deadline)) {
                    snprintf(err, cap, "rank %d of %d: rank %d closed its connection", c->rank,
                             c->nranks, q);
                    return 1;
                }
                break;
            }
            close(fd);
            if (now_s() >= deadline) {
                snprintf(err, cap, "rank %d of %d: rank %d not there within the deadline", c->rank,
                         c->nranks, q);
                return 1;
            }
            struct timespec ts = {0, 20000000L};
            nanosleep(&ts, NULL);
        }
    }
    for (int got = 0; got < c->nranks - 1 - c->rank;) {
        struct pollfd q = {lfd, POLLIN, 0};
        if (poll(&q, 1, left_ms(deadline)) <= 0) {
            if (now_s() < deadline)
                continue;
            char missing[200] = "";
            size_t len = 0;
            for (int r = c->rank + 1; r < c->nranks && len + 8 < sizeof missing; ++r)
                if (c->fd[r] < 0)
                    len += (size_t)snprintf(missing + len, sizeof missing - len, " %d", r);
            snprintf(err, cap, "rank %d of %d: ranks%s not connected within the deadline", c->rank,
                     c->nranks, missing);
            return 1;
        }
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            continue;
        fcntl(fd, F_SETFL, O_NONBLOCK);
        int32_t who = -1;
        if (move_all(fd, &who, sizeof who, 0, deadline) || who <= c->rank || who >= c->nranks ||
            c->fd[who] >= 0) {
            close(fd); /* not one of this communicator's ranks */
            continue;
        }
        c->fd[who] = fd;
        got++;
    }
    return 0;
}

int pnc_comm_init(PncComm **out, int nranks, const void *id, int rank, int gpu, double timeout_s,
                  char *err, size_t cap) {
    (void)gpu;
    *out = NULL;
    PncComm *c = calloc(1, sizeof *c);
    int *fd = calloc((size_t)nranks, sizeof *fd);
    if (!c || !fd) {
        free(c);
        free(fd);
        snprintf(err, cap, "ncclCommInitRankConfig: out of host memory");
        return 1;
    }
    c->nranks = nranks;
    c->rank = rank;
    c->fd = fd;
    for (int r = 0; r < nranks; ++r)
        fd[r] = -1;
    char dir[PNC_ID_BYTES], why[300];
    memcpy(dir, id, sizeof dir);
    dir[sizeof dir - 1] = '\0';
    if (nranks == 1) {
        rmdir(dir); /* no socket goes in it */
        *out = c;
        return 0;
    }
    struct sockaddr_un a;
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    int failed = lfd < 0 || !sock_path(&a, dir, rank);
    if (failed)
        snprintf(why, sizeof why, "socket in %s: %s", dir, strerror(errno));
    if (!failed && (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, nranks))) {
        snprintf(why, sizeof why, "listen on %s: %s", a.sun_path, strerror(errno));
        failed = 1;
    }
    if (!failed) {
        fcntl(lfd, F_SETFL, O_NONBLOCK);
        failed = connect_ranks(c, dir, lfd, now_s() + timeout_s, why, sizeof why);
        unlink(a.sun_path);
        rmdir(dir); /* the last rank out removes it */
    }
    if (lfd >= 0)
        close(lfd);
    if (failed) {
        snprintf(err, cap, "ncclCommInitRankConfig: %s (the host emulation)", why);
        close_comm(c);
        return 1;
    }
    *out = c;
    return 0;
}

void pnc_comm_abort(PncComm *c) {
    abort_comm(c);
    close_comm(c);
}

void pnc_comm_destroy(PncComm *c) {
    close_comm(c);
}

static void group_reset(void) {
    group.open = 0;
    group.nops = 0;
    group.failed = 0;
    group.err[0] = '\0';
}

static int queue(PncComm *c, int send, int peer, void *buf, size_t n, const char *call) {
    if (group.nops == group.cap) {
        int ncap = group.cap ? 2 * group.cap : 16;
        Op *ops = realloc(group.ops, (size_t)ncap * sizeof *ops);
        if (!ops)
            return 1;
        group.ops = ops;
        group.cap = ncap;
    }
    Op *o = &group.ops[group.nops++];
    memset(o, 0, sizeof *o);
    o->comm = c;
    o->send = send;
    o->peer = peer;
    o->buf = buf;
    o->n = n;
    o->head = (uint64_t)n;
    o->call = call;
    return 0;
}

/* Whether op i is the first unfinished one of its socket and direction
 * (a pair's messages move in posting order). */
static int first_of_pair(int i) {
    const Op *o = &group.ops[i];
    for (int j = 0; j < i; ++j) {
        const Op *p = &group.ops[j];
        if (p->comm == o->comm && p->peer == o->peer && p->send == o->send &&
            p->done < sizeof p->head + p->n * sizeof(float))
            return 0;
    }
    return 1;
}

/* Moves what op o's socket takes or gives now: 1 while unfinished, 0
 * when done, -1 with err on a failure. */
static int step(Op *o, char *err, size_t cap) {
    const size_t hb = sizeof o->head, total = hb + o->n * sizeof(float);
    int fd = o->comm->fd[o->peer];
    while (o->done < total) {
        char *p = o->done < hb ? (char *)&o->head + o->done : o->buf + (o->done - hb);
        size_t want = o->done < hb ? hb - o->done : total - o->done;
        ssize_t k = o->send ? send(fd, p, want, MSG_NOSIGNAL) : recv(fd, p, want, 0);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            return 1;
        if (k <= 0) {
            snprintf(err, cap, "%s rank %d: rank %d closed its connection (%s)", o->call, o->peer,
                     o->peer,
                     k == 0 ? "remote process exited or there was a network error"
                            : strerror(errno));
            return -1;
        }
        o->done += (size_t)k;
        if (!o->send && o->done == hb && o->head != (uint64_t)o->n) {
            snprintf(err, cap,
                     "%s rank %d: a message of %llu floats for a receive of %zu (the ranks' "
                     "posts do not match)",
                     o->call, o->peer, (unsigned long long)o->head, o->n);
            return -1;
        }
    }
    return 0;
}

/* Progresses every queued op together until all are done, one fails or
 * the deadline passes; a failure aborts the communicators involved. */
static int run_group(const char *call, double timeout_s, char *err, size_t cap) {
    double deadline = now_s() + timeout_s;
    struct pollfd *q = calloc((size_t)group.nops + 1, sizeof *q);
    int *which = calloc((size_t)group.nops + 1, sizeof *which);
    int rc = 0;
    if (!q || !which) {
        snprintf(err, cap, "%s: out of host memory", call);
        rc = 1;
    }
    for (int i = 0; !rc && i < group.nops; ++i)
        if (group.ops[i].comm->aborted) {
            snprintf(err, cap, "%s: the communicator was aborted after an earlier failure", call);
            rc = 1;
        }
    while (!rc) {
        int nq = 0;
        for (int i = 0; i < group.nops; ++i) {
            Op *o = &group.ops[i];
            if (o->done == sizeof o->head + o->n * sizeof(float) || !first_of_pair(i))
                continue;
            int s = step(o, err, cap);
            if (s < 0) {
                rc = 1;
                break;
            }
            if (s > 0) {
                q[nq] =
                    (struct pollfd){o->comm->fd[o->peer], (short)(o->send ? POLLOUT : POLLIN), 0};
                which[nq++] = i;
            }
        }
        if (rc || nq == 0)
            break;
        if (poll(q, (nfds_t)nq, left_ms(deadline)) == 0 && now_s() >= deadline) {
            const Op *o = &group.ops[which[0]];
            snprintf(err, cap,
                     "%s: not done within %g s (%s rank %d waiting); the communicator was aborted",
                     call, timeout_s, o->call, o->peer);
            rc = 1;
        }
    }
    for (int i = 0; rc && i < group.nops; ++i)
        abort_comm(group.ops[i].comm);
    free(q);
    free(which);
    return rc;
}

int pnc_group_start(char *err, size_t cap) {
    (void)err, (void)cap;
    group_reset();
    group.open = 1;
    return 0;
}

/* Runs the queued group; every caller's group ends here. */
static int end_group(const char *call, double timeout_s, char *err, size_t cap) {
    exit_point();
    int rc = 0;
    if (group.failed) {
        snprintf(err, cap, "%s", group.err);
        rc = 1;
    } else if (group.nops) {
        rc = run_group(call, timeout_s, err, cap);
    }
    group_reset();
    return rc;
}

int pnc_group_end(PncComm *c, double timeout_s, char *err, size_t cap) {
    (void)c;
    return end_group("ncclGroupEnd", timeout_s, err, cap);
}

/* Queues a send or receive in the open group, or runs it as a group of
 * one (with the deadline of an unbounded wait, as NCCL's own). */
static int post(PncComm *c, int send, int peer, void *buf, size_t n, char *err, size_t cap) {
    const char *call = send ? "ncclSend to" : "ncclRecv from";
    PNC_LIVE(c);
    if (peer < 0 || peer >= c->nranks || peer == c->rank) {
        snprintf(err, cap, "%s rank %d: not a peer in a communicator of %d ranks", call, peer,
                 c->nranks);
        return 1;
    }
    int alone = !group.open;
    if (alone)
        group_reset();
    if (queue(c, send, peer, buf, n, call)) {
        snprintf(err, cap, "%s rank %d: out of host memory", call, peer);
        group.failed = 1;
        snprintf(group.err, sizeof group.err, "%s", err);
        return 1;
    }
    return alone ? end_group(call, 600.0, err, cap) : 0;
}

int pnc_send(PncComm *c, PcuDev *d, int stream, const float *buf, size_t n, int peer, char *err,
             size_t cap) {
    (void)d, (void)stream;
    return post(c, 1, peer, (void *)buf, n, err, cap);
}

int pnc_recv(PncComm *c, PcuDev *d, int stream, float *buf, size_t n, int peer, char *err,
             size_t cap) {
    (void)d, (void)stream;
    return post(c, 0, peer, buf, n, err, cap);
}

/* A collective as one group: every other member q gets the `count`
 * floats at mine + q * per_peer_stride, and member r's arrive at
 * from + r * count. */
static int exchange(PncComm *c, const char *call, const float *mine, size_t per_peer_stride,
                    float *from, size_t count, double timeout_s, char *err, size_t cap) {
    group_reset();
    group.open = 1;
    int failed = 0;
    for (int q = 0; !failed && q < c->nranks; ++q) {
        if (q == c->rank)
            continue;
        failed = queue(c, 1, q, (void *)(mine + (size_t)q * per_peer_stride), count, call) ||
                 queue(c, 0, q, from + (size_t)q * count, count, call);
    }
    if (failed) {
        group_reset();
        snprintf(err, cap, "%s: out of host memory", call);
        return 1;
    }
    return end_group(call, timeout_s, err, cap);
}

/* dst = the combination of rows[0..nranks) in rank order (row `self`
 * being own). */
static void reduce_rows(float *dst, const float *own, const float *rows, int nranks, int self,
                        size_t n, int max) {
    for (size_t i = 0; i < n; ++i) {
        float v = self == 0 ? own[i] : rows[i];
        for (int r = 1; r < nranks; ++r) {
            float x = r == self ? own[i] : rows[(size_t)r * n + i];
            v = max ? (x > v ? x : v) : v + x;
        }
        dst[i] = v;
    }
}

int pnc_allreduce(PncComm *c, PcuDev *d, int stream, float *buf, size_t n, int max,
                  double timeout_s, char *err, size_t cap) {
    (void)d, (void)stream;
    PNC_LIVE(c);
    if (c->nranks == 1 || n == 0)
        return 0;
    float *rows = malloc((size_t)c->nranks * n * sizeof(float));
    if (!rows) {
        snprintf(err, cap, "ncclAllReduce: out of host memory");
        return 1;
    }
    int rc = exchange(c, "ncclAllReduce with", buf, 0, rows, n, timeout_s, err, cap);
    if (!rc)
        reduce_rows(buf, buf, rows, c->nranks, c->rank, n, max);
    free(rows);
    return rc;
}

int pnc_reduce_scatter(PncComm *c, PcuDev *d, int stream, float *buf, size_t chunk, int pos,
                       int max, double timeout_s, char *err, size_t cap) {
    (void)d, (void)stream;
    PNC_LIVE(c);
    if (c->nranks == 1 || chunk == 0)
        return 0;
    float *rows = malloc((size_t)c->nranks * chunk * sizeof(float));
    if (!rows) {
        snprintf(err, cap, "ncclReduceScatter: out of host memory");
        return 1;
    }
    int rc = exchange(c, "ncclReduceScatter with", buf, chunk, rows, chunk, timeout_s, err, cap);
    float *mine = buf + (size_t)pos * chunk;
    if (!rc)
        reduce_rows(mine, mine, rows, c->nranks, c->rank, chunk, max);
    free(rows);
    return rc;
}

int pnc_allgather(PncComm *c, PcuDev *d, int stream, float *buf, size_t chunk, int pos,
                  double timeout_s, char *err, size_t cap) {
    (void)d, (void)stream;
    PNC_LIVE(c);
    if (c->nranks == 1 || chunk == 0)
        return 0;
    /* Every peer gets this member's chunk; peer r's lands at chunk r. */
    group_reset();
    group.open = 1;
    int failed = 0;
    for (int q = 0; !failed && q < c->nranks; ++q)
        if (q != pos)
            failed = queue(c, 1, q, buf + (size_t)pos * chunk, chunk, "ncclAllGather with") ||
                     queue(c, 0, q, buf + (size_t)q * chunk, chunk, "ncclAllGather with");
    if (failed) {
        group_reset();
        snprintf(err, cap, "ncclAllGather: out of host memory");
        return 1;
    }
    return end_group("ncclAllGather", timeout_s, err, cap);
}

int pnc_bcast(PncComm *c, PcuDev *d, int stream, float *buf, size_t n, int root, double timeout_s,
              char *err, size_t cap) {
    (void)d, (void)stream, (void)timeout_s;
    PNC_LIVE(c);
    if (!group.open) {
        snprintf(err, cap, "ncclBroadcast: outside a group (the table's are inside one)");
        return 1;
    }
    int failed = 0;
    for (int q = 0; !failed && q < c->nranks; ++q)
        if (c->rank == root && q != root)
            failed = queue(c, 1, q, buf, n, "ncclBroadcast to");
    if (!failed && c->rank != root)
        failed = queue(c, 0, root, buf, n, "ncclBroadcast from");
    if (failed) {
        snprintf(err, cap, "ncclBroadcast: out of host memory");
        group.failed = 1;
        snprintf(group.err, sizeof group.err, "%s", err);
    }
    return failed;
}

/* The emulation's streams run in order on the calling thread. */
int pnc_sync(PncComm *c, PcuDev *d, double timeout_s, char *err, size_t cap) {
    (void)d, (void)timeout_s;
    PNC_LIVE(c);
    return 0;
}

int pnc_host_allgather(PncComm *c, int rank, int nranks, void *buf, size_t per_rank,
                       double timeout_s, char *err, size_t cap) {
    PNC_LIVE(c);
    if (nranks == 1 || per_rank == 0)
        return 0;
    /* Bytes as whole floats: the rows are padded to a float's size. */
    size_t nf = (per_rank + sizeof(float) - 1) / sizeof(float);
    float *rows = calloc((size_t)nranks * nf, sizeof(float));
    if (!rows) {
        snprintf(err, cap, "ncclAllGather (host exchange): out of host memory");
        return 1;
    }
    memcpy(rows + (size_t)rank * nf, (char *)buf + (size_t)rank * per_rank, per_rank);
    int rc = pnc_allgather(c, NULL, 0, rows, nf, rank, timeout_s, err, cap);
    for (int r = 0; !rc && r < nranks; ++r)
        memcpy((char *)buf + (size_t)r * per_rank, rows + (size_t)r * nf, per_rank);
    free(rows);
    return rc;
}
