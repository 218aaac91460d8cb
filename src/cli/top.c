/* top.c: `tessera top`: the node at a glance, refreshed in place.
 *
 *   tessera top [--interval SECONDS] [--once] [--json]
 *
 * One `top` request per refresh (docs/top.md): per device its leases, each
 * with a memory bar, its SM share against what NVML measured, the time its
 * launches waited for tokens, the time left, and its processes; then the
 * GPU processes of no lease. The live view draws with plain ANSI sequences
 * (the alternate screen, home, clear to the end of line and of screen), so
 * nothing beyond libc is needed; the terminal is put in non-canonical mode
 * without echo so that `q` quits at once, and put back however it ends
 * (q, SIGINT, SIGTERM, SIGHUP, an error). What the command writes on stderr
 * while the live view owns the screen is held and shown after it.
 *
 * A frame fits 80 columns: long names are cut (ending in '~') and bytes
 * that are not printable ASCII shown as '?', since a command's name is
 * whatever its owner made it. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "base/array.h"
#include "base/json.h"
#include "base/time.h"
#include "base/units.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "proto/requests.h"

#define TSR__INTERVAL_MIN (50 * TSR_NS_PER_MS)
#define TSR__INTERVAL_MAX (3600 * TSR_NS_PER_S)
#define TSR__MEMBERS 32 /* members of a device, lease or process object, with room */

/* ---- the pieces ----------------------------------------------------------------- */

void tsr_cli_top_bar(uint64_t used, uint64_t limit, char *buf, size_t cap) {
  char cells[TSR_CLI_TOP_BAR + 1];
  size_t filled = TSR_CLI_TOP_BAR;
  if (limit > 0 && used < limit) {
    /* nearest cell; long double keeps used * cells exact enough past 2^64 */
    filled = (size_t)((long double)used * TSR_CLI_TOP_BAR / limit + 0.5L);
    if (used > 0 && filled == 0) filled = 1;
    if (filled >= TSR_CLI_TOP_BAR) filled = TSR_CLI_TOP_BAR - 1;
  } else if (limit == 0) {
    filled = 0;
  }
  for (size_t i = 0; i < TSR_CLI_TOP_BAR; i++) cells[i] = i < filled ? '#' : '.';
  cells[TSR_CLI_TOP_BAR] = '\0';
  snprintf(buf, cap, "[%s]", cells);
}

/* x in `unit` with one decimal, truncated: "3.1". */
static void tsr__tenths(uint64_t x, uint64_t unit, char *buf, size_t cap) {
  uint64_t whole = x / unit;
  uint64_t tenth = (uint64_t)((long double)(x % unit) * 10 / unit);
  if (tenth > 9) tenth = 9;
  snprintf(buf, cap, "%llu.%llu", (unsigned long long)whole, (unsigned long long)tenth);
}

void tsr_cli_top_mem(bool has_used, uint64_t used, uint64_t limit, char *buf, size_t cap) {
  static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int i = 0;
  /* the unit that keeps the limit under 1000 of it: "999.9/999.9 GiB" at most */
  while (i < 6 && limit / (UINT64_C(1) << (10 * i)) >= 1000) i++;
  uint64_t unit = UINT64_C(1) << (10 * i);
  char u[32] = "-", l[32];
  if (i == 0) {
    if (has_used) snprintf(u, sizeof(u), "%llu", (unsigned long long)used);
    snprintf(l, sizeof(l), "%llu", (unsigned long long)limit);
  } else {
    if (has_used) tsr__tenths(used, unit, u, sizeof(u));
    tsr__tenths(limit, unit, l, sizeof(l));
  }
  snprintf(buf, cap, "%s/%s %s", u, l, names[i]);
}

void tsr_cli_top_rate(uint64_t delta_ns, uint64_t elapsed_ns, char *buf, size_t cap) {
  if (elapsed_ns == 0) {
    snprintf(buf, cap, "-/s");
    return;
  }
  long double x = (long double)delta_ns * TSR_NS_PER_S / elapsed_ns;
  uint64_t per_s = x >= 18446744073709551615.0L ? UINT64_MAX : (uint64_t)x;
  if (per_s == 0) {
    snprintf(buf, cap, "0/s");
  } else if (per_s < TSR_NS_PER_MS) {
    snprintf(buf, cap, "<1ms/s");
  } else {
    char d[32];
    tsr_time_format_duration(per_s, d, sizeof(d));
    snprintf(buf, cap, "%s/s", d);
  }
}

