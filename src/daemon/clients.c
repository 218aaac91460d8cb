/* clients.c: tesserad's client connections (see clients.h). */
#include "daemon/clients.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/array.h"
#include "base/log.h"
#include "base/time.h"
#include "daemon/config.h"
#include "daemon/handlers.h"
#include "daemon/identity.h"
#include "daemon/metrics.h"
#include "proto/proto.h"

#define TSR__REPLY_KEEP (1u << 20) /* the reply buffer kept between requests */

/* One uid's share of the connections and unsent bytes. */
struct tsr_client_user_s {
  uint32_t uid;
  uint32_t conns;  /* 0: the slot is free */
  uint64_t queued; /* unsent reply bytes of its connections */
};

struct tsr_client_s {
  int fd;
  tsr_identity_t who;
  tsr_client_user_t *user;
  char *in;
  size_t in_len, in_cap;
  char *out;
  size_t out_len, out_off, out_cap;
  uint64_t last_active_ns; /* a request read or a reply byte sent */
  bool want_write;         /* EPOLLOUT armed */
  bool want_read;          /* EPOLLIN armed (off while its replies wait: TSR_CLIENTS_OUT_HIGH) */
  bool close_after;        /* close once the output is flushed */
  bool discarding;         /* skipping the rest of an over-long line */
  bool dirty;              /* on the server's list of replies to send after this batch */
  bool ready;              /* on the server's list of clients whose buffered requests may go on */
  bool doomed;             /* disconnected for its unsent replies; closed after the batch */
  uint64_t waiting;        /* a create waiting for capacity (daemon/waits.h): its answer comes
                              later, and nothing more is read until then */
  tsr_client_t *prev, *next, *next_dirty, *next_ready;
};

static void tsr__queued_sub(tsr_clients_t *s, tsr_client_t *c, size_t n) {
  s->queued -= n;
  if (c->user) c->user->queued -= n;
}

static void tsr__conn_close(tsr_clients_t *s, tsr_client_t *c) {
  if (c->waiting) tsr_daemon_waits_withdraw(s->d, c->waiting, NULL); /* closing withdraws it */
  if (c->dirty)
    for (tsr_client_t **p = &s->dirty; *p; p = &(*p)->next_dirty)
      if (*p == c) {
        *p = c->next_dirty;
        break;
      }
  if (c->ready)
    for (tsr_client_t **p = &s->ready; *p; p = &(*p)->next_ready)
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
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
    if (epoll_ctl(s->ep, EPOLL_CTL_ADD, s->listen_fd, &ev) == 0) s->listen_paused = false;
  }
}

/* Sets the connection's epoll interest: EPOLLIN unless its requests wait
 * for its replies to go (TSR_CLIENTS_OUT_HIGH) or it is closing; EPOLLOUT while
 * replies are unsent, when `arm_write` (after a flush; replies queued in a
 * batch are flushed at its end, so arming EPOLLOUT for them would cost two
 * epoll_ctl calls per request for nothing). */
static void tsr__conn_set_events(tsr_clients_t *s, tsr_client_t *c, bool arm_write) {
  bool want_w = arm_write ? c->out_len > c->out_off : c->want_write;
  bool want_r = c->out_len - c->out_off < TSR_CLIENTS_OUT_HIGH && !c->close_after;
  if (want_w == c->want_write && want_r == c->want_read) return;
  struct epoll_event ev = {.events = (want_r ? EPOLLIN : 0) | (want_w ? EPOLLOUT : 0), .data.ptr = c};
  epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &ev);
  c->want_write = want_w;
  c->want_read = want_r;
}

