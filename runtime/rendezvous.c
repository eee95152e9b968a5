/*
 * rendezvous.c — the TCP and file rendezvous of rendezvous.h.
 *
 * Sockets are non-blocking and every read, write, connect and accept
 * waits in poll() for at most what is left of its deadline. Writes use
 * MSG_NOSIGNAL, so a peer that went away is an error, not SIGPIPE.
 *
 * The TCP handshake: a connecting rank writes its hello (a magic word,
 * its rank, the world size it was told: three 32-bit words in network
 * order); rank 0 checks it and, once every rank is there or it gives up,
 * writes one word to each connected rank: RDV_GO, RDV_REFUSED (this
 * rank's hello was wrong) or RDV_GAVE_UP (rank 0 stopped waiting), so a
 * rank learns why rather than seeing a closed socket.
 */
#define _POSIX_C_SOURCE 200809L
#include "rendezvous.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RDV_MAGIC 0x50524456u /* "PRDV" */
enum { RDV_GO = 0, RDV_REFUSED = 1, RDV_GAVE_UP = 2 };
/* A refused connection is tried again after this long. */
#define RETRY_MS 100

struct PrimeRdv {
    PrimeRdvConfig cfg;
    int listen_fd; /* rank 0, -1 otherwise */
    int port;
    int *fd; /* rank 0: per rank (fd[0] unused); others: fd[0] is rank 0 */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* poll()'s timeout for what is left until deadline, at most cap_ms. */
static int left_ms(double deadline, int cap_ms) {
    double left = (deadline - now_s()) * 1000.0;
    if (left <= 0)
        return 0;
    return left < cap_ms ? (int)left + 1 : cap_ms;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* strerror(e) with its first letter in lower case. */
static void reason(int e, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", strerror(e));
    if (buf[0])
        buf[0] = (char)tolower((unsigned char)buf[0]);
}

void prime_rdv_config_init(PrimeRdvConfig *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->rank = cfg->world_size = cfg->local_rank = cfg->port = -1;
    cfg->timeout_s = 60;
}

/* A whole decimal number in [lo, hi]; 0 when s is not one. */
static int parse_int(const char *s, long lo, long hi, int *out) {
    char *end = NULL;
    errno = 0;
    long v = s && *s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || errno || !end || *end || v < lo || v > hi)
        return 0;
    *out = (int)v;
    return 1;
}

static int env_int(const char *name, long lo, long hi, int *out, char *err, size_t cap) {
    const char *v = getenv(name);
    if (!v)
        return 0;
    if (!parse_int(v, lo, hi, out)) {
        snprintf(err, cap, "%s '%s' is not a number from %ld to %ld", name, v, lo, hi);
        return -1;
    }
    return 0;
}

int prime_rdv_config_env(PrimeRdvConfig *cfg, char *err, size_t cap) {
    if (env_int("RANK", 0, 65535, &cfg->rank, err, cap) ||
        env_int("WORLD_SIZE", 1, 65536, &cfg->world_size, err, cap) ||
        env_int("LOCAL_RANK", 0, 1023, &cfg->local_rank, err, cap) ||
        env_int("MASTER_PORT", 1, 65535, &cfg->port, err, cap))
        return -1;
    const char *addr = getenv("MASTER_ADDR");
    if (addr) {
        if (!*addr || strlen(addr) >= sizeof cfg->host) {
            snprintf(err, cap, "MASTER_ADDR '%s' is not a host name or address", addr);
            return -1;
        }
        snprintf(cfg->host, sizeof cfg->host, "%s", addr);
    }
    return 0;
}

/* "HOST:PORT" (the last colon splits, so "[::1]:29500" works too). */
static int parse_master(PrimeRdvConfig *cfg, const char *s, char *err, size_t cap) {
    const char *colon = strrchr(s, ':');
    size_t hl = colon ? (size_t)(colon - s) : 0;
    if (colon && hl > 1 && s[0] == '[' && s[hl - 1] == ']') {
        s++;
        hl -= 2;
    }
    int port = 0;
    if (!colon || hl == 0 || hl >= sizeof cfg->host || !parse_int(colon + 1, 1, 65535, &port)) {
        snprintf(err, cap, "--master needs ADDR:PORT with a port from 1 to 65535, not '%s'", s);
        return -1;
    }
    memcpy(cfg->host, s, hl);
    cfg->host[hl] = 0;
    cfg->port = port;
    return 0;
}

int prime_rdv_config_option(PrimeRdvConfig *cfg, int argc, char **argv, int *i, char *err,
                            size_t cap) {
    const char *a = argv[*i];
    int which = strcmp(a, "--rank") == 0           ? 1
                : strcmp(a, "--world-size") == 0   ? 2
                : strcmp(a, "--master") == 0       ? 3
                : strcmp(a, "--nccl-id-file") == 0 ? 4
                                                   : 0;
    if (!which)
        return 0;
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!v) {
        snprintf(err, cap, "%s needs a value", a);
        return -1;
    }
    *i += 1;
    if (which == 1 && !parse_int(v, 0, 65535, &cfg->rank)) {
        snprintf(err, cap, "--rank needs a number from 0 to 65535, not '%s'", v);
        return -1;
    }
    if (which == 2 && !parse_int(v, 1, 65536, &cfg->world_size)) {
        snprintf(err, cap, "--world-size needs a number from 1 to 65536, not '%s'", v);
        return -1;
    }
    if (which == 3 && parse_master(cfg, v, err, cap))
        return -1;
    if (which == 4) {
        if (!*v || strlen(v) >= sizeof cfg->id_file) {
            snprintf(err, cap, "--nccl-id-file needs a path");
            return -1;
        }
        snprintf(cfg->id_file, sizeof cfg->id_file, "%s", v);
    }
    return 1;
}

