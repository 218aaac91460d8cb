/* server.c: tesserad's event loop.
 *
 * One thread, one epoll set: the listening socket, every client connection,
 * a timerfd armed at the earliest lease deadline (CLOCK_MONOTONIC, absolute),
 * a 1 s housekeeping timerfd that closes idle connections, the enforcement
 * timerfd (the reaper, the backstop, due SIGKILLs: enforce.c; every
 * backstop period, at most 500 ms), and a signalfd for SIGTERM/SIGINT. Reads and writes never block: a client that sends a partial
 * line and stops, or stops reading its replies, costs a buffer until it times
 * out, not the loop.
 *
 * No single user can deny service to another (docs/leases.md, "Limits"):
 *  - connections: at most max_clients_per_user per uid, and the last
 *    admin_reserved_clients of max_clients are for admins only;
 *  - replies: a client whose unsent replies pass TSR__OUT_HIGH is not read
 *    from until it takes them (so one client queues at most that plus one
 *    reply); the unsent bytes of a user's clients, and of all clients, are
 *    capped, and when a cap would be passed the client with the most unsent
 *    bytes (of that user, or of all) is disconnected: the one that does not
 *    read goes first, before it costs anyone else;
 *  - a client with unsent replies that makes no progress for client_timeout
 *    is closed like an idle one. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/array.h"
#include "base/log.h"
#include "base/time.h"
#include "daemon/audit.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/enforce.h"
#include "daemon/handlers.h"
#include "daemon/identity.h"
#include "daemon/metrics.h"
#include "daemon/server.h"
#include "proto/proto.h"

#define TSR__OUT_HIGH (256u << 10) /* unsent bytes past which a client's requests wait */
#define TSR__REPLY_KEEP (1u << 20) /* the reply buffer kept between requests */

/* One uid's share of the connections and unsent bytes. */
typedef struct {
  uint32_t uid;
  uint32_t conns;  /* 0: the slot is free */
  uint64_t queued; /* unsent reply bytes of its connections */
} tsr__user_t;

typedef struct tsr__conn_s {
  int fd;
  tsr_identity_t who;
  tsr__user_t *user;
  char *in;
  size_t in_len, in_cap;
  char *out;
  size_t out_len, out_off, out_cap;
  uint64_t last_active_ns; /* a request read or a reply byte sent */
  bool want_write;         /* EPOLLOUT armed */
  bool want_read;          /* EPOLLIN armed (off while its replies wait: TSR__OUT_HIGH) */
  bool close_after;        /* close once the output is flushed */
  bool discarding;         /* skipping the rest of an over-long line */
  bool dirty;              /* on the server's list of replies to send after this batch */
  bool ready;              /* on the server's list of clients whose buffered requests may go on */
  bool doomed;             /* disconnected for its unsent replies; closed after the batch */
  struct tsr__conn_s *prev, *next, *next_dirty, *next_ready;
} tsr__conn_t;

typedef struct {
  tsr_daemon_t *d;
  int ep, listen_fd, expiry_fd, tick_fd, signal_fd, enforce_fd;
  uint64_t armed_deadline; /* what expiry_fd is set to; 0 = disarmed */
  uint64_t retry_at;       /* a due lease could not be ended: not before this */
  tsr__conn_t *conns;
  tsr__conn_t *dirty;      /* connections with replies queued in this batch */
  tsr__conn_t *ready;      /* connections with requests waiting in their buffer */
  tsr_json_writer_t reply; /* the reply being written, reused */
  tsr__user_t *users;      /* max_clients slots: at most one user per connection */
  uint64_t queued;         /* unsent reply bytes of every connection */
  uint64_t dropped_slow;   /* connections closed for not reading their replies */
  uint32_t nconns;
  bool listen_paused; /* out of file descriptors: not accepting until one closes */
  bool stop;
} tsr__server_t;