void tsr_cli_top_fit(const char *text, size_t width, char *buf, size_t cap) {
  if (cap == 0) return;
  size_t n = 0, len = strlen(text);
  size_t max = width < cap - 1 ? width : cap - 1;
  for (; n < max && n < len; n++) {
    unsigned char c = (unsigned char)text[n];
    buf[n] = c >= 0x20 && c < 0x7f ? (char)c : '?';
  }
  if (len > n && n > 0) buf[n - 1] = '~';
  buf[n] = '\0';
}

/* ---- a frame ---------------------------------------------------------------------- */

typedef struct tsr_cli_top_seen_s {
  uint64_t id, throttled_ns;
} tsr__seen_t;

void tsr_cli_top_history_free(tsr_cli_top_history_t *h) {
  free(h->v);
  memset(h, 0, sizeof(*h));
}

/* The text being built, and this frame's throttled samples. */
typedef struct {
  char *buf;
  size_t len, cap;
  size_t width; /* columns a line may take */
  bool failed;
  const tsr_cli_top_history_t *prev;
  uint64_t elapsed_ns; /* since prev's samples; 0: no rates */
  tsr__seen_t *seen;
  size_t nseen, seen_cap;
} tsr__frame_t;

/* Appends one line, cut to the frame's width. */
__attribute__((format(printf, 2, 3))) static void tsr__line(tsr__frame_t *f, const char *fmt, ...) {
  char raw[1024], line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof(raw), fmt, ap);
  va_end(ap);
  size_t end = strlen(raw);
  while (end > 0 && raw[end - 1] == ' ') raw[--end] = '\0'; /* no trailing blanks */
  tsr_cli_top_fit(raw, f->width, line, sizeof(line));
  size_t n = strlen(line);
  char *b = tsr_array_grow(f->buf, &f->cap, f->len + n + 2, 1, 4096);
  if (!b) {
    f->failed = true;
    return;
  }
  f->buf = b;
  memcpy(f->buf + f->len, line, n);
  f->len += n;
  f->buf[f->len++] = '\n';
  f->buf[f->len] = '\0';
}

/* A member that is an integer, or null (then *out_has is false). */
static bool tsr__opt_u64(const tsr_json_member_t *m, size_t n, const char *key, bool *out_has, uint64_t *out) {
  const tsr_json_member_t *v = tsr_json_find(m, n, key);
  *out_has = false;
  *out = 0;
  if (v && v->type == TSR_JSON_NULL) return true;
  if (!tsr_json_get_u64(v, out)) return false;
  *out_has = true;
  return true;
}

static bool tsr__u64(const tsr_json_member_t *m, size_t n, const char *key, uint64_t *out) {
  return tsr_json_get_u64(tsr_json_find(m, n, key), out);
}

static bool tsr__str(const tsr_json_member_t *m, size_t n, const char *key, char *out, size_t cap) {
  const tsr_json_member_t *v = tsr_json_find(m, n, key);
  if (v && v->type == TSR_JSON_NULL) {
    snprintf(out, cap, "?");
    return true;
  }
  if (!v || v->type != TSR_JSON_STRING) return false;
  if (!tsr_json_get_string(v, out, cap)) snprintf(out, cap, "?"); /* too long: not worth failing */
  return true;
}

static bool tsr__bool(const tsr_json_member_t *m, size_t n, const char *key, bool *out) {
  return tsr_json_get_bool(tsr_json_find(m, n, key), out);
}

static const tsr_json_member_t *tsr__array(const tsr_json_member_t *m, size_t n, const char *key) {
  const tsr_json_member_t *v = tsr_json_find(m, n, key);
  return v && v->type == TSR_JSON_ARRAY ? v : NULL;
}

/* "sm 28%", or "sm -" when unknown. */
static void tsr__pct(const char *prefix, bool known, uint64_t pct, char *buf, size_t cap) {
  if (known)
    snprintf(buf, cap, "%s%llu%%", prefix, (unsigned long long)pct);
  else
    snprintf(buf, cap, "%s-", prefix);
}

