/* metrics_http.c: GET /metrics over HTTP, from a thread of its own.
 *
 * The thread accepts every connection itself, finds who is at the other end
 * (metrics_peer.c), applies the connection limits, and only then hands the
 * socket to libmicrohttpd (MHD_add_connection), whose loop it runs itself:
 * no internal thread, epoll in "external" mode (MHD_run after our own
 * epoll_wait, whose set holds libmicrohttpd's epoll descriptor). The same
 * thread sweeps connections past their request deadline.
 *
 * Why closing a connection from here is race-free. libmicrohttpd closes a
 * connection's descriptor only inside the calls this thread makes into it
 * (MHD_run, MHD_add_connection; MHD_stop_daemon after the thread is
 * joined), and in 0.9.75 it calls our MHD_OPTION_NOTIFY_CONNECTION callback
 * with MHD_CONNECTION_NOTIFY_CLOSED before it closes the descriptor, in the
 * same call (daemon.c: MHD_cleanup_connections, and the failure path of
 * new_connection_process_). The callback takes the connection out of our
 * table. So between those calls every descriptor in the table is open and
 * still that connection's: no other thread can close it or reuse its
 * number. To end a connection we shutdown() it (never close()): its next
 * read in MHD_run sees the end of the stream and libmicrohttpd closes it
 * its own way, after telling us. With libmicrohttpd's own polling thread
 * none of this would hold: the sweep would race its closes, and a shutdown
 * could hit a descriptor already closed and reused by another thread.
 *
 * MHD_OPTION_CONNECTION_TIMEOUT is an idle timeout: a client that sends a
 * byte now and then never meets it. The deadlines here are absolute: a
 * connection that has not sent its whole request (the access handler ran)
 * within metrics_request_timeout of its accept is shut down, and one whose
 * answer it has not read within twice that (a client that reads a byte now
 * and then) too. */
#include <errno.h>
#include <linux/netlink.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "base/time.h"
#include "daemon/config.h"
#include "daemon/identity.h"
#include "daemon/metrics.h"
#include "daemon/metrics_http.h"
#include "daemon/metrics_peer.h"

/* Connections libmicrohttpd may hold: the limit, and those shut down but
 * not yet closed (at most one batch of evictions between two MHD_run). */
#define TSR__SLOTS (2 * TSR_METRICS_CONNECTIONS)
/* Connections let in between two runs of libmicrohttpd's loop (those are
 * fresh until it runs: never evicted before their request is read). */
#define TSR__ADMIT_BATCH 8
/* Connections refused between two runs of the loop (each costs an accept,
 * a lookup and a close). */
#define TSR__REFUSE_BATCH 256

struct tsr_metrics_s {
  /* set before the thread starts, then read-only */
  struct MHD_Daemon *mhd;
  int listen_fd, epoll_fd, wake_fd, diag_fd;
  uint64_t request_timeout_ns;
  bool remote_full;
  char admin_group[sizeof(((tsr_config_t *)0)->admin_group)];
  char metrics_group[sizeof(((tsr_config_t *)0)->metrics_group)];
  pthread_t thread;
  bool thread_started;
  /* the metrics thread's own (and MHD_stop_daemon's, after the join) */
  tsr_metrics_conn_t *conns[TSR__SLOTS];
  size_t conn_count;
  tsr_metrics_conn_t *adding;   /* handed to MHD_add_connection, not yet STARTED */
  uint64_t accept_paused_until; /* monotonic; 0: the listening socket is watched */
  uint64_t starved_logged_ns;   /* when running out of descriptors was last logged */
  struct {
    uint32_t uid;
    bool privileged;
    uint64_t until_ns; /* monotonic; 0: an empty entry */
  } seen[64];          /* who is privileged, looked up at most once a minute per uid */
  /* shared with the event loop */
  pthread_mutex_t mu;
  tsr_metrics_snapshot_t snap;
};

/* ---- answers ------------------------------------------------------------------- */

/* Every answer closes its connection: one request per connection, so that
 * the deadline of a connection is the deadline of its one request, and an
 * idle keep-alive connection holds no slot. */