/* epoll user data for the non-connection fds */
static char tsr__tag_listen, tsr__tag_expiry, tsr__tag_tick, tsr__tag_signal, tsr__tag_enforce;

static void tsr__queued_sub(tsr__server_t *s, tsr__conn_t *c, size_t n) {
  s->queued -= n;
  if (c->user) c->user->queued -= n;
}

static void tsr__conn_close(tsr__server_t *s, tsr__conn_t *c) {
  if (c->dirty)
    for (tsr__conn_t **p = &s->dirty; *p; p = &(*p)->next_dirty)
      if (*p == c) {
        *p = c->next_dirty;
        break;
      }
  if (c->ready)
    for (tsr__conn_t **p = &s->ready; *p; p = &(*p)->next_ready)
      if (*p == c) {
        *p = c->next_ready;
        break;
      }
  epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  tsr__queued_sub(s, c, c->out_len - c->out_off);
  if (c->user) c->user->conns--;
  if (c->prev)
    c->prev->next = c->next;
  else
    s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  free(c->in);
  free(c->out);
  free(c);
  s->nconns--;
  if (s->listen_paused) { /* a descriptor is free again: accept again */
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &tsr__tag_listen};
    if (epoll_ctl(s->ep, EPOLL_CTL_ADD, s->listen_fd, &ev) == 0) s->listen_paused = false;
  }
}

/* Sets the connection's epoll interest: EPOLLIN unless its requests wait
 * for its replies to go (TSR__OUT_HIGH) or it is closing; EPOLLOUT while
 * replies are unsent, when `arm_write` (after a flush; replies queued in a
 * batch are flushed at its end, so arming EPOLLOUT for them would cost two
 * epoll_ctl calls per request for nothing). */
static void tsr__conn_set_events(tsr__server_t *s, tsr__conn_t *c, bool arm_write) {
  bool want_w = arm_write ? c->out_len > c->out_off : c->want_write;
  bool want_r = c->out_len - c->out_off < TSR__OUT_HIGH && !c->close_after;
  if (want_w == c->want_write && want_r == c->want_read) return;
  struct epoll_event ev = {.events = (want_r ? EPOLLIN : 0) | (want_w ? EPOLLOUT : 0), .data.ptr = c};
  epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &ev);
  c->want_write = want_w;
  c->want_read = want_r;
}

/* Writes what it can; false if the connection was closed. */
static bool tsr__conn_flush(tsr__server_t *s, tsr__conn_t *c) {
  while (c->out_off < c->out_len) {
    ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      tsr__conn_close(s, c);
      return false;
    }
    c->out_off += (size_t)w;
    tsr__queued_sub(s, c, (size_t)w);
    c->last_active_ns = tsr_time_mono_ns();
  }
  if (c->out_off == c->out_len) {
    c->out_off = c->out_len = 0;
    if (c->close_after) {
      tsr__conn_close(s, c);
      return false;
    }
  }
  if (c->in_len > 0 && !c->close_after && !c->ready && c->out_len - c->out_off < TSR__OUT_HIGH) {
    /* requests waited for these replies to go: they run in the next batch */
    c->ready = true;
    c->next_ready = s->ready;
    s->ready = c;
  }
  tsr__conn_set_events(s, c, true);
  return true;
}

/* Drops connection x's unsent replies and shuts it down; it is closed after
 * the batch (a connection is freed only while handling its own event or
 * between batches, so later events of this batch stay valid). */
static void tsr__doom(tsr__server_t *s, tsr__conn_t *x, const char *why) {
  tsr_log_warn("disconnecting client pid %d (uid %u, %s): %s", x->who.pid, x->who.uid, x->who.user, why);
  tsr__queued_sub(s, x, x->out_len - x->out_off);
  x->out_len = x->out_off = 0;
  x->in_len = 0;
  x->close_after = true;
  x->doomed = true;
  shutdown(x->fd, SHUT_RDWR);
  s->dropped_slow++;
}