/* One process line: pid, user, command, memory, SM utilisation. */
static bool tsr__proc_line(tsr__frame_t *f, const tsr_json_member_t *item) {
  tsr_json_member_t m[TSR__MEMBERS];
  size_t n;
  tsr_json_error_t err;
  uint64_t pid, used, gpu, sm;
  bool has_used, has_gpu, has_sm;
  char user[64], command[128], cuser[9], ccmd[38], mem[32], smt[16];
  if (!tsr_json_scan_object(item->value, item->value_len, m, TSR__MEMBERS, &n, &err) || !tsr__u64(m, n, "pid", &pid) ||
      !tsr__str(m, n, "user", user, sizeof(user)) || !tsr__str(m, n, "command", command, sizeof(command)) ||
      !tsr__opt_u64(m, n, "used_bytes", &has_used, &used) || !tsr__opt_u64(m, n, "gpu_bytes", &has_gpu, &gpu) ||
      !tsr__opt_u64(m, n, "sm_util", &has_sm, &sm))
    return false;
  tsr_cli_top_fit(user, 8, cuser, sizeof(cuser));
  tsr_cli_top_fit(command[0] ? command : "?", 37, ccmd, sizeof(ccmd));
  /* what its slot holds (the shim's charges); NVML's word for one without */
  if (has_used || has_gpu)
    tsr_format_size(has_used ? used : gpu, mem, sizeof(mem));
  else
    snprintf(mem, sizeof(mem), "-");
  tsr__pct("sm ", has_sm, sm, smt, sizeof(smt));
  tsr__line(f, "      %-7llu %-8s %-37s %10s %s", (unsigned long long)pid, cuser, ccmd, mem, smt);
  return true;
}

static bool tsr__procs(tsr__frame_t *f, const tsr_json_member_t *list) {
  tsr_json_member_t item;
  for (size_t cur = 0; tsr_json_array_next(list->value, list->value_len, &cur, &item);)
    if (item.type != TSR_JSON_OBJECT || !tsr__proc_line(f, &item)) return false;
  return true;
}

/* The lease's throttled time at the previous frame, if it had one. */
static bool tsr__prev_throttled(const tsr__frame_t *f, uint64_t id, uint64_t *out) {
  for (size_t i = 0; f->prev && i < f->prev->count; i++)
    if (f->prev->v[i].id == id) {
      *out = f->prev->v[i].throttled_ns;
      return true;
    }
  return false;
}

static bool tsr__lease(tsr__frame_t *f, const tsr_json_member_t *item) {
  tsr_json_member_t m[TSR__MEMBERS];
  size_t n;
  tsr_json_error_t err;
  uint64_t id, limit, used, sm_ppm, measured, throttled, left;
  bool has_used, has_measured, has_throttled, revoked;
  char owner[64];
  if (!tsr_json_scan_object(item->value, item->value_len, m, TSR__MEMBERS, &n, &err) || !tsr__u64(m, n, "id", &id) ||
      !tsr__str(m, n, "owner", owner, sizeof(owner)) || !tsr__u64(m, n, "limit_bytes", &limit) ||
      !tsr__opt_u64(m, n, "used_bytes", &has_used, &used) || !tsr__u64(m, n, "sm_ppm", &sm_ppm) ||
      sm_ppm > TSR_PPM_ONE || !tsr__opt_u64(m, n, "sm_measured", &has_measured, &measured) ||
      !tsr__opt_u64(m, n, "throttled_ns", &has_throttled, &throttled) || !tsr__u64(m, n, "remaining_ns", &left) ||
      !tsr__bool(m, n, "revoked", &revoked))
    return false;
  const tsr_json_member_t *procs = tsr__array(m, n, "processes");
  if (!procs) return false;
  char cowner[9], bar[TSR_CLI_TOP_BAR + 3], mem[48], target[16], sm[40], rate[24], total[24], thr[48], lefts[24];
  tsr_cli_top_fit(owner, 8, cowner, sizeof(cowner));
  tsr_cli_top_bar(has_used ? used : 0, limit, bar, sizeof(bar));
  tsr_cli_top_mem(has_used, used, limit, mem, sizeof(mem));
  if (sm_ppm) {
    /* whole percents: "12.5%" would not fit, and NVML measures in whole ones */
    snprintf(target, sizeof(target), "%u%%", (unsigned)((sm_ppm + 5000) / 10000));
  } else {
    snprintf(target, sizeof(target), "-");
  }
  char meas[16];
  tsr__pct("", has_measured, measured, meas, sizeof(meas));
  snprintf(sm, sizeof(sm), "sm %s / %s", target, meas);
  if (has_throttled) {
    uint64_t before = 0;
    bool seen = tsr__prev_throttled(f, id, &before);
    uint64_t delta = throttled >= before ? throttled - before : 0; /* a restarted region: 0 */
    tsr_cli_top_rate(delta, seen ? f->elapsed_ns : 0, rate, sizeof(rate));
    tsr_time_format_duration(throttled, total, sizeof(total));
    snprintf(thr, sizeof(thr), "%s %s", rate, total);
    tsr__seen_t *s = tsr_array_grow(f->seen, &f->seen_cap, f->nseen + 1, sizeof(*s), 16);
    if (s) {
      f->seen = s;
      f->seen[f->nseen++] = (tsr__seen_t){id, throttled};
    }
  } else {
    snprintf(thr, sizeof(thr), "-");
  }
  if (revoked)
    snprintf(lefts, sizeof(lefts), "revoked");
  else
    tsr_time_format_duration(left, lefts, sizeof(lefts));
  tsr__line(f, "%-5llu %-8s %s %-15s %-13s %-13s %s", (unsigned long long)id, cowner, bar, mem, sm, thr, lefts);
  return tsr__procs(f, procs);
}