static enum MHD_Result tsr__reply(struct MHD_Connection *conn, unsigned status, const char *type, char *body,
                                  size_t len) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ret = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

/* Whether local `uid` sees everything: root, the daemon's user and admins,
 * or a member of metrics_group. Asked when the request is whole, never for
 * a connection that is refused or trickles; the user database (NSS, which
 * may be a network service) is asked at most once a minute per uid, as
 * this thread serves everyone. */
static bool tsr__privileged(tsr_metrics_t *m, uint32_t uid) {
  uint64_t now = tsr_time_mono_ns();
  size_t k = 0;
  for (size_t i = 0; i < sizeof(m->seen) / sizeof(m->seen[0]); i++) {
    if (m->seen[i].until_ns > now && m->seen[i].uid == uid) return m->seen[i].privileged;
    if (m->seen[i].until_ns < m->seen[k].until_ns) k = i; /* the stalest, to replace */
  }
  bool p = tsr_identity_uid_exempt_or_in(uid, m->admin_group, m->metrics_group);
  m->seen[k].uid = uid;
  m->seen[k].privileged = p;
  m->seen[k].until_ns = now + 60 * TSR_NS_PER_S;
  return p;
}

static enum MHD_Result tsr__answer(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                   const char *version, const char *upload, size_t *upload_size, void **state) {
  (void)version, (void)upload, (void)state;
  tsr_metrics_t *m = cls;
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  tsr_metrics_conn_t *c = ci ? ci->socket_context : NULL;
  if (c) c->answered = true; /* the request is whole: its deadline is met */
  if (*upload_size) {
    *upload_size = 0; /* a body is not read */
    return MHD_YES;
  }
  const char *plain = "text/plain; charset=utf-8";
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
    return tsr__reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, plain, strdup("GET /metrics\n"), 13);
  if (strcmp(url, "/metrics") != 0)
    return tsr__reply(conn, MHD_HTTP_NOT_FOUND, plain, strdup("not found: the metrics are at /metrics\n"), 39);
  tsr_metrics_peer_t unknown = {.kind = TSR_METRICS_PEER_UNKNOWN};
  const tsr_metrics_peer_t *peer = c ? &c->peer : &unknown;
  bool privileged = peer->kind == TSR_METRICS_PEER_LOCAL && tsr__privileged(m, peer->uid);
  tsr_metrics_audience_t audience = tsr_metrics_audience_decide(peer, privileged, m->remote_full);
  size_t len = 0;
  pthread_mutex_lock(&m->mu);
  char *body = tsr_metrics_snapshot_filter(&m->snap, audience, &len);
  pthread_mutex_unlock(&m->mu);
  if (!body) return MHD_NO;
  return tsr__reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len);
}

/* ---- the connection table (the metrics thread's) -------------------------------- */

/* libmicrohttpd took a connection (STARTED, inside MHD_add_connection) or
 * is about to close its descriptor (CLOSED). */
static void tsr__notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                        enum MHD_ConnectionNotificationCode code) {
  (void)conn;
  tsr_metrics_t *m = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    tsr_metrics_conn_t *c = m->adding;
    *socket_context = NULL;
    if (!c) return; /* not one of ours: never happens */
    if (m->conn_count >= TSR__SLOTS) {
      /* admission keeps a slot free, so never either; if it did, the
       * connection could not be swept: end it now (fd is still open) */
      shutdown(c->fd, SHUT_RDWR);
      return;
    }
    *socket_context = c;
    m->adding = NULL;
    m->conns[m->conn_count++] = c;
    return;
  }
  tsr_metrics_conn_t *c = *socket_context;
  if (!c) return;
  *socket_context = NULL;
  for (size_t i = 0; i < m->conn_count; i++) {
    if (m->conns[i] != c) continue;
    m->conns[i] = m->conns[--m->conn_count];
    break;
  }
  free(c);
}

/* Ends connection `c`: libmicrohttpd reads the end of the stream on its
 * next run and closes it (see the top of the file: never close() here). */