/* Makes room for `n` more unsent bytes of c: past the per-user cap the
 * user's client with the most unsent bytes is disconnected, past the total
 * cap everyone's; repeated until it fits. False if c itself went. */
static bool tsr__make_room(tsr__server_t *s, tsr__conn_t *c, size_t n) {
  const tsr_config_t *cfg = &s->d->config;
  for (;;) {
    bool user_over = c->user && c->user->queued + n > cfg->max_queued_bytes_per_user;
    bool all_over = s->queued + n > cfg->max_queued_bytes;
    if (!user_over && !all_over) return true;
    tsr__conn_t *victim = NULL;
    size_t most = 0;
    for (tsr__conn_t *x = s->conns; x; x = x->next) {
      if (x->doomed || (user_over && x->user != c->user)) continue;
      size_t pending = x->out_len - x->out_off + (x == c ? n : 0);
      if (pending > most) most = pending, victim = x;
    }
    if (!victim) victim = c;
    tsr__doom(s, victim,
              user_over ? "its user's unsent replies are over max_queued_bytes_per_user; it reads the slowest"
                        : "unsent replies of all clients are over max_queued_bytes; it reads the slowest");
    if (victim == c) return false;
  }
}

/* Queues one reply line: the text in s->reply. */
static void tsr__conn_send(tsr__server_t *s, tsr__conn_t *c) {
  const char *line = s->reply.buf;
  size_t n = s->reply.len;
  if (s->reply.failed || !line) {
    tsr_log_warn("out of memory writing a reply; dropping client pid %d", c->who.pid);
    c->close_after = true;
    return;
  }
  if (c->out_off > 0 && c->out_off == c->out_len) c->out_off = c->out_len = 0;
  if (!tsr__make_room(s, c, n + 1)) return;
  if (c->out_off > 0 && c->out_len + n + 1 > c->out_cap) { /* reuse the sent part */
    memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
    c->out_len -= c->out_off;
    c->out_off = 0;
  }
  char *b = tsr_array_grow(c->out, &c->out_cap, c->out_len + n + 1, 1, 4096);
  if (!b) {
    c->close_after = true;
    return;
  }
  c->out = b;
  memcpy(c->out + c->out_len, line, n);
  c->out[c->out_len + n] = '\n';
  c->out_len += n + 1;
  s->queued += n + 1;
  if (c->user) c->user->queued += n + 1;
}

/* Queues the line_too_long error. */
static void tsr__conn_send_too_long(tsr__server_t *s, tsr__conn_t *c) {
  tsr_json_writer_reset(&s->reply);
  tsr_json_object_begin(&s->reply);
  tsr_proto_error_write(&s->reply, TSR_PROTO_ERR_LINE_TOO_LONG, "request line longer than %d bytes; closing",
                        TSR_PROTO_LINE_MAX);
  tsr_json_object_end(&s->reply);
  tsr__conn_send(s, c);
}

static void tsr__mark_dirty(tsr__server_t *s, tsr__conn_t *c) {
  if (c->dirty) return;
  c->dirty = true;
  c->next_dirty = s->dirty;
  s->dirty = c;
}

/* Handles the complete lines buffered in c->in, in order, while the client
 * takes its replies: past TSR__OUT_HIGH unsent bytes the rest wait in c->in
 * (the connection goes on the ready list when it drains). */
