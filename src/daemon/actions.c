/* actions.c: SIGTERM, then SIGKILL after the grace, never to a reused pid.
 *
 * A target is a pid with its start time. Before each signal the process is
 * pinned with pidfd_open(2) and its start time read again: if it matches,
 * the pidfd names that very process, and pidfd_send_signal(2) can only reach
 * it, however soon its pid is reused. Without pidfds (kernels before 5.3)
 * the start time is checked right before kill(2), which leaves the window
 * between the two. A target stays listed (with its pidfd) through its
 * grace period, so acting on a lease again while one runs adds only
 * processes not yet signalled: nothing piles up. Bounded: at most
 * TSR__TARGETS_MAX targets wait at once (each holds a descriptor); beyond,
 * processes get SIGTERM without a SIGKILL to follow, and the log says so.
 *
 * Whose processes: a target comes from what a tenant wrote (a region slot
 * names a pid, its start time and namespace, all of them world-readable for
 * any process on the node) as often as from what the daemon saw itself, so
 * nothing about a target is taken on trust. Before each signal, with the
 * process pinned, its uids are read from /proc: only a process whose real
 * uid is the lease's owner, and none of whose real, effective and saved
 * uids is root's, the daemon's or an admin's, is ever signalled. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/array.h"
#include "base/log.h"
#include "daemon/actions.h"
#include "daemon/procs.h"

#define TSR__TARGETS_MAX 4096
/* After its SIGKILL a target stays listed (so the lease is not acted on
 * again) until it is gone, or this long. */
#define TSR__KILL_WAIT_NS (10 * UINT64_C(1000000000))

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

typedef struct {
  uint64_t lease;
  uint32_t owner_uid;
  tsr_target_t t;
  int pidfd;        /* -1 without pidfds */
  uint64_t kill_at; /* CLOCK_MONOTONIC ns */
  bool killed;      /* SIGKILL sent */
} tsr__pending_t;

struct tsr_actions_s {
  uint64_t grace_ns;
  tsr_actions_exempt_fn exempt;
  void *exempt_ctx;
  uint64_t refused; /* targets that were not the owner's, or exempt */
  tsr__pending_t *v;
  size_t count, cap;
  bool no_pidfd; /* the kernel has none: checked once */
  bool warned_full;
};

tsr_status_t tsr_actions_create(uint64_t grace_ns, tsr_actions_exempt_fn exempt, void *ctx, tsr_actions_t **out) {
  *out = NULL;
  if (!exempt) return tsr_status_make(TSR_INVALID_ARGUMENT, "actions need an exemption rule");
  tsr_actions_t *a = calloc(1, sizeof(*a));
  if (!a) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  a->grace_ns = grace_ns;
  a->exempt = exempt;
  a->exempt_ctx = ctx;
  *out = a;
  return NULL;
}

void tsr_actions_free(tsr_actions_t *a) {
  if (!a) return;
  for (size_t i = 0; i < a->count; i++)
    if (a->v[i].pidfd >= 0) close(a->v[i].pidfd);
  free(a->v);
  free(a);
}

/* Whether the process (pinned, or about to be checked for its start time)
 * may be signalled on behalf of `owner_uid`. */
static bool tsr__owner_ok(tsr_actions_t *a, int32_t pid, uint32_t owner_uid) {
  uint32_t ids[3];
  if (!tsr_procs_uids_of(pid, ids) || ids[0] != owner_uid) return false;
  for (int i = 0; i < 3; i++)
    if ((i == 0 || ids[i] != ids[0]) && a->exempt(a->exempt_ctx, ids[i])) return false;
  return true;
}

/* Pins target `t` and checks whose it is: a pidfd (or -2 without pidfds),
 * -1 if it is gone or is another process now, -3 if it is not the owner's
 * to be signalled. The uids are read after the pidfd is taken and before
 * the start time is checked, so both are the pinned process's. */
static int tsr__pin(tsr_actions_t *a, const tsr_target_t *t, uint32_t owner_uid) {
  int fd = -2;
  if (!a->no_pidfd) {
    fd = (int)syscall(SYS_pidfd_open, t->pid, 0);
    if (fd < 0 && errno == ENOSYS) {
      a->no_pidfd = true;
      fd = -2;
    } else if (fd < 0) {
      return -1; /* ESRCH: gone */
    }
  }
  bool owners = tsr__owner_ok(a, t->pid, owner_uid);
  uint64_t ticks = 0;
  if (!tsr_procs_start_of(t->pid, &ticks) || ticks != t->start_ticks) {
    if (fd >= 0) close(fd);
    return -1;
  }
  if (!owners) {
    if (fd >= 0) close(fd);
    return -3;
  }
  return fd;
}