static bool tsr__device(tsr__frame_t *f, const tsr_json_member_t *item) {
  tsr_json_member_t m[TSR__MEMBERS];
  size_t n;
  tsr_json_error_t err;
  uint64_t index, memory, committed;
  char name[TSR_DEVICE_NAME_MAX], cname[31], total[32], held[16];
  if (!tsr_json_scan_object(item->value, item->value_len, m, TSR__MEMBERS, &n, &err) ||
      !tsr__u64(m, n, "index", &index) || !tsr__str(m, n, "name", name, sizeof(name)) ||
      !tsr__u64(m, n, "memory_bytes", &memory) || !tsr__u64(m, n, "sm_committed_ppm", &committed) ||
      committed > TSR_PPM_ONE)
    return false;
  const tsr_json_member_t *leases = tsr__array(m, n, "leases");
  const tsr_json_member_t *unleased = tsr__array(m, n, "unleased");
  if (!leases || !unleased) return false;
  size_t count = 0;
  tsr_json_member_t l;
  for (size_t cur = 0; tsr_json_array_next(leases->value, leases->value_len, &cur, &l);) count++;
  tsr_cli_top_fit(name, 30, cname, sizeof(cname));
  tsr_format_size(memory, total, sizeof(total));
  tsr_format_percent((uint32_t)committed, held, sizeof(held));
  tsr__line(f, "GPU %llu  %s  %s  %zu lease%s  SM committed %s", (unsigned long long)index, cname, total, count,
            count == 1 ? "" : "s", held);
  if (count)
    tsr__line(f, "%-5s %-8s %-28s %-13s %-13s %s", "LEASE", "OWNER", "MEMORY (REPORTED)", "SM SET / USED", "THROTTLED",
              "LEFT");
  for (size_t cur = 0; tsr_json_array_next(leases->value, leases->value_len, &cur, &l);)
    if (l.type != TSR_JSON_OBJECT || !tsr__lease(f, &l)) return false;
  tsr_json_member_t first;
  size_t cur = 0;
  if (tsr_json_array_next(unleased->value, unleased->value_len, &cur, &first)) {
    tsr__line(f, "no lease:");
    if (!tsr__procs(f, unleased)) return false;
  }
  /* what an ordinary user may know of everyone else's: counts */
  const tsr_json_member_t *others = tsr_json_find(m, n, "others");
  if (others && others->type == TSR_JSON_OBJECT) {
    tsr_json_member_t o[8];
    size_t on;
    uint64_t nleases = 0, limit = 0, procs = 0, loose = 0;
    if (!tsr_json_scan_object(others->value, others->value_len, o, 8, &on, &err) ||
        !tsr__u64(o, on, "leases", &nleases) || !tsr__u64(o, on, "limit_bytes", &limit) ||
        !tsr__u64(o, on, "processes", &procs) || !tsr__u64(o, on, "unleased_processes", &loose))
      return false;
    if (nleases || loose) {
      char lim[32];
      tsr_format_size(limit, lim, sizeof(lim));
      tsr__line(f,
                "others: %llu lease%s (%s) with %llu process%s, %llu process%s of no lease "
                "(details: admins)",
                (unsigned long long)nleases, nleases == 1 ? "" : "s", lim, (unsigned long long)procs,
                procs == 1 ? "" : "es", (unsigned long long)loose, loose == 1 ? "" : "es");
    }
  }
  return true;
}