static void tsr__shut(tsr_metrics_conn_t *c) {
  if (c->closing) return;
  shutdown(c->fd, SHUT_RDWR);
  c->closing = true;
}

/* A refused connection, still ours alone (never given to libmicrohttpd):
 * says why if the socket takes it at once, then closes. */
static void tsr__refuse(int fd, tsr_metrics_admission_t why) {
  char msg[256];
  const char *body = why == TSR_METRICS_REFUSE_CLIENT
                         ? "tessera: too many connections to /metrics from this client; try again\n"
                         : "tessera: /metrics has too many connections; try again\n";
  int n = snprintf(msg, sizeof(msg),
                   "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
                   "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                   strlen(body), body);
  if (n > 0) (void)!send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
  close(fd);
}

/* Lets in, or refuses, what waits on the listening socket. Returns 0, or
 * the errno when the process ran out of descriptors (or memory) to accept
 * with. */
static int tsr__accept(tsr_metrics_t *m) {
  unsigned admitted = 0, refused = 0;
  while (admitted < TSR__ADMIT_BATCH && refused < TSR__REFUSE_BATCH) {
    struct sockaddr_storage addr;
    socklen_t alen = sizeof(addr);
    int fd = accept4(m->listen_fd, (struct sockaddr *)&addr, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) return errno;
      if (errno != EAGAIN && errno != EWOULDBLOCK) tsr_log_debug("metrics: accept: %s", strerror(errno));
      return 0;
    }
    tsr_metrics_peer_t peer = tsr_metrics_peer_find(m->diag_fd, fd, &addr);
    size_t victim = 0;
    tsr_metrics_admission_t a = tsr_metrics_admission_decide(m->conns, m->conn_count, &peer, TSR_METRICS_PER_CLIENT,
                                                             TSR_METRICS_CONNECTIONS, TSR__SLOTS, &victim);
    if (a == TSR_METRICS_REFUSE_CLIENT || a == TSR_METRICS_REFUSE_FULL) {
      tsr__refuse(fd, a);
      refused++;
      continue;
    }
    tsr_metrics_conn_t *c = calloc(1, sizeof(*c));
    if (!c) {
      close(fd);
      return ENOMEM;
    }
    if (a == TSR_METRICS_ADMIT_EVICT) tsr__shut(m->conns[victim]);
    c->peer = peer;
    c->fd = fd;
    c->accepted_ns = tsr_time_mono_ns();
    c->fresh = true;
    m->adding = c;
    /* Runs the STARTED callback before it returns (external polling, no
     * internal thread); on failure it has closed fd. */
    MHD_add_connection(m->mhd, fd, (struct sockaddr *)&addr, alen);
    if (m->adding) { /* never STARTED: not in the table */
      free(m->adding);
      m->adding = NULL;
    }
    admitted++;
  }
  return 0;
}

/* Milliseconds from `now` to `then` (monotonic ns), rounded up, at most a
 * minute: an epoll_wait timeout. */
static int tsr__ms_until(uint64_t then, uint64_t now) {
  uint64_t ms = (tsr_time_sub_sat(then, now) + TSR_NS_PER_MS - 1) / TSR_NS_PER_MS;
  return ms > 60000 ? 60000 : (int)ms;
}

/* Shuts down every connection past its deadline (its request not whole
 * within the timeout, its answer not taken within twice it); returns the
 * milliseconds to the next deadline (-1: none). */
static int tsr__sweep(tsr_metrics_t *m, uint64_t now) {
  uint64_t next = UINT64_MAX;
  for (size_t i = 0; i < m->conn_count; i++) {
    tsr_metrics_conn_t *c = m->conns[i];
    if (c->closing) continue;
    uint64_t due = tsr_time_add_sat(c->accepted_ns, c->answered ? 2 * m->request_timeout_ns : m->request_timeout_ns);
    if (now >= due) {
      tsr__shut(c);
      continue;
    }
    if (due < next) next = due;
  }
  return next == UINT64_MAX ? -1 : tsr__ms_until(next, now);
}