int prime_rdv_config_check(const PrimeRdvConfig *cfg, char *err, size_t cap) {
    if (cfg->world_size < 0) {
        snprintf(err, cap, "the world size is not given (WORLD_SIZE or --world-size)");
        return -1;
    }
    if (cfg->rank < 0 && cfg->world_size > 1) {
        snprintf(err, cap, "this process's rank is not given (RANK or --rank)");
        return -1;
    }
    if (cfg->rank >= cfg->world_size) {
        snprintf(err, cap, "rank %d is not below the world size %d", cfg->rank, cfg->world_size);
        return -1;
    }
    if (cfg->world_size > 1 && !cfg->id_file[0] && (!cfg->host[0] || cfg->port < 1)) {
        snprintf(err, cap,
                 "a world of %d ranks needs rank 0's address (MASTER_ADDR and MASTER_PORT, or "
                 "--master ADDR:PORT) or an id file (--nccl-id-file PATH)",
                 cfg->world_size);
        return -1;
    }
    return 0;
}

static int set_nonblocking(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void close_fd(int *fd) {
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Writes n bytes; what names the exchange for the message. */
/* The socket to peer: rank 0 has one per rank, the others one to rank 0. */
static int fd_of(const PrimeRdv *rdv, int peer) {
    return rdv->cfg.rank == 0 ? rdv->fd[peer] : rdv->fd[0];
}

/* Writes n bytes to peer on fd; what names the exchange for the message. */
static int send_all(const PrimeRdv *rdv, int fd, int peer, const void *buf, size_t n,
                    double deadline, const char *what, char *err, size_t cap) {
    const char *p = buf;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            char why[128];
            reason(errno, why, sizeof why);
            snprintf(err, cap, "rank %d: send to rank %d (%s): %s", rdv->cfg.rank, peer, what, why);
            return -1;
        }
        struct pollfd pfd = {fd, POLLOUT, 0};
        int ms = left_ms(deadline, 1000);
        if (ms == 0) {
            snprintf(err, cap, "rank %d: send to rank %d (%s): not taken within %g s",
                     rdv->cfg.rank, peer, what, rdv->cfg.timeout_s);
            return PRIME_RDV_TIMEOUT;
        }
        (void)poll(&pfd, 1, ms);
    }
    return 0;
}