tsr_status_t tsr_cli_top_render(const char *top, size_t len, const char *title, size_t width,
                                tsr_cli_top_history_t *history, uint64_t now_ns, char **out_text) {
  *out_text = NULL;
  tsr__frame_t f = {.width = (width < 20 ? 20 : width) - 1, .prev = history};
  if (history && history->at_ns && now_ns > history->at_ns) f.elapsed_ns = now_ns - history->at_ns;
  tsr_json_member_t m[8];
  size_t n;
  tsr_json_error_t err;
  const tsr_json_member_t *devices = NULL;
  bool ok = tsr_json_scan_object(top, len, m, 8, &n, &err) && (devices = tsr__array(m, n, "devices")) != NULL;
  if (ok && title) tsr__line(&f, "%s", title);
  tsr_json_member_t d;
  size_t shown = 0;
  for (size_t cur = 0; ok && tsr_json_array_next(devices->value, devices->value_len, &cur, &d);) {
    if (shown++) tsr__line(&f, "%s", "");
    ok = d.type == TSR_JSON_OBJECT && tsr__device(&f, &d);
  }
  if (ok && shown == 0) tsr__line(&f, "no devices");
  if (!ok || f.failed) {
    free(f.buf);
    free(f.seen);
    return ok ? tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory")
              : tsr_status_make(TSR_DATA_LOSS, "malformed top reply from the daemon");
  }
  if (history) {
    free(history->v);
    history->v = f.seen;
    history->count = f.nseen;
    history->cap = f.seen_cap;
    history->at_ns = now_ns;
  } else {
    free(f.seen);
  }
  *out_text = f.buf ? f.buf : calloc(1, 1);
  return *out_text ? NULL : tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
}

/* ---- talking to the daemon -------------------------------------------------------- */

/* One `top` request; *out_top is the reply's "top" object (valid until r
 * is used again). Errors are printed; returns the exit status. */
static int tsr__fetch(const tsr_cli_globals_t *g, tsr_cli_reply_t *r, const tsr_json_member_t **out_top) {
  *out_top = NULL;
  tsr_json_writer_t w = {0};
  tsr_proto_plain_write(&w, TSR_PROTO_TOP);
  int rc = tsr_cli_call(g, &w, r);
  tsr_json_writer_free(&w);
  if (rc) return rc;
  *out_top = tsr_cli_reply_member(r, "top", TSR_JSON_OBJECT);
  return *out_top ? TSR_EXIT_OK : TSR_EXIT_INTERNAL;
}

/* "tessera top  15:40:01 UTC": the time of the daemon's snapshot. */
static void tsr__title(const tsr_json_member_t *top, const char *extra, char *buf, size_t cap) {
  tsr_json_member_t m[8];
  size_t n;
  tsr_json_error_t err;
  char now[48] = "";
  if (tsr_json_scan_object(top->value, top->value_len, m, 8, &n, &err) &&
      tsr_json_get_string(tsr_json_find(m, n, "now"), now, sizeof(now)) && strlen(now) >= 19)
    snprintf(buf, cap, "tessera top  %.8s UTC%s", now + 11, extra);
  else
    snprintf(buf, cap, "tessera top%s", extra);
}

static int tsr__once(const tsr_cli_globals_t *g, bool json) {
  tsr_cli_reply_t r = {0};
  const tsr_json_member_t *top = NULL;
  int rc = tsr__fetch(g, &r, &top);
  if (!rc && json) {
    rc = tsr_cli_print_json(top->value, top->value_len);
  } else if (!rc) {
    char title[96], *text = NULL;
    tsr__title(top, "", title, sizeof(title));
    rc = tsr_cli_fail(tsr_cli_top_render(top->value, top->value_len, title, 80, NULL, 0, &text));
    if (!rc && (fputs(text, stdout) == EOF || fflush(stdout) != 0)) {
      tsr_cli_error("could not write the output");
      rc = TSR_EXIT_INTERNAL;
    }
    free(text);
  }
  tsr_cli_reply_close(&r);
  return rc;
}