/* Sends `sig` through a pinned target; false if it is gone. */
static bool tsr__send(int fd, const tsr_target_t *t, int sig) {
  if (fd >= 0) return syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) == 0;
  return kill(t->pid, sig) == 0;
}

static bool tsr__listed(const tsr_actions_t *a, const tsr_target_t *t) {
  for (size_t i = 0; i < a->count; i++)
    if (a->v[i].t.pid == t->pid && a->v[i].t.start_ticks == t->start_ticks) return true;
  return false;
}

size_t tsr_actions_signal(tsr_actions_t *a, uint64_t lease, uint32_t owner_uid, const tsr_target_t *targets,
                          size_t count, uint64_t now) {
  size_t sent = 0, refused = 0;
  int32_t refused_pid = 0;
  for (size_t i = 0; i < count; i++) {
    const tsr_target_t *t = &targets[i];
    if (t->pid <= 1 || t->pid == getpid() || tsr__listed(a, t)) continue;
    int fd = tsr__pin(a, t, owner_uid);
    if (fd == -3) {
      refused++;
      refused_pid = t->pid;
      continue;
    }
    if (fd == -1) continue;
    if (!tsr__send(fd, t, SIGTERM)) {
      if (fd >= 0) close(fd);
      continue;
    }
    sent++;
    tsr__pending_t *v =
        a->count < TSR__TARGETS_MAX ? tsr_array_grow(a->v, &a->cap, a->count + 1, sizeof(*v), 16) : NULL;
    if (!v) {
      if (!a->warned_full)
        tsr_log_warn("%zu processes wait for SIGKILL already: pid %d got SIGTERM, none will follow", a->count, t->pid);
      a->warned_full = true;
      if (fd >= 0) close(fd);
      continue;
    }
    a->v = v;
    a->v[a->count++] = (tsr__pending_t){lease, owner_uid, *t, fd >= 0 ? fd : -1, now + a->grace_ns, false};
  }
  if (refused) {
    a->refused += refused;
    tsr_log_warn(
        "lease %llu: %zu process(es) (pid %d%s) named for it are not its owner's (uid "
        "%u) or are privileged: not signalled",
        (unsigned long long)lease, refused, refused_pid, refused > 1 ? ", ..." : "", owner_uid);
  }
  return sent;
}

uint64_t tsr_actions_refused(const tsr_actions_t *a) { return a ? a->refused : 0; }

bool tsr_actions_pending(const tsr_actions_t *a, uint64_t lease, int32_t pid) {
  for (size_t i = 0; a && i < a->count; i++)
    if (a->v[i].lease == lease && (lease != 0 || a->v[i].t.pid == pid)) return true;
  return false;
}

/* Has the target exited? A pidfd turns readable when its process exits
 * (a zombie included); without one, its start time no longer reads back. */
static bool tsr__exited(const tsr__pending_t *p) {
  if (p->pidfd >= 0) {
    struct pollfd pfd = {.fd = p->pidfd, .events = POLLIN};
    return poll(&pfd, 1, 0) > 0;
  }
  uint64_t ticks = 0;
  return !tsr_procs_start_of(p->t.pid, &ticks) || ticks != p->t.start_ticks;
}

void tsr_actions_tick(tsr_actions_t *a, uint64_t now) {
  size_t n = 0;
  for (size_t i = 0; i < a->count; i++) {
    tsr__pending_t *p = &a->v[i];
    bool done = tsr__exited(p);
    if (!done && !p->killed && now >= p->kill_at) {
      /* without a pidfd, tsr__exited just read the start time: the pid is
       * still the target's; its uids are looked at again (an exec of a
       * set-user-ID program changes them) */
      if (!tsr__owner_ok(a, p->t.pid, p->owner_uid))
        tsr_log_warn("pid %d (lease %llu) is no longer its owner's to end: no SIGKILL", p->t.pid,
                     (unsigned long long)p->lease);
      else if (tsr__send(p->pidfd, &p->t, SIGKILL))
        tsr_log_info("pid %d (lease %llu) outlived its %.1f s grace: SIGKILL", p->t.pid, (unsigned long long)p->lease,
                     (double)a->grace_ns / 1e9);
      p->killed = true;
    } else if (!done && p->killed && now >= p->kill_at + TSR__KILL_WAIT_NS) {
      tsr_log_warn("pid %d (lease %llu) is still there %.0f s after SIGKILL; forgetting it", p->t.pid,
                   (unsigned long long)p->lease, (double)TSR__KILL_WAIT_NS / 1e9);
      done = true;
    }
    if (done) {
      if (p->pidfd >= 0) close(p->pidfd);
      continue;
    }
    a->v[n++] = *p;
  }
  a->count = n;
}