static void tsr__conn_handle_lines(tsr__server_t *s, tsr__conn_t *c) {
  size_t start = 0;
  while (start < c->in_len && !c->close_after && c->out_len - c->out_off < TSR__OUT_HIGH) {
    char *nl = memchr(c->in + start, '\n', c->in_len - start);
    if (!nl) break;
    size_t len = (size_t)(nl - (c->in + start));
    if (c->discarding) {
      c->discarding = false;
    } else if (len > TSR_PROTO_LINE_MAX) {
      tsr__conn_send_too_long(s, c);
      c->close_after = true;
      start = c->in_len;
      break;
    } else if (len > 0) { /* blank lines are ignored */
      tsr_json_writer_reset(&s->reply);
      uint64_t t0 = tsr_time_mono_ns();
      tsr_daemon_handle(s->d, &c->who, c->in + start, len, &s->reply);
      tsr_metrics_observe_request(&s->d->counters, tsr_time_mono_ns() - t0);
      tsr__conn_send(s, c);
      if (s->reply.cap > TSR__REPLY_KEEP) tsr_json_writer_free(&s->reply); /* a big reply: give it back */
    }
    start += len + 1;
  }
  if (start >= c->in_len) {
    c->in_len = 0;
  } else if (start > 0) {
    memmove(c->in, c->in + start, c->in_len - start);
    c->in_len -= start;
  }
  if (c->in_len > TSR_PROTO_LINE_MAX && !memchr(c->in, '\n', c->in_len)) {
    if (!c->discarding) tsr__conn_send_too_long(s, c);
    /* the stream cannot be trusted to resynchronise: close after the error */
    c->close_after = true;
    c->in_len = 0;
    c->discarding = true;
  }
  tsr__mark_dirty(s, c);
}

/* Reads what is there and handles every complete line; the replies are sent
 * after the batch (see tsr_server_run). False if the connection was closed. */
static bool tsr__conn_read(tsr__server_t *s, tsr__conn_t *c) {
  while (!c->close_after && c->out_len - c->out_off < TSR__OUT_HIGH) {
    if (c->in_cap - c->in_len < 4096) {
      size_t want = c->in_cap ? c->in_cap * 2 : 8192;
      if (want > TSR_PROTO_LINE_MAX + 8192) want = TSR_PROTO_LINE_MAX + 8192;
      if (want > c->in_cap) {
        size_t cap = c->in_cap;
        char *b = tsr_array_grow(c->in, &cap, want, 1, 8192);
        if (!b) {
          tsr__conn_close(s, c);
          return false;
        }
        c->in = b;
        c->in_cap = cap;
      }
    }
    ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      tsr__conn_close(s, c);
      return false;
    }
    if (r == 0) { /* the client is done: answer what it sent, then close */
      tsr__conn_handle_lines(s, c);
      c->close_after = true;
      if (c->out_len == c->out_off) {
        tsr__conn_close(s, c);
        return false;
      }
      break;
    }
    c->last_active_ns = tsr_time_mono_ns();
    bool drained = (size_t)r < c->in_cap - c->in_len; /* a short read: nothing more now */
    c->in_len += (size_t)r;
    tsr__conn_handle_lines(s, c);
    if (drained) break;
  }
  tsr__mark_dirty(s, c);
  tsr__conn_set_events(s, c, false);
  return true;
}

/* The user slot of `uid` (counted once per connection), or NULL if there is
 * no free one (cannot happen: there are max_clients slots). */
static tsr__user_t *tsr__user_of(tsr__server_t *s, uint32_t uid) {
  tsr__user_t *free_slot = NULL;
  for (uint32_t i = 0; i < s->d->config.max_clients; i++) {
    tsr__user_t *u = &s->users[i];
    if (u->conns && u->uid == uid) return u;
    if (!u->conns && !free_slot) free_slot = u;
  }
  if (free_slot) {
    free_slot->uid = uid;
    free_slot->queued = 0;
  }
  return free_slot;
}

/* Refuses a connection with one busy line and closes it. */
static void tsr__refuse(int fd, const char *message) {
  char line[512];
  int n = snprintf(line, sizeof(line),
                   "{\"ok\":false,\"error\":{\"code\":\"" TSR_PROTO_ERR_BUSY "\",\"message\":\"%s\"}}\n", message);
  if (n > 0 && (size_t)n < sizeof(line)) {
    ssize_t w = send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
  }
  close(fd);
}

