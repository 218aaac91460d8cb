/* top_render.c: `tessera top`'s frames, as text: the pieces (a memory bar,
 * sizes, rates, fitting a line to the width) and a whole frame rendered from
 * the daemon's `top` reply (docs/top.md). Pure: no terminal, no socket; the
 * command and its live view are in top.c.
 *
 * A frame fits 80 columns: long names are cut (ending in '~') and bytes
 * that are not printable ASCII shown as '?', since a command's name is
 * whatever its owner made it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/json.h"
#include "base/time.h"
#include "base/units.h"
#include "cli/cli.h"
#include "device/device.h"

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
  uint64_t queued = 0; /* daemons before the wait queue do not say */
  char waiting[48] = "";
  if (tsr__u64(m, n, "queued", &queued) && queued)
    snprintf(waiting, sizeof(waiting), "  %llu waiting", (unsigned long long)queued);
  tsr__line(f, "GPU %llu  %s  %s  %zu lease%s  SM committed %s%s", (unsigned long long)index, cname, total, count,
            count == 1 ? "" : "s", held, waiting);
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
