/* daemon/metrics_peer.h: who is on the other end of a /metrics connection,
 * what that client may see, and whether one more of its connections is let
 * in (metrics_peer.c). Pure decisions, but for the peer lookup (one
 * NETLINK_SOCK_DIAG query) and the host's own addresses; the metrics
 * thread's. */
#ifndef TESSERA_DAEMON_METRICS_PEER_H
#define TESSERA_DAEMON_METRICS_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/metrics.h"

/* Who is at the other end of a /metrics connection. */
typedef enum tsr_metrics_peer_kind_e {
  TSR_METRICS_PEER_UNKNOWN = 0, /* not known as remote, but the kernel named no uid */
  TSR_METRICS_PEER_LOCAL,       /* a socket of this host's network namespace: uid */
  TSR_METRICS_PEER_REMOTE,      /* the kernel holds no socket at its end */
} tsr_metrics_peer_kind_t;

typedef struct tsr_metrics_peer_s {
  tsr_metrics_peer_kind_t kind;
  uint32_t uid;     /* with TSR_METRICS_PEER_LOCAL */
  uint8_t addr[16]; /* its address; IPv4 as ::ffff:a.b.c.d */
} tsr_metrics_peer_t;

/* Finds who holds the other end of accepted TCP socket `fd`, whose peer
 * address accept gave as `peer`, through NETLINK_SOCK_DIAG socket `diag_fd`
 * (-1: none, every peer is unknown): the socket whose source is the peer's
 * address and whose destination is ours (inet_diag's exact lookup,
 * idiag_uid). A socket no process holds any more (a time-wait socket
 * reports uid 0) names no uid. Not found: remote, unless the peer's address
 * is one of this host's (a local peer that went away, or one the exact
 * lookup cannot see, is never taken for a remote one). */
struct sockaddr_storage;
tsr_metrics_peer_t tsr_metrics_peer_find(int diag_fd, int fd, const struct sockaddr_storage *peer);
/* Whether `addr` (16 bytes, IPv4 as ::ffff:a.b.c.d) is an address of this
 * host, loopback included. The metrics thread's (a cache without a lock). */
bool tsr_metrics_addr_local(const uint8_t addr[16]);
/* Whether two peers are the same client: local ones by uid; every unknown
 * one is one client; remote ones by address (IPv6 by its /64). */
bool tsr_metrics_peer_same_client(const tsr_metrics_peer_t *a, const tsr_metrics_peer_t *b);
/* What `peer` may see: a local peer everything if `privileged` (uid 0, the
 * daemon's, admin_group or metrics_group: the caller asks), else its own
 * leases; a remote peer everything if `remote_full`, else the counts; an
 * unknown peer the counts. */
tsr_metrics_audience_t tsr_metrics_audience_decide(const tsr_metrics_peer_t *peer, bool privileged, bool remote_full);

/* One connection of the HTTP side, as its admission sees it. */
typedef struct tsr_metrics_conn_s {
  tsr_metrics_peer_t peer;
  uint64_t accepted_ns; /* monotonic */
  bool answered;        /* its request was whole and answered: the deadline is over */
  bool closing;         /* shut down; libmicrohttpd has yet to see it and close it */
  bool fresh;           /* let in since libmicrohttpd last ran: not read yet, never a victim */
  int fd;               /* its socket, libmicrohttpd's: only ever shut down, never closed */
} tsr_metrics_conn_t;

typedef enum tsr_metrics_admission_e {
  TSR_METRICS_ADMIT = 0,
  TSR_METRICS_ADMIT_EVICT,   /* after closing the victim */
  TSR_METRICS_REFUSE_CLIENT, /* the client holds per_client connections already */
  TSR_METRICS_REFUSE_FULL,   /* `slots` connections are open, closing ones included */
} tsr_metrics_admission_t;

/* The connection to give up for a newcomer: the oldest still sending its
 * request, else the oldest; never one closing or fresh. False: none. */
bool tsr_metrics_pick_victim(tsr_metrics_conn_t *const *conns, size_t count, size_t *out_victim);
/* Whether a new connection from `peer` may join the `count` open ones:
 * refused past `per_client` of its client's (closing ones not counted) or
 * when every one of `slots` is taken; past `total`, let in by closing the
 * one tsr_metrics_pick_victim picks (its index in *out_victim), refused when
 * it picks none. */
tsr_metrics_admission_t tsr_metrics_admission_decide(tsr_metrics_conn_t *const *conns, size_t count,
                                                     const tsr_metrics_peer_t *peer, size_t per_client, size_t total,
                                                     size_t slots, size_t *out_victim);

#endif