/* Reads n bytes from peer on fd (peer -1: a rank not known yet). */
static int recv_all(const PrimeRdv *rdv, int fd, int peer, void *buf, size_t n, double deadline,
                    const char *what, char *err, size_t cap) {
    char *p = buf;
    while (n > 0) {
        ssize_t k = recv(fd, p, n, 0);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        char who[32];
        if (peer < 0)
            snprintf(who, sizeof who, "a connecting rank");
        else
            snprintf(who, sizeof who, "rank %d", peer);
        if (k == 0) {
            snprintf(err, cap, "rank %d: recv from %s (%s): the connection was closed",
                     rdv->cfg.rank, who, what);
            return -1;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            char why[128];
            reason(errno, why, sizeof why);
            snprintf(err, cap, "rank %d: recv from %s (%s): %s", rdv->cfg.rank, who, what, why);
            return -1;
        }
        struct pollfd pfd = {fd, POLLIN, 0};
        int ms = left_ms(deadline, 1000);
        if (ms == 0) {
            snprintf(err, cap, "rank %d: recv from %s (%s): no answer within %g s", rdv->cfg.rank,
                     who, what, rdv->cfg.timeout_s);
            return -1;
        }
        (void)poll(&pfd, 1, ms);
    }
    return 0;
}

static PrimeRdv *rdv_new(const PrimeRdvConfig *cfg) {
    PrimeRdv *rdv = calloc(1, sizeof *rdv);
    int size = cfg->world_size > 0 ? cfg->world_size : 1;
    if (!rdv || !(rdv->fd = malloc(sizeof(int) * (size_t)size))) {
        free(rdv);
        return NULL;
    }
    rdv->cfg = *cfg;
    rdv->cfg.world_size = size;
    if (rdv->cfg.rank < 0)
        rdv->cfg.rank = 0;
    rdv->listen_fd = -1;
    rdv->port = cfg->port;
    for (int r = 0; r < size; ++r)
        rdv->fd[r] = -1;
    return rdv;
}