/* Writes what it can; false if the connection was closed. */
static bool tsr__conn_flush(tsr_clients_t *s, tsr_client_t *c) {
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
  if (c->in_len > 0 && !c->close_after && !c->ready && c->out_len - c->out_off < TSR_CLIENTS_OUT_HIGH) {
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
static void tsr__doom(tsr_clients_t *s, tsr_client_t *x, const char *why) {
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
static bool tsr__make_room(tsr_clients_t *s, tsr_client_t *c, size_t n) {
  const tsr_config_t *cfg = &s->d->config;
  for (;;) {
    bool user_over = c->user && c->user->queued + n > cfg->max_queued_bytes_per_user;
    bool all_over = s->queued + n > cfg->max_queued_bytes;
    if (!user_over && !all_over) return true;
    tsr_client_t *victim = NULL;
    size_t most = 0;
    for (tsr_client_t *x = s->conns; x; x = x->next) {
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

/* Queues one reply line: `n` bytes at `line` (NULL: out of memory). */
static void tsr__conn_send_text(tsr_clients_t *s, tsr_client_t *c, const char *line, size_t n) {
  if (!line) {
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

/* Queues one reply line: the text in s->reply. */
static void tsr__conn_send(tsr_clients_t *s, tsr_client_t *c) {
  tsr__conn_send_text(s, c, s->reply.failed ? NULL : s->reply.buf, s->reply.len);
}

/* Queues the line_too_long error. */
static void tsr__conn_send_too_long(tsr_clients_t *s, tsr_client_t *c) {
  tsr_json_writer_reset(&s->reply);
  tsr_json_object_begin(&s->reply);
  tsr_proto_error_write(&s->reply, TSR_PROTO_ERR_LINE_TOO_LONG, "request line longer than %d bytes; closing",
                        TSR_PROTO_LINE_MAX);
  tsr_json_object_end(&s->reply);
  tsr__conn_send(s, c);
}

static void tsr__mark_dirty(tsr_clients_t *s, tsr_client_t *c) {
  if (c->dirty) return;
  c->dirty = true;
  c->next_dirty = s->dirty;
  s->dirty = c;
}

/* Handles the complete lines buffered in c->in, in order, while the client
 * takes its replies: past TSR_CLIENTS_OUT_HIGH unsent bytes the rest wait in c->in
 * (the connection goes on the ready list when it drains). */
static void tsr__conn_handle_lines(tsr_clients_t *s, tsr_client_t *c) {
  size_t start = 0;
  while (start < c->in_len && !c->close_after && !c->waiting && c->out_len - c->out_off < TSR_CLIENTS_OUT_HIGH) {
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
      c->waiting = s->d->waits.deferred; /* a create just queued: its answer comes later */
      s->d->waits.deferred = 0;
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
static bool tsr__conn_read(tsr_clients_t *s, tsr_client_t *c) {
  while (!c->close_after && c->out_len - c->out_off < TSR_CLIENTS_OUT_HIGH) {
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
static tsr_client_user_t *tsr__user_of(tsr_clients_t *s, uint32_t uid) {
  tsr_client_user_t *free_slot = NULL;
  for (uint32_t i = 0; i < s->d->config.max_clients; i++) {
    tsr_client_user_t *u = &s->users[i];
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

void tsr_clients_accept(tsr_clients_t *s) {
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
    tsr_client_t *c = calloc(1, sizeof(*c));
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
    tsr_client_user_t *u = tsr__user_of(s, c->who.uid);
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

bool tsr_clients_init(tsr_clients_t *cs, tsr_daemon_t *d, int ep, int listen_fd) {
  *cs = (tsr_clients_t){.d = d, .ep = ep, .listen_fd = listen_fd};
  cs->users = calloc(d->config.max_clients, sizeof(*cs->users));
  return cs->users != NULL;
}

void tsr_clients_free(tsr_clients_t *cs) {
  while (cs->conns) tsr__conn_close(cs, cs->conns);
  tsr_json_writer_free(&cs->reply);
  free(cs->users);
  cs->users = NULL;
}

bool tsr_clients_event(tsr_clients_t *s, tsr_client_t *c, uint32_t events) {
  if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN)) {
    tsr__conn_close(s, c);
    return false;
  }
  /* replies of earlier batches first: what this batch queues waits for its
   * sync (see tsr_server_run) */
  if ((events & EPOLLOUT) && !tsr__conn_flush(s, c)) return false;
  if (!(events & EPOLLIN)) return false;
  tsr__conn_read(s, c);
  return true;
}

bool tsr_clients_run_ready(tsr_clients_t *s) {
  bool ran = false;
  while (s->ready) {
    tsr_client_t *c = s->ready;
    s->ready = c->next_ready;
    c->ready = false;
    ran = true;
    tsr__conn_handle_lines(s, c);
    tsr__conn_set_events(s, c, false);
  }
  return ran;
}

void tsr_clients_close_doomed(tsr_clients_t *s) {
  for (tsr_client_t *c = s->conns, *next; c; c = next) {
    next = c->next;
    if (c->doomed) tsr__conn_close(s, c);
  }
}

void tsr_clients_send_replies(tsr_clients_t *s) {
  while (s->dirty) {
    tsr_client_t *c = s->dirty;
    s->dirty = c->next_dirty;
    c->dirty = false;
    tsr__conn_flush(s, c);
  }
}

void tsr_clients_close_idle(tsr_clients_t *s, uint64_t now_ns) {
  for (tsr_client_t *c = s->conns, *next; c; c = next) {
    next = c->next;
    if (!c->waiting && now_ns - c->last_active_ns > s->d->config.client_timeout_ns) {
      tsr_log_debug("closing idle client pid %d (uid %u)", c->who.pid, c->who.uid);
      tsr__conn_close(s, c);
    }
  }
}

void tsr_clients_deliver(tsr_clients_t *s) {
  tsr_waits_t *ws = &s->d->waits;
  for (size_t i = 0; i < ws->nanswers; i++) {
    tsr_wait_answer_t *a = &ws->answers[i];
    tsr_client_t *c = s->conns;
    while (c && c->waiting != a->id) c = c->next;
    if (!c) { /* cannot happen: a connection that closes withdraws its request first */
      tsr_log_error("request %llu: its connection is gone; its answer is dropped", (unsigned long long)a->id);
      if (a->granted) {
        tsr_lease_actor_t daemon = {0, "tesserad", true, 0};
        tsr_lease_now_t now = {tsr_time_mono_ns(), tsr_time_wall_ns()};
        tsr_status_t st = tsr_lease_service_release(s->d->leases, a->granted, &daemon, now, NULL);
        if (st) tsr_log_error("lease %llu not released: %s", (unsigned long long)a->granted, tsr_status_message(st));
        tsr_status_free(st);
      }
      continue;
    }
    c->waiting = 0;
    c->last_active_ns = tsr_time_mono_ns();
    tsr__conn_send_text(s, c, a->line, a->len);
    tsr__mark_dirty(s, c);
    if (c->in_len > 0 && !c->ready) { /* what it sent after the create runs now */
      c->ready = true;
      c->next_ready = s->ready;
      s->ready = c;
    }
  }
  for (size_t i = 0; i < ws->nanswers; i++) free(ws->answers[i].line);
  ws->nanswers = 0;
}