/* Out of descriptors: shuts down the connection admission would give up
 * first, so that the next run of the loop frees a descriptor for a
 * newcomer. False when none is left to give up. */
static bool tsr__make_room(tsr_metrics_t *m) {
  size_t victim = 0;
  if (!tsr_metrics_pick_victim(m->conns, m->conn_count, &victim)) return false;
  tsr__shut(m->conns[victim]);
  return true;
}

static void *tsr__serve(void *arg) {
  tsr_metrics_t *m = arg;
  int wait_ms = 0;
  for (;;) {
    MHD_UNSIGNED_LONG_LONG mhd_ms = 0;
    if (MHD_get_timeout(m->mhd, &mhd_ms) == MHD_YES && (wait_ms < 0 || mhd_ms < (MHD_UNSIGNED_LONG_LONG)wait_ms))
      wait_ms = mhd_ms > 60000 ? 60000 : (int)mhd_ms;
    struct epoll_event ev[4];
    int n = epoll_wait(m->epoll_fd, ev, 4, wait_ms);
    if (n < 0 && errno != EINTR) {
      tsr_log_error("metrics: epoll_wait: %s; /metrics stops", strerror(errno));
      return NULL;
    }
    bool stop = false, incoming = false;
    for (int i = 0; i < n; i++) {
      if (ev[i].data.fd == m->wake_fd) stop = true;
      if (ev[i].data.fd == m->listen_fd) incoming = true;
    }
    if (stop) return NULL;
    /* reads, answers, closes (what was shut down included): first, so that
     * the table is current before anyone is let in */
    MHD_run(m->mhd);
    for (size_t i = 0; i < m->conn_count; i++) m->conns[i]->fresh = false; /* read, if they sent */
    int starved = incoming ? tsr__accept(m) : 0;
    uint64_t now = tsr_time_mono_ns();
    wait_ms = tsr__sweep(m, now);
    /* Out of descriptors, the listening socket stays readable: watching it
     * would spin. A connection is given up for the newcomer (its descriptor
     * is free after the next run); with none to give up, the listening
     * socket is left alone for a moment (what is open goes on). */
    if ((starved == EMFILE || starved == ENFILE) && tsr__make_room(m)) {
      wait_ms = 0;
    } else if (starved && !m->accept_paused_until) {
      struct epoll_event off = {.events = 0, .data.fd = m->listen_fd};
      epoll_ctl(m->epoll_fd, EPOLL_CTL_MOD, m->listen_fd, &off);
      m->accept_paused_until = now + 100 * TSR_NS_PER_MS;
      if (!m->starved_logged_ns || now - m->starved_logged_ns >= 60 * TSR_NS_PER_S) {
        m->starved_logged_ns = now;
        tsr_log_warn("metrics: cannot accept connections: %s", strerror(starved));
      }
    }
    if (m->accept_paused_until) {
      if (now >= m->accept_paused_until) {
        struct epoll_event on = {.events = EPOLLIN, .data.fd = m->listen_fd};
        epoll_ctl(m->epoll_fd, EPOLL_CTL_MOD, m->listen_fd, &on);
        m->accept_paused_until = 0;
        wait_ms = 0;
      } else {
        int left = tsr__ms_until(m->accept_paused_until, now);
        if (wait_ms < 0 || left < wait_ms) wait_ms = left;
      }
    }
  }
}

/* ---- start, stop, publish ---------------------------------------------------------- */