int prime_rdv_listen(const PrimeRdvConfig *cfg, PrimeRdv **out, char *err, size_t cap) {
    *out = NULL;
    PrimeRdv *rdv = rdv_new(cfg);
    if (!rdv) {
        snprintf(err, cap, "rank %d: out of memory", cfg->rank);
        return -1;
    }
    if (rdv->cfg.rank != 0 || rdv->cfg.world_size == 1) {
        *out = rdv;
        return 0;
    }
    struct sockaddr_in6 a;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons((uint16_t)(cfg->port > 0 ? cfg->port : 0));
    /* Both IPv4 and IPv6 peers, or IPv4 alone where the host has no IPv6. */
    struct sockaddr_in a4;
    memset(&a4, 0, sizeof a4);
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    a4.sin_port = a.sin6_port;
    int fd = socket(AF_INET6, SOCK_STREAM, 0), off = 0, on = 1, v6 = fd >= 0;
    if (!v6)
        fd = socket(AF_INET, SOCK_STREAM, 0);
    const char *call = "socket";
    if (fd >= 0) {
        if (v6)
            (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        int bound = v6 ? bind(fd, (struct sockaddr *)&a, sizeof a)
                       : bind(fd, (struct sockaddr *)&a4, sizeof a4);
        call = bound != 0                 ? "bind"
               : listen(fd, 128) != 0     ? "listen"
               : set_nonblocking(fd) != 0 ? "fcntl"
                                          : NULL;
    }
    if (call) {
        char why[128];
        reason(errno, why, sizeof why);
        snprintf(err, cap, "rank 0: %s on port %d: %s", call, cfg->port > 0 ? cfg->port : 0, why);
        if (fd >= 0)
            close(fd);
        prime_rdv_close(rdv);
        return -1;
    }
    socklen_t len = v6 ? sizeof a : sizeof a4;
    if (getsockname(fd, v6 ? (struct sockaddr *)&a : (struct sockaddr *)&a4, &len) == 0)
        rdv->port = ntohs(v6 ? a.sin6_port : a4.sin_port);
    rdv->listen_fd = fd;
    *out = rdv;
    return 0;
}

int prime_rdv_port(const PrimeRdv *rdv) {
    return rdv->port;
}

int prime_rdv_rank(const PrimeRdv *rdv) {
    return rdv->cfg.rank;
}

void prime_rdv_set_timeout(PrimeRdv *rdv, double timeout_s) {
    rdv->cfg.timeout_s = timeout_s;
}

int prime_rdv_size(const PrimeRdv *rdv) {
    return rdv->cfg.world_size;
}

/* Reads one connection's hello; returns its rank, -1 when the hello is
 * wrong (err says why, and the peer is told), -2 when it did not come or
 * is not a rank's (the connection is dropped). */
static int take_hello(PrimeRdv *rdv, int fd, double deadline, char *err, size_t cap) {
    int size = rdv->cfg.world_size;
    uint32_t hello[3];
    if (recv_all(rdv, fd, -1, hello, sizeof hello, deadline, "hello", err, cap))
        return -2;
    uint32_t magic = ntohl(hello[0]), rank = ntohl(hello[1]), world = ntohl(hello[2]);
    if (magic != RDV_MAGIC)
        return -2; /* not a rank of a world: dropped */
    if ((int)world != size)
        snprintf(err, cap, "rank 0: accept: rank %u says the world has %u ranks, rank 0 says %d",
                 rank, world, size);
    else if (rank == 0 || (int)rank >= size)
        snprintf(err, cap, "rank 0: accept: a rank %u in a world of %d ranks", rank, size);
    else if (rdv->fd[rank] >= 0)
        snprintf(err, cap, "rank 0: accept: rank %u connected twice", rank);
    else
        return (int)rank;
    uint32_t no = htonl(RDV_REFUSED);
    (void)send(fd, &no, sizeof no, MSG_NOSIGNAL);
    return -1;
}

/* Rank 0: every other rank connects and says hello. */
static int accept_all(PrimeRdv *rdv, char *err, size_t cap) {
    int size = rdv->cfg.world_size, have = 1, bad = 0;
    double deadline = now_s() + rdv->cfg.timeout_s;
    while (have < size && !bad) {
        struct pollfd pfd = {rdv->listen_fd, POLLIN, 0};
        int ms = left_ms(deadline, 1000);
        if (ms == 0)
            break;
        if (poll(&pfd, 1, ms) <= 0)
            continue;
        int fd = accept(rdv->listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        int on = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        if (set_nonblocking(fd) != 0) {
            close(fd);
            continue;
        }
        int r = take_hello(rdv, fd, deadline, err, cap);
        if (r > 0) {
            rdv->fd[r] = fd;
            have++;
        } else {
            close(fd);
            bad = r == -1;
        }
    }
    uint32_t word = htonl(have == size ? RDV_GO : RDV_GAVE_UP);
    for (int r = 1; r < size; ++r)
        if (rdv->fd[r] >= 0)
            (void)send(rdv->fd[r], &word, sizeof word, MSG_NOSIGNAL);
    if (have == size)
        return 0;
    if (bad)
        return -1;
    int len =
        snprintf(err, cap, "rank 0: accept: %d of %d ranks connected within %g s (missing:", have,
                 size, rdv->cfg.timeout_s);
    for (int r = 1; r < size && len > 0 && (size_t)len < cap; ++r)
        if (rdv->fd[r] < 0)
            len += snprintf(err + len, cap - (size_t)len, " %d", r);
    if (len > 0 && (size_t)len < cap)
        snprintf(err + len, cap - (size_t)len, ")");
    return PRIME_RDV_TIMEOUT;
}

/* One attempt to connect to ai within the deadline: the socket, or -1
 * with *e the reason. */
static int try_connect(const struct addrinfo *ai, double deadline, int *e) {
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0 || set_nonblocking(fd) != 0) {
        *e = errno;
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        *e = errno;
        close(fd);
        return -1;
    }
    struct pollfd pfd = {fd, POLLOUT, 0};
    int ms = left_ms(deadline, 2000), soerr = 0;
    socklen_t len = sizeof soerr;
    if (poll(&pfd, 1, ms) <= 0) {
        *e = ETIMEDOUT;
        close(fd);
        return -1;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 || soerr != 0) {
        *e = soerr ? soerr : errno;
        close(fd);
        return -1;
    }
    return fd;
}

/* A rank other than 0: connects to rank 0 (again while it refuses), says
 * hello and waits for the word that every rank is there. */
static int join(PrimeRdv *rdv, char *err, size_t cap) {
    const PrimeRdvConfig *cfg = &rdv->cfg;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(cfg->host, port, &hints, &res);
    if (gai != 0) {
        snprintf(err, cap, "rank %d: resolve %s: %s", cfg->rank, cfg->host, gai_strerror(gai));
        return -1;
    }
    double deadline = now_s() + cfg->timeout_s;
    int fd = -1, e = ETIMEDOUT;
    while (fd < 0) {
        for (const struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
            fd = try_connect(ai, deadline, &e);
        if (fd >= 0 || left_ms(deadline, RETRY_MS) == 0)
            break;
        sleep_ms(left_ms(deadline, RETRY_MS));
    }
    freeaddrinfo(res);
    if (fd < 0) {
        char why[128];
        reason(e, why, sizeof why);
        snprintf(err, cap, "rank %d: connect to %s:%d: %s after %g s", cfg->rank, cfg->host,
                 cfg->port, why, cfg->timeout_s);
        return PRIME_RDV_TIMEOUT;
    }
    int on = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    rdv->fd[0] = fd;
    uint32_t hello[3] = {htonl(RDV_MAGIC), htonl((uint32_t)cfg->rank),
                         htonl((uint32_t)cfg->world_size)};
    uint32_t word = 0;
    int rc = send_all(rdv, fd, 0, hello, sizeof hello, deadline, "hello", err, cap);
    /* Rank 0 gives up its wait for the others at most timeout_s after
     * this rank connected: a second longer, and this rank hears why. */
    double word_deadline = now_s() + cfg->timeout_s + 1.0;
    if (!rc)
        rc = recv_all(rdv, fd, 0, &word, sizeof word, word_deadline, "every rank connected", err,
                      cap);
    if (rc)
        return rc;
    word = ntohl(word);
    if (word == RDV_GO)
        return 0;
    snprintf(err, cap, "rank %d: connect to %s:%d: %s", cfg->rank, cfg->host, cfg->port,
             word == RDV_REFUSED
                 ? "rank 0 refused this rank (another rank number or world size than it has)"
                 : "rank 0 gave up waiting for the other ranks");
    return -1;
}

int prime_rdv_connect(PrimeRdv *rdv, char *err, size_t cap) {
    if (rdv->cfg.world_size == 1)
        return 0;
    return rdv->cfg.rank == 0 ? accept_all(rdv, err, cap) : join(rdv, err, cap);
}

int prime_rdv_open(const PrimeRdvConfig *cfg, PrimeRdv **out, char *err, size_t cap) {
    if (prime_rdv_listen(cfg, out, err, cap))
        return -1;
    int rc = prime_rdv_connect(*out, err, cap);
    if (rc) {
        prime_rdv_close(*out);
        *out = NULL;
    }
    return rc;
}

void prime_rdv_close(PrimeRdv *rdv) {
    if (!rdv)
        return;
    close_fd(&rdv->listen_fd);
    for (int r = 0; r < rdv->cfg.world_size; ++r)
        close_fd(&rdv->fd[r]);
    free(rdv->fd);
    free(rdv);
}

int prime_rdv_bcast(PrimeRdv *rdv, void *buf, size_t n, char *err, size_t cap) {
    double deadline = now_s() + rdv->cfg.timeout_s;
    if (rdv->cfg.rank != 0)
        return recv_all(rdv, rdv->fd[0], 0, buf, n, deadline, "broadcast", err, cap);
    int rc = 0;
    for (int r = 1; r < rdv->cfg.world_size && !rc; ++r)
        rc = send_all(rdv, rdv->fd[r], r, buf, n, deadline, "broadcast", err, cap);
    return rc;
}

int prime_rdv_allgather(PrimeRdv *rdv, void *buf, size_t per_rank, char *err, size_t cap) {
    int size = rdv->cfg.world_size, rank = rdv->cfg.rank;
    char *all = buf;
    double deadline = now_s() + rdv->cfg.timeout_s;
    if (rank != 0)
        return send_all(rdv, fd_of(rdv, 0), 0, all + (size_t)rank * per_rank, per_rank, deadline,
                        "all-gather", err, cap) ||
               recv_all(rdv, fd_of(rdv, 0), 0, all, (size_t)size * per_rank, deadline, "all-gather",
                        err, cap);
    for (int r = 1; r < size; ++r)
        if (recv_all(rdv, fd_of(rdv, r), r, all + (size_t)r * per_rank, per_rank, deadline,
                     "all-gather", err, cap))
            return -1;
    for (int r = 1; r < size; ++r)
        if (send_all(rdv, fd_of(rdv, r), r, all, (size_t)size * per_rank, deadline, "all-gather",
                     err, cap))
            return -1;
    return 0;
}

int prime_rdv_id_write(const char *path, int rank, const void *id, size_t n, char *err,
                       size_t cap) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const char *call = fd < 0 ? "open" : NULL;
    if (!call && write(fd, id, n) != (ssize_t)n)
        call = "write";
    if (!call && fsync(fd) != 0)
        call = "fsync";
    if (fd >= 0 && close(fd) != 0 && !call)
        call = "close";
    if (!call && rename(tmp, path) != 0)
        call = "rename";
    if (!call)
        return 0;
    char why[128];
    reason(errno, why, sizeof why);
    snprintf(err, cap, "rank %d: write the NCCL id file %s (%s): %s", rank, path, call, why);
    (void)unlink(tmp);
    return -1;
}

int prime_rdv_id_read(const char *path, int rank, void *id, size_t n, double timeout_s, char *err,
                      size_t cap) {
    double deadline = now_s() + timeout_s;
    for (;;) {
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            struct stat st = {0};
            ssize_t k = -1;
            if (fstat(fd, &st) == 0 && (size_t)st.st_size == n)
                k = read(fd, id, n);
            int e = errno;
            close(fd);
            if (k == (ssize_t)n)
                return 0;
            if ((size_t)st.st_size != n)
                snprintf(err, cap, "rank %d: read the NCCL id file %s: %lld bytes, not %zu", rank,
                         path, (long long)st.st_size, n);
            else
                snprintf(err, cap, "rank %d: read the NCCL id file %s: %s", rank, path,
                         strerror(e));
            return -1;
        }
        if (errno != ENOENT) {
            char why[128];
            reason(errno, why, sizeof why);
            snprintf(err, cap, "rank %d: open the NCCL id file %s: %s", rank, path, why);
            return -1;
        }
        if (left_ms(deadline, 50) == 0) {
            snprintf(err, cap, "rank %d: open the NCCL id file %s: not there after %g s", rank,
                     path, timeout_s);
            return PRIME_RDV_TIMEOUT;
        }
        sleep_ms(left_ms(deadline, 50));
    }
}