/* ---- the live view ------------------------------------------------------------------ */

/* What the live view changed, to put back. One per process: the signal
 * handler reads it. */
typedef struct {
  bool raw; /* stdin's terminal mode changed */
  struct termios saved;
  bool screen;         /* the alternate screen is on */
  int saved_err;       /* stderr while it is held, or -1 */
  FILE *held_err;      /* what was written on stderr meanwhile */
  sigset_t saved_mask; /* the signal mask before */
  sigset_t stops;      /* SIGINT, SIGTERM, SIGHUP, SIGWINCH */
  struct sigaction old[4];
} tsr__term_t;

static const int tsr__sigs[4] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
static tsr__term_t tsr__term;
static volatile sig_atomic_t tsr__stop_sig; /* SIGINT, SIGTERM or SIGHUP received */
static volatile sig_atomic_t tsr__resized;
static volatile sig_atomic_t tsr__busy; /* in a request, which may not return soon */

static void tsr__write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, s, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return;
    s += k;
    n -= (size_t)k;
  }
}

static const char tsr__screen_on[] = "\033[?1049h\033[?25l"; /* alternate screen, no cursor */
static const char tsr__screen_off[] = "\033[?25h\033[?1049l";

/* The signals are held (blocked) except while a request runs and in the
 * wait between frames (ppoll). In the wait, a stop signal ends the loop,
 * which puts the terminal back. In a request, which may block on a daemon
 * that does not answer, the handler itself puts it back (write, tcsetattr
 * and dup2 are async-signal-safe) and ends the process by the signal. */
static void tsr__on_signal(int sig) {
  if (sig == SIGWINCH) {
    tsr__resized = 1;
    return;
  }
  tsr__stop_sig = sig;
  if (!tsr__busy) return;
  tsr__term_t *t = &tsr__term;
  if (t->screen) tsr__write_all(STDOUT_FILENO, tsr__screen_off, sizeof(tsr__screen_off) - 1);
  if (t->raw) tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
  if (t->saved_err >= 0) dup2(t->saved_err, STDERR_FILENO);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, NULL);
  raise(sig); /* delivered as the handler returns: the default action, the end */
}

static void tsr__term_enter(tsr__term_t *t) {
  memset(t, 0, sizeof(*t));
  t->saved_err = -1;
  sigemptyset(&t->stops);
  for (int i = 0; i < 4; i++) sigaddset(&t->stops, tsr__sigs[i]);
  sigprocmask(SIG_BLOCK, &t->stops, &t->saved_mask);
  if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &t->saved) == 0) {
    struct termios raw = t->saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO); /* keys at once, unseen; ^C stays a signal */
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    t->raw = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  fflush(stderr);
  t->held_err = tmpfile();
  if (t->held_err) {
    t->saved_err = dup(STDERR_FILENO);
    if (t->saved_err < 0 || dup2(fileno(t->held_err), STDERR_FILENO) < 0) {
      if (t->saved_err >= 0) close(t->saved_err);
      t->saved_err = -1;
      fclose(t->held_err);
      t->held_err = NULL;
    }
  }
  tsr__write_all(STDOUT_FILENO, tsr__screen_on, sizeof(tsr__screen_on) - 1);
  t->screen = true;
  for (int i = 0; i < 4; i++) { /* last: the handler finds everything it may put back */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = tsr__on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(tsr__sigs[i], &sa, &t->old[i]);
  }
}

/* Puts everything back (signals still held); then shows what stderr held,
 * unless `quiet`. */
static void tsr__term_leave(tsr__term_t *t, bool quiet) {
  for (int i = 0; i < 4; i++) sigaction(tsr__sigs[i], &t->old[i], NULL);
  if (t->screen) tsr__write_all(STDOUT_FILENO, tsr__screen_off, sizeof(tsr__screen_off) - 1);
  t->screen = false;
  if (t->raw) tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
  t->raw = false;
  if (t->held_err) {
    fflush(stderr);
    dup2(t->saved_err, STDERR_FILENO);
    close(t->saved_err);
    t->saved_err = -1;
    if (!quiet) {
      char buf[4096];
      size_t n;
      rewind(t->held_err);
      while ((n = fread(buf, 1, sizeof(buf), t->held_err)) > 0) tsr__write_all(STDERR_FILENO, buf, n);
    }
    fclose(t->held_err);
    t->held_err = NULL;
  }
}