static void tsr__close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void tsr__free(tsr_metrics_t *m) {
  if (m->mhd) MHD_stop_daemon(m->mhd); /* CLOSED for each connection left: frees them */
  for (size_t i = 0; i < m->conn_count; i++) free(m->conns[i]);
  tsr__close_fd(&m->listen_fd);
  tsr__close_fd(&m->epoll_fd);
  tsr__close_fd(&m->wake_fd);
  tsr__close_fd(&m->diag_fd);
  tsr_metrics_snapshot_free(&m->snap);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

TSR_MUST_USE static tsr_status_t tsr__listen(tsr_metrics_t *m, const char *listen_at) {
  struct sockaddr_storage addr;
  socklen_t alen = 0;
  TSR_RETURN_IF_ERROR(tsr_config_parse_listen(listen_at, &addr, &alen));
  int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      (addr.ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) ||
      bind(fd, (struct sockaddr *)&addr, alen) != 0 || listen(fd, 1024) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    return tsr_status_make(TSR_UNAVAILABLE, "metrics: cannot listen on %s: %s", listen_at, strerror(err));
  }
  m->listen_fd = fd;
  return NULL;
}

tsr_status_t tsr_metrics_start(const tsr_config_t *config, tsr_metrics_t **out) {
  *out = NULL;
  tsr_metrics_t *m = calloc(1, sizeof(*m));
  if (!m) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  m->listen_fd = m->epoll_fd = m->wake_fd = m->diag_fd = -1;
  pthread_mutex_init(&m->mu, NULL);
  m->request_timeout_ns = config->metrics_request_timeout_ns;
  m->remote_full = config->metrics_remote_full;
  snprintf(m->admin_group, sizeof(m->admin_group), "%s", config->admin_group);
  snprintf(m->metrics_group, sizeof(m->metrics_group), "%s", config->metrics_group);
  tsr_status_t st = tsr__listen(m, config->metrics);
  if (st) {
    tsr__free(m);
    return st;
  }
  m->diag_fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (m->diag_fd < 0)
    tsr_log_warn("metrics: no NETLINK_SOCK_DIAG (%s): every scraper sees the node-wide series only", strerror(errno));
  /* The idle timeout stays as a backstop for an answer nobody reads. */
  unsigned idle_s = (unsigned)(m->request_timeout_ns / TSR_NS_PER_S) + 10;
  m->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, tsr__answer, m,
                            MHD_OPTION_NOTIFY_CONNECTION, tsr__notify, m, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)TSR__SLOTS, MHD_OPTION_CONNECTION_TIMEOUT, idle_s, MHD_OPTION_END);
  const union MHD_DaemonInfo *info = m->mhd ? MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
  int mhd_fd = info ? info->epoll_fd : -1;
  m->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  m->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  bool ok = m->mhd && mhd_fd >= 0 && m->wake_fd >= 0 && m->epoll_fd >= 0;
  const int fds[] = {m->listen_fd, m->wake_fd, mhd_fd};
  for (size_t i = 0; ok && i < sizeof(fds) / sizeof(fds[0]); i++) {
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
    ok = epoll_ctl(m->epoll_fd, EPOLL_CTL_ADD, fds[i], &ev) == 0;
  }
  if (!ok) {
    int err = errno;
    tsr__free(m);
    return tsr_status_make(TSR_UNAVAILABLE, "metrics: cannot start the HTTP server on %s: %s", config->metrics,
                           err ? strerror(err) : "libmicrohttpd refused");
  }
  /* the metrics thread must never take the signals the event loop reads */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int err = pthread_create(&m->thread, NULL, tsr__serve, m);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err) {
    tsr__free(m);
    return tsr_status_make(TSR_UNAVAILABLE, "metrics: cannot start a thread: %s", strerror(err));
  }
  m->thread_started = true;
  *out = m;
  return NULL;
}

void tsr_metrics_stop(tsr_metrics_t *m) {
  if (!m) return;
  if (m->thread_started) {
    uint64_t one = 1;
    (void)!write(m->wake_fd, &one, sizeof(one));
    pthread_join(m->thread, NULL);
  }
  tsr__free(m);
}

void tsr_metrics_publish(tsr_metrics_t *m, tsr_metrics_snapshot_t *snapshot) {
  pthread_mutex_lock(&m->mu);
  tsr_metrics_snapshot_t old = m->snap;
  m->snap = *snapshot;
  pthread_mutex_unlock(&m->mu);
  memset(snapshot, 0, sizeof(*snapshot));
  tsr_metrics_snapshot_free(&old);
}