static void tsr__accept(tsr__server_t *s) {
  const tsr_config_t *cfg = &s->d->config;
  for (;;) {
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EMFILE || errno == ENFILE) {
        /* The pending connection stays queued and the listening socket stays
         * readable: stop watching it until a connection closes, or the loop
         * would spin. */
        tsr_log_warn("out of file descriptors with %u clients; not accepting until one leaves", s->nconns);
        epoll_ctl(s->ep, EPOLL_CTL_DEL, s->listen_fd, NULL);
        s->listen_paused = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        tsr_log_warn("accept: %s", strerror(errno));
      }
      return;
    }
    if (s->nconns >= cfg->max_clients) {
      tsr__refuse(fd, "too many clients; try again");
      continue;
    }
    tsr__conn_t *c = calloc(1, sizeof(*c));
    if (!c) {
      close(fd);
      continue;
    }
    c->fd = fd;
    tsr_status_t st = tsr_identity_from_socket(fd, cfg->admin_group, &c->who);
    if (st) {
      tsr_log_warn("dropping a client: %s", tsr_status_message(st));
      tsr_status_free(st);
      close(fd);
      free(c);
      continue;
    }
    /* the last admin_reserved_clients slots are for admins, and no user may
     * hold more than max_clients_per_user: one user cannot lock out others */
    tsr__user_t *u = tsr__user_of(s, c->who.uid);
    const char *refusal = NULL;
    if (!u)
      refusal = "too many clients; try again";
    else if (!c->who.admin && s->nconns >= cfg->max_clients - cfg->admin_reserved_clients)
      refusal = "too many clients (the remaining connections are kept for admins); try again";
    else if (!c->who.admin && cfg->max_clients_per_user && u->conns >= cfg->max_clients_per_user)
      refusal =
          "you have too many connections open to the daemon (max_clients_per_user); "
          "close some and try again";
    if (refusal) {
      tsr_log_debug("refused a connection of pid %d (uid %u): %s", c->who.pid, c->who.uid, refusal);
      tsr__refuse(fd, refusal);
      free(c);
      continue;
    }
    c->user = u;
    u->conns++;
    c->last_active_ns = tsr_time_mono_ns();
    c->want_read = true;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
      u->conns--;
      close(fd);
      free(c);
      continue;
    }
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->nconns++;
  }
}

/* Arms the expiry timer at the earliest deadline (or disarms it). */
static void tsr__arm_expiry(tsr__server_t *s) {
  uint64_t next = 0;
  const tsr_lease_table_t *t = tsr_lease_service_table(s->d->leases);
  if (tsr_lease_table_next_deadline(t, &next)) {
    if (next < s->retry_at) next = s->retry_at;
    if (next == 0) next = 1;
  }
  if (next == s->armed_deadline) return;
  /* Armed earlier than needed (the earliest lease went): leave it. The early
   * wake-up finds nothing due and arms the timer again; that is cheaper than
   * a timerfd_settime after every release. */
  if (s->armed_deadline && (next == 0 || next > s->armed_deadline)) return;
  struct itimerspec its = {0};
  if (next) {
    its.it_value.tv_sec = (time_t)(next / TSR_NS_PER_S);
    its.it_value.tv_nsec = (long)(next % TSR_NS_PER_S);
  }
  timerfd_settime(s->expiry_fd, TFD_TIMER_ABSTIME, &its, NULL);
  s->armed_deadline = next;
}

static void tsr__tick(tsr__server_t *s) {
  uint64_t now = tsr_time_mono_ns();
  tsr__conn_t *c = s->conns;
  while (c) {
    tsr__conn_t *next = c->next;
    if (now - c->last_active_ns > s->d->config.client_timeout_ns) {
      tsr_log_debug("closing idle client pid %d (uid %u)", c->who.pid, c->who.uid);
      tsr__conn_close(s, c);
    }
    c = next;
  }
}

/* Group commit: one sync pass for every lock file the batch changed. A
 * failure is logged (the changes are in effect, but may not survive a power
 * cut); the replies still go out. */