/* One request with the stop signals let through: a daemon that does not
 * answer cannot keep Ctrl-C from working. */
static int tsr__fetch_live(const tsr_cli_globals_t *g, tsr_cli_reply_t *r, const tsr_json_member_t **out_top) {
  tsr__busy = 1;
  sigprocmask(SIG_SETMASK, &tsr__term.saved_mask, NULL);
  int rc = tsr__fetch(g, r, out_top);
  sigprocmask(SIG_BLOCK, &tsr__term.stops, NULL);
  tsr__busy = 0;
  return rc;
}

/* Draws `text` (lines, each ending in a newline) from the top left, each
 * line cleared to its end and the rest of the screen cleared; at most
 * `rows` lines, the last of them then saying how many did not fit. No
 * newline after the last line: the screen never scrolls. */
static void tsr__draw(const char *text, size_t rows) {
  size_t total = 0;
  for (const char *p = text; *p; p++) total += *p == '\n';
  size_t shown = total <= rows ? total : rows - 1;
  char more[80] = "";
  if (shown < total) snprintf(more, sizeof(more), "(%zu more lines: a taller terminal shows them)", total - shown);
  size_t cap = 0;
  char *out = tsr_array_grow(NULL, &cap, strlen(text) + 4 * (total + 1) + sizeof(more) + 8, 1, 4096);
  if (!out) return;
  size_t len = 0;
  memcpy(out, "\033[H", 3);
  len += 3;
  const char *p = text;
  for (size_t i = 0; i <= shown; i++) {
    const char *line = i < shown ? p : more;
    size_t n = i < shown ? (size_t)(strchr(p, '\n') - p) : strlen(more);
    if (i == shown && !more[0]) break;
    if (i) out[len++] = '\n'; /* ends the line before */
    memcpy(out + len, line, n);
    len += n;
    memcpy(out + len, "\033[K", 3);
    len += 3;
    if (i < shown) p += n + 1;
  }
  memcpy(out + len, "\033[J", 3);
  len += 3;
  tsr__write_all(STDOUT_FILENO, out, len);
  free(out);
}

static void tsr__term_size(size_t *out_cols, size_t *out_rows) {
  struct winsize ws;
  *out_cols = 80;
  *out_rows = 24;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    *out_cols = ws.ws_col;
    *out_rows = ws.ws_row;
  }
}

/* Waits until `deadline` (monotonic ns) for a key, the signals let through
 * only in ppoll. True if it was q. */
static bool tsr__wait_keys(uint64_t deadline, bool *stdin_open) {
  for (;;) {
    uint64_t now = tsr_time_mono_ns();
    if (now >= deadline || tsr__stop_sig || tsr__resized) return false;
    uint64_t left = deadline - now;
    struct timespec ts = {(time_t)(left / TSR_NS_PER_S), (long)(left % TSR_NS_PER_S)};
    struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
    int n = ppoll(&pfd, *stdin_open ? 1 : 0, &ts, &tsr__term.saved_mask);
    if (n <= 0) continue; /* a signal (its flag is checked above), or the time */
    char keys[64];
    ssize_t k = read(STDIN_FILENO, keys, sizeof(keys));
    if (k <= 0) {
      if (k == 0 || (errno != EINTR && errno != EAGAIN)) *stdin_open = false; /* no more keys */
      continue;
    }
    if (memchr(keys, 'q', (size_t)k) || memchr(keys, 'Q', (size_t)k)) return true;
  }
}

