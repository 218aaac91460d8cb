/* server.c: tesserad's event loop.
 *
 * One thread, one epoll set: the listening socket, every client connection,
 * a timerfd armed at the earliest lease deadline or the earliest time a
 * waiting create gives up (CLOCK_MONOTONIC, absolute),
 * a 1 s housekeeping timerfd that closes idle connections, the enforcement
 * timerfd (the reaper, the backstop, due SIGKILLs: enforce.c; every
 * backstop period, at most 500 ms), and a signalfd for SIGTERM/SIGINT.
 * Reads and writes never block: a client that sends a partial line and
 * stops, or stops reading its replies, costs a buffer until it times out,
 * not the loop.
 *
 * The connections themselves, and the limits that keep one user from
 * denying service to another, are clients.c's. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/log.h"
#include "base/time.h"
#include "daemon/audit.h"
#include "daemon/clients.h"
#include "daemon/daemon.h"
#include "daemon/enforce.h"
#include "daemon/handlers.h"
#include "daemon/metrics.h"
#include "daemon/server.h"

typedef struct {
  tsr_daemon_t *d;
  int ep, expiry_fd, tick_fd, signal_fd, enforce_fd;
  uint64_t armed_deadline; /* what expiry_fd is set to; 0 = disarmed */
  uint64_t retry_at;       /* a due lease could not be ended: not before this */
  tsr_clients_t clients;   /* its address tags the listening socket */
  bool stop;
} tsr__server_t;

/* epoll user data for the non-connection fds */
static char tsr__tag_expiry, tsr__tag_tick, tsr__tag_signal, tsr__tag_enforce;

/* Arms the expiry timer at the earliest deadline (or disarms it). */
static void tsr__arm_expiry(tsr__server_t *s) {
  uint64_t next = 0;
  const tsr_lease_table_t *t = tsr_lease_service_table(s->d->leases);
  if (tsr_lease_table_next_deadline(t, &next)) {
    if (next < s->retry_at) next = s->retry_at;
    if (next == 0) next = 1;
  }
  uint64_t due = 0; /* a waiting create that gives up sooner */
  if (tsr_daemon_waits_next_due(s->d, &due) && (next == 0 || due < next)) next = due ? due : 1;
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

/* Runs the queue of waiting creates (daemon/waits.h) and answers those it
 * settled, after their lock files and audit lines are durable. */
static void tsr__run_waits(tsr__server_t *s) {
  tsr_daemon_waits_run(s->d);
  if (!s->d->waits.nanswers) return;
  tsr__sync(s);
  tsr_audit_flush(s->d->audit, tsr_time_mono_ns());
  tsr_clients_deliver(&s->clients);
  tsr_clients_send_replies(&s->clients);
}

/* Waits for the next batch of events. After a batch that served clients it
 * first polls, without sleeping, for up to busy_poll: a client that sends its
 * next request within that window finds the daemon awake. On a virtual
 * machine, waking a sleeping vCPU costs tens of microseconds per message
 * (bench/results/lease-*.md); an idle daemon still sleeps. */
static int tsr__wait(tsr__server_t *s, struct epoll_event *events, int max, bool served) {
  if (s->clients.ready) return epoll_wait(s->ep, events, max, 0);
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
  tsr__server_t s = {.d = d, .ep = -1, .expiry_fd = -1, .tick_fd = -1, .signal_fd = -1, .enforce_fd = -1};
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
  if (tsr__add(&s, listen_fd, &s.clients) || tsr__add(&s, s.expiry_fd, &tsr__tag_expiry) ||
      tsr__add(&s, s.tick_fd, &tsr__tag_tick) || tsr__add(&s, s.signal_fd, &tsr__tag_signal) ||
      tsr__add(&s, s.enforce_fd, &tsr__tag_enforce)) {
    tsr_log_error("epoll_ctl: %s", strerror(errno));
    goto out;
  }
  if (!tsr_clients_init(&s.clients, d, s.ep, listen_fd)) {
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
      if (tag == &s.clients) {
        tsr_clients_accept(&s.clients);
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
      } else if (tsr_clients_event(&s.clients, tag, events[i].events)) {
        served = true;
      }
    }
    if (tsr_clients_run_ready(&s.clients)) served = true; /* requests that waited for their replies to go */
    tsr_clients_close_doomed(&s.clients);
    /* durable lock files, then audit lines, then the replies they account for */
    tsr__sync(&s);
    tsr_audit_flush(d->audit, tsr_time_mono_ns());
    tsr_clients_send_replies(&s.clients);
    if (expiry_due) {
      /* a lease whose lock file would not go is retried in 1 s, not in a spin */
      s.retry_at = tsr_daemon_expire(d) ? tsr_time_mono_ns() + TSR_NS_PER_S : 0;
    }
    tsr__sync(&s); /* expiries */
    tsr_audit_flush(d->audit, tsr_time_mono_ns());
    /* the creates that wait: whatever the batch and the expiries freed is
     * granted now, durably, then each waiter is answered */
    tsr__run_waits(&s);
    if (tick_due) tsr_clients_close_idle(&s.clients, tsr_time_mono_ns());
    if (enforce_due) {
      tsr_daemon_enforce(d);
      tsr_audit_flush(d->audit, tsr_time_mono_ns());
    }
    tsr__arm_expiry(&s);
    tsr_daemon_metrics_publish(d, tsr_time_mono_ns());
  }
  /* nobody is left waiting on a daemon that is gone */
  tsr_daemon_waits_stop(d);
  tsr_clients_deliver(&s.clients);
  tsr_clients_send_replies(&s.clients);
  rc = 0;
out:
  tsr_clients_free(&s.clients); /* closes the connections before the epoll set */
  if (s.ep >= 0) close(s.ep);
  if (s.expiry_fd >= 0) close(s.expiry_fd);
  if (s.tick_fd >= 0) close(s.tick_fd);
  if (s.signal_fd >= 0) close(s.signal_fd);
  if (s.enforce_fd >= 0) close(s.enforce_fd);
  return rc;
}