static void tsr__sync(tsr__server_t *s) {
  tsr_status_t st = tsr_lease_service_sync(s->d->leases);
  if (st) {
    tsr_log_error("lock files may not survive a power cut: %s", tsr_status_message(st));
    tsr_status_free(st);
  }
}

/* Waits for the next batch of events. After a batch that served clients it
 * first polls, without sleeping, for up to busy_poll: a client that sends its
 * next request within that window finds the daemon awake. On a virtual
 * machine, waking a sleeping vCPU costs tens of microseconds per message
 * (bench/results/lease-*.md); an idle daemon still sleeps. */
static int tsr__wait(tsr__server_t *s, struct epoll_event *events, int max, bool served) {
  if (s->ready) return epoll_wait(s->ep, events, max, 0);
  uint64_t poll_ns = s->d->config.busy_poll_ns;
  if (served && poll_ns) {
    uint64_t until = tsr_time_mono_ns() + poll_ns;
    do {
      int n = epoll_wait(s->ep, events, max, 0);
      if (n != 0) return n;
    } while (tsr_time_mono_ns() < until);
  }
  return epoll_wait(s->ep, events, max, -1);
}

static int tsr__add(tsr__server_t *s, int fd, void *tag) {
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};
  return epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev);
}

int tsr_server_run(tsr_daemon_t *d, int listen_fd) {
  tsr__server_t s = {
      .d = d, .listen_fd = listen_fd, .ep = -1, .expiry_fd = -1, .tick_fd = -1, .signal_fd = -1, .enforce_fd = -1};
  int rc = 1;
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &mask, NULL); /* main() blocked them already */
  signal(SIGPIPE, SIG_IGN);
  s.ep = epoll_create1(EPOLL_CLOEXEC);
  s.expiry_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  s.tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  s.signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  s.enforce_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (s.ep < 0 || s.expiry_fd < 0 || s.tick_fd < 0 || s.signal_fd < 0 || s.enforce_fd < 0) {
    tsr_log_error("event loop set-up failed: %s", strerror(errno));
    goto out;
  }
  struct itimerspec tick = {.it_interval = {1, 0}, .it_value = {1, 0}};
  timerfd_settime(s.tick_fd, 0, &tick, NULL);
  uint64_t period = tsr_daemon_enforce_period_ns(d);
  struct itimerspec enforce = {.it_interval = {(time_t)(period / TSR_NS_PER_S), (long)(period % TSR_NS_PER_S)},
                               .it_value = {(time_t)(period / TSR_NS_PER_S), (long)(period % TSR_NS_PER_S)}};
  timerfd_settime(s.enforce_fd, 0, &enforce, NULL);
  if (tsr__add(&s, listen_fd, &tsr__tag_listen) || tsr__add(&s, s.expiry_fd, &tsr__tag_expiry) ||
      tsr__add(&s, s.tick_fd, &tsr__tag_tick) || tsr__add(&s, s.signal_fd, &tsr__tag_signal) ||
      tsr__add(&s, s.enforce_fd, &tsr__tag_enforce)) {
    tsr_log_error("epoll_ctl: %s", strerror(errno));
    goto out;
  }
  s.users = calloc(d->config.max_clients, sizeof(*s.users));
  if (!s.users) {
    tsr_log_error("out of memory");
    goto out;
  }
  tsr_daemon_expire(d); /* leases that fell due while the daemon was down */
  tsr__sync(&s);
  tsr_audit_flush(d->audit, tsr_time_mono_ns());
  tsr__arm_expiry(&s);
  struct epoll_event events[64];
  bool served = false;
  while (!s.stop) {
    int n = tsr__wait(&s, events, 64, served);
    served = false;
    if (n < 0) {
      if (errno == EINTR) continue;
      tsr_log_error("epoll_wait: %s", strerror(errno));
      goto out;
    }
    bool expiry_due = false, tick_due = false, enforce_due = false;
    for (int i = 0; i < n; i++) {
      void *tag = events[i].data.ptr;
      if (tag == &tsr__tag_listen) {
        tsr__accept(&s);
      } else if (tag == &tsr__tag_expiry) {
        uint64_t x;
        ssize_t r = read(s.expiry_fd, &x, sizeof(x));
        (void)r;
        s.armed_deadline = 0;
        expiry_due = true;
      } else if (tag == &tsr__tag_tick) {
        uint64_t x;
        ssize_t r = read(s.tick_fd, &x, sizeof(x));
        (void)r;
        tick_due = true; /* after the batch: it may close connections */
      } else if (tag == &tsr__tag_enforce) {
        uint64_t x;
        ssize_t r = read(s.enforce_fd, &x, sizeof(x));
        (void)r;
        enforce_due = true;
      } else if (tag == &tsr__tag_signal) {
        struct signalfd_siginfo si;
        while (read(s.signal_fd, &si, sizeof(si)) == sizeof(si)) {
          if (si.ssi_signo == SIGHUP) {
            tsr_log_info("SIGHUP: nothing to reload; restart the daemon to apply a new config");
            continue;
          }
          tsr_log_info("signal %u: stopping", si.ssi_signo);
          s.stop = true;
        }
      } else {
        /* A connection is closed only while handling its own event (each fd
         * has at most one event per batch) or by the tick after the batch. */
        tsr__conn_t *c = tag;
        if (events[i].events & (EPOLLERR | EPOLLHUP) && !(events[i].events & EPOLLIN)) {
          tsr__conn_close(&s, c);
          continue;
        }
        /* replies of earlier batches first: what this batch queues waits for
         * its sync below */
        if ((events[i].events & EPOLLOUT) && !tsr__conn_flush(&s, c)) continue;
        if (events[i].events & EPOLLIN) {
          served = true;
          tsr__conn_read(&s, c);
        }
      }
    }
    /* requests that waited for their client to take its replies */
    while (s.ready) {
      tsr__conn_t *c = s.ready;
      s.ready = c->next_ready;
      c->ready = false;
      served = true;
      tsr__conn_handle_lines(&s, c);
      tsr__conn_set_events(&s, c, false);
    }
    /* clients disconnected for their unsent replies */
    for (tsr__conn_t *c = s.conns, *next; c; c = next) {
      next = c->next;
      if (c->doomed) tsr__conn_close(&s, c);
    }
    /* durable lock files, then audit lines, then the replies they account for */
    tsr__sync(&s);
    tsr_audit_flush(d->audit, tsr_time_mono_ns());
    while (s.dirty) {
      tsr__conn_t *c = s.dirty;
      s.dirty = c->next_dirty;
      c->dirty = false;
      tsr__conn_flush(&s, c);
    }
    if (expiry_due) {
      /* a lease whose lock file would not go is retried in 1 s, not in a spin */
      s.retry_at = tsr_daemon_expire(d) ? tsr_time_mono_ns() + TSR_NS_PER_S : 0;
    }
    tsr__sync(&s); /* expiries */
    tsr_audit_flush(d->audit, tsr_time_mono_ns());
    if (tick_due) tsr__tick(&s);
    if (enforce_due) {
      tsr_daemon_enforce(d);
      tsr_audit_flush(d->audit, tsr_time_mono_ns());
    }
    tsr__arm_expiry(&s);
    tsr_daemon_metrics_publish(d, tsr_time_mono_ns());
  }
  rc = 0;
out:
  while (s.conns) tsr__conn_close(&s, s.conns);
  if (s.ep >= 0) close(s.ep);
  if (s.expiry_fd >= 0) close(s.expiry_fd);
  if (s.tick_fd >= 0) close(s.tick_fd);
  if (s.signal_fd >= 0) close(s.signal_fd);
  if (s.enforce_fd >= 0) close(s.enforce_fd);
  tsr_json_writer_free(&s.reply);
  free(s.users);
  return rc;
}