static int tsr__live(const tsr_cli_globals_t *g, uint64_t interval_ns) {
  if (!isatty(STDOUT_FILENO)) {
    tsr_cli_error("top: standard output is not a terminal (--once or --json print one snapshot)");
    return TSR_EXIT_USAGE;
  }
  /* the first answer before the screen is taken: a daemon that is not
   * there is one line in the terminal as it was */
  tsr_cli_reply_t r = {0};
  const tsr_json_member_t *top = NULL;
  int rc = tsr__fetch(g, &r, &top);
  if (rc) return rc;
  char every[32], extra[64], title[128];
  tsr_time_format_duration(interval_ns, every, sizeof(every));
  snprintf(extra, sizeof(extra), "  every %s  q quits", every);
  tsr_cli_top_history_t history = {0};
  tsr__stop_sig = 0;
  tsr__resized = 0;
  tsr__term_enter(&tsr__term);
  bool stdin_open = true; /* until it reads as closed */
  bool quit = false;
  while (!quit && !tsr__stop_sig) {
    uint64_t started = tsr_time_mono_ns();
    if (!top) rc = tsr__fetch_live(g, &r, &top);
    if (rc || tsr__stop_sig) break;
    size_t cols, rows;
    tsr__term_size(&cols, &rows);
    char *text = NULL;
    tsr__title(top, extra, title, sizeof(title));
    tsr_status_t st = tsr_cli_top_render(top->value, top->value_len, title, cols, &history, started, &text);
    if (st) {
      rc = tsr_cli_fail(st);
      break;
    }
    tsr__draw(text, rows);
    free(text);
    top = NULL; /* the next frame asks again, on the same connection */
    tsr__resized = 0;
    quit = tsr__wait_keys(started + interval_ns, &stdin_open);
  }
  int sig = tsr__stop_sig;
  tsr__term_leave(&tsr__term, sig != 0);
  tsr_cli_top_history_free(&history);
  tsr_cli_reply_close(&r);
  if (sig) { /* end as the signal ends a process, the terminal put back */
    signal(sig, SIG_DFL);
    raise(sig); /* held: delivered when the mask is put back */
  }
  sigprocmask(SIG_SETMASK, &tsr__term.saved_mask, NULL);
  return sig ? 128 + sig : rc;
}

/* ---- the command ----------------------------------------------------------------- */

/* "0.5", "2" (seconds) or a duration with its unit ("200ms"). */
TSR_MUST_USE static tsr_status_t tsr__parse_interval(const char *text, uint64_t *out_ns) {
  char with_unit[64];
  const char *given = text;
  bool bare = *text && strspn(text, "0123456789.") == strlen(text);
  if (bare && strlen(text) < sizeof(with_unit) - 1) {
    snprintf(with_unit, sizeof(with_unit), "%ss", text);
    text = with_unit;
  }
  uint64_t ns = 0;
  tsr_status_t st = tsr_parse_duration(text, &ns);
  if (st || ns < TSR__INTERVAL_MIN || ns > TSR__INTERVAL_MAX) {
    tsr_status_free(st);
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "--interval: '%s' is not a time from 0.05 to 3600 seconds (0.5, 2, 200ms)", given);
  }
  *out_ns = ns;
  return NULL;
}

int tsr_cli_top_main(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera top [--interval SECONDS] [--once] [--json]\n"
      "\n"
      "The node at a glance: for each GPU its leases (owner, memory used against the\n"
      "limit, SM share set against what NVML measured, time its launches waited for\n"
      "their share, time left) with their processes, and the GPU processes of no\n"
      "lease. Refreshed in place; q quits. See docs/top.md for every column.\n"
      "\n"
      "  --interval T  seconds between refreshes (default 1; 0.05 to 3600, or 200ms)\n"
      "  --once        print one snapshot and exit (no terminal needed)\n"
      "  --json        print the daemon's snapshot as JSON and exit\n";
  static const struct option opts[] = {{"interval", required_argument, NULL, 'i'},
                                       {"once", no_argument, NULL, 'o'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  uint64_t interval = TSR_NS_PER_S;
  bool once = false, json = false;
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if (c == 'i') {
      int rc = tsr_cli_fail(tsr__parse_interval(optarg, &interval));
      if (rc) return rc;
    } else if (c == 'o') {
      once = true;
    } else if (c == 'j') {
      json = true;
    } else if (c == 'h') {
      printf("%s", usage);
      return TSR_EXIT_OK;
    } else {
      return tsr_cli_option_error(c, argv);
    }
  }
  if (optind < argc) {
    tsr_cli_error("unexpected argument '%s' (try --help)", argv[optind]);
    return TSR_EXIT_USAGE;
  }
  if (once || json) return tsr__once(g, json);
  return tsr__live(g, interval);
}
