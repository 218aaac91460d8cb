/* daemon/clients.h: tesserad's client connections (clients.c).
 *
 * The connections of the event loop's epoll set (server.c): accepting them
 * within the connection limits, reading request lines and handing each to
 * the handlers, queuing the replies and writing them without blocking.
 *
 * No single user can deny service to another (docs/leases.md, "Limits"):
 *  - connections: at most max_clients_per_user per uid, and the last
 *    admin_reserved_clients of max_clients are for admins only;
 *  - replies: a client whose unsent replies pass TSR_CLIENTS_OUT_HIGH is not
 *    read from until it takes them (so one client queues at most that plus
 *    one reply); the unsent bytes of a user's clients, and of all clients,
 *    are capped, and when a cap would be passed the client with the most
 *    unsent bytes (of that user, or of all) is disconnected: the one that
 *    does not read goes first, before it costs anyone else;
 *  - a client with unsent replies that makes no progress for client_timeout
 *    is closed like an idle one.
 *
 * A connection is freed only while its own event is handled or between
 * batches, so the epoll events of a batch stay valid. Single-threaded. */
#ifndef TESSERA_DAEMON_CLIENTS_H
#define TESSERA_DAEMON_CLIENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/json.h"
#include "daemon/daemon.h"

#define TSR_CLIENTS_OUT_HIGH (256u << 10) /* unsent bytes past which a client's requests wait */

typedef struct tsr_client_s tsr_client_t;
typedef struct tsr_client_user_s tsr_client_user_t;

/* The connections. Its address is the epoll tag of the listening socket. */
typedef struct {
  tsr_daemon_t *d;
  int ep, listen_fd;
  tsr_client_t *conns;      /* every connection */
  tsr_client_t *dirty;      /* connections with replies queued in this batch */
  tsr_client_t *ready;      /* connections with requests waiting in their buffer */
  tsr_json_writer_t reply;  /* the reply being written, reused */
  tsr_client_user_t *users; /* max_clients slots: at most one user per connection */
  uint64_t queued;          /* unsent reply bytes of every connection */
  uint64_t dropped_slow;    /* connections closed for not reading their replies */
  uint32_t nconns;
  bool listen_paused; /* out of file descriptors: not accepting until one closes */
} tsr_clients_t;

/* Sets up for the listening socket `listen_fd`, which the caller has added
 * to epoll set `ep` with `cs` as its tag. False when out of memory. */
bool tsr_clients_init(tsr_clients_t *cs, tsr_daemon_t *d, int ep, int listen_fd);
/* Closes every connection and frees what init took. */
void tsr_clients_free(tsr_clients_t *cs);

/* Accepts every pending connection (the listening socket's event). */
void tsr_clients_accept(tsr_clients_t *cs);
/* Handles one epoll event of connection `c` (its tag): replies of earlier
 * batches go out first, then the requests it sent are read and handled.
 * True when it read requests. */
bool tsr_clients_event(tsr_clients_t *cs, tsr_client_t *c, uint32_t events);

/* After a batch's events, in this order: the requests that waited for
 * their client to take its replies (true if any ran); the clients
 * disconnected for their unsent replies closed; then, once the batch's
 * lock files and audit lines are durable, every queued reply written. */
bool tsr_clients_run_ready(tsr_clients_t *cs);
void tsr_clients_close_doomed(tsr_clients_t *cs);
void tsr_clients_send_replies(tsr_clients_t *cs);

/* Gives each answer of the daemon's waiting creates (daemon/waits.h) to
 * the connection that waits on it, and lets that connection's next
 * requests run. Before tsr_clients_send_replies, after the sync. */
void tsr_clients_deliver(tsr_clients_t *cs);

/* Closes the connections idle (or not taking their replies) for longer
 * than client_timeout. */
void tsr_clients_close_idle(tsr_clients_t *cs, uint64_t now_ns);

#endif
