/* metrics.c: the Prometheus exposition. The event loop writes it into a
 * snapshot (tsr_daemon_metrics_publish, a few times a second at most) that
 * metrics_http.c serves: every line is tagged with the audience that may see
 * it (node-wide, or the owner of one lease), so that a scrape copies the
 * lines its audience may see without ever touching the lease table, which is
 * the event loop's. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/audit.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/metrics.h"
#include "daemon/metrics_http.h"
#include "daemon/regions.h"

/* ---- the snapshot ------------------------------------------------------------ */

void tsr_metrics_snapshot_free(tsr_metrics_snapshot_t *s) {
  if (!s) return;
  free(s->text);
  free(s->runs);
  memset(s, 0, sizeof(*s));
}

static bool tsr__visible(const tsr_metrics_run_t *run, tsr_metrics_audience_t a) {
  if (!run->lease || a.scope == TSR_METRICS_SCOPE_ALL) return true;
  return a.scope == TSR_METRICS_SCOPE_OWN && run->owner == a.uid;
}

char *tsr_metrics_snapshot_filter(const tsr_metrics_snapshot_t *s, tsr_metrics_audience_t a, size_t *out_len) {
  /* at most the whole text: one allocation, one pass (a run past the text
   * is cut at its end, one that goes back is empty) */
  char *out = malloc(s->len + 1);
  if (!out) return NULL;
  size_t o = 0, start = 0;
  for (size_t i = 0; i < s->run_count; i++) {
    size_t end = s->runs[i].end <= s->len ? s->runs[i].end : s->len;
    if (end <= start) continue;
    if (tsr__visible(&s->runs[i], a)) {
      memcpy(out + o, s->text + start, end - start);
      o += end - start;
    }
    start = end;
  }
  out[o] = '\0';
  *out_len = o;
  return out;
}

/* ---- the exposition text ----------------------------------------------------- */

typedef struct {
  char *buf;
  size_t len, cap;
  tsr_metrics_run_t *runs;
  size_t run_count, run_cap;
  bool lease; /* the lines added now belong to a lease of `owner` */
  uint32_t owner;
  bool failed;
} tsr__text_t;

/* Extends the last run over what was just added, or starts a run when the
 * audience of the lines changed. */
static void tsr__tag(tsr__text_t *t) {
  if (t->run_count > 0) {
    tsr_metrics_run_t *last = &t->runs[t->run_count - 1];
    if (last->lease == t->lease && (!t->lease || last->owner == t->owner)) {
      last->end = t->len;
      return;
    }
  }
  if (t->run_count == t->run_cap) {
    size_t cap = t->run_cap ? t->run_cap * 2 : 64;
    tsr_metrics_run_t *nr = realloc(t->runs, cap * sizeof(*nr));
    if (!nr) {
      t->failed = true;
      return;
    }
    t->runs = nr;
    t->run_cap = cap;
  }
  t->runs[t->run_count++] = (tsr_metrics_run_t){.end = t->len, .lease = t->lease, .owner = t->lease ? t->owner : 0};
}

/* Adds whole lines (the format ends with a newline) for the current audience. */
static void tsr__add(tsr__text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tsr__add(tsr__text_t *t, const char *fmt, ...) {
  if (t->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = true;
      return;
    }
    if ((size_t)n < t->cap - t->len) {
      t->len += (size_t)n;
      tsr__tag(t);
      return;
    }
    size_t cap = (t->cap + (size_t)n + 1) * 2;
    char *nb = realloc(t->buf, cap);
    if (!nb) {
      t->failed = true;
      return;
    }
    t->buf = nb;
    t->cap = cap;
  }
}

/* The lines added next are node-wide (every audience's). */
static void tsr__everyone(tsr__text_t *t) { t->lease = false; }
/* The lines added next belong to a lease of `owner`. */
static void tsr__owned_by(tsr__text_t *t, uint32_t owner) {
  t->lease = true;
  t->owner = owner;
}
/* A label value as the exposition format wants it: \, " and newline escaped. */
static void tsr__label(char *out, size_t cap, const char *v) {
  size_t o = 0;
  for (; *v && o + 3 < cap; v++) {
    if (*v == '\\' || *v == '"') {
      out[o++] = '\\';
      out[o++] = *v;
    } else if (*v == '\n') {
      out[o++] = '\\';
      out[o++] = 'n';
    } else {
      out[o++] = *v;
    }
  }
  out[o] = '\0';
}

/* HELP and TYPE are node-wide: every audience gets every family's, also
 * when it sees none of its series (the format allows a family without
 * samples, and what families exist tells nothing). */
static void tsr__head(tsr__text_t *t, const char *name, const char *type, const char *help) {
  tsr__everyone(t);
  tsr__add(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

const double tsr_metrics_request_buckets[TSR_METRICS_BUCKETS] = {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
                                                                 1e-3, 2.5e-3, 5e-3, 1e-2, 0.1,    1.0};

void tsr_metrics_observe_request(tsr_daemon_counters_t *c, uint64_t ns) {
  double s = (double)ns * 1e-9;
  for (int i = 0; i < TSR_METRICS_BUCKETS; i++)
    if (s <= tsr_metrics_request_buckets[i]) c->request_bucket[i]++;
  c->request_sum_ns += ns;
}

bool tsr_daemon_metrics_snapshot(tsr_daemon_t *d, tsr_metrics_snapshot_t *out) {
  memset(out, 0, sizeof(*out));
  tsr__text_t t = {0};
  const tsr_lease_table_t *table = tsr_lease_service_table(d->leases);
  const tsr_daemon_counters_t *c = &d->counters;
  tsr__head(&t, "tessera_build_info", "gauge", "The daemon's version.");
  tsr__add(&t, "tessera_build_info{version=\"%s\"} 1\n", TESSERA_VERSION);

  tsr__head(&t, "tessera_device_memory_bytes", "gauge", "The device's memory.");
  for (size_t i = 0; i < d->config.device_count; i++) {
    char name[256];
    tsr__label(name, sizeof(name), d->config.devices[i].name);
    tsr__add(&t, "tessera_device_memory_bytes{device=\"%zu\",name=\"%s\"} %llu\n", i, name,
             (unsigned long long)d->config.devices[i].total_bytes);
  }
  size_t n = tsr_lease_table_count(table);
  uint64_t leased[TSR_CONFIG_MAX_DEVICES] = {0};
  for (size_t i = 0; i < n; i++) {
    const tsr_lease_t *l = tsr_lease_table_at(table, i);
    if (l->device < TSR_CONFIG_MAX_DEVICES) leased[l->device] += l->bytes;
  }
  tsr__head(&t, "tessera_device_leased_bytes", "gauge", "Memory of the device held by active leases.");
  for (size_t i = 0; i < d->config.device_count; i++)
    tsr__add(&t, "tessera_device_leased_bytes{device=\"%zu\"} %llu\n", i, (unsigned long long)leased[i]);

  tsr__head(&t, "tessera_leases", "gauge", "Leases by state (ended ones are counted by tessera_leases_ended_total).");
  tsr__add(&t, "tessera_leases{state=\"active\"} %zu\n", n);

  /* per lease: what it holds (the lease table's, the daemon's own word) and
   * what its processes report through its region. The region is written by
   * the tenant's own processes, so a hostile tenant can write any number
   * there: those series say source="reported", and used and peak come held
   * to the lease's memory (tsr_regions_stats clamps them to the table's
   * limit, never the region's own limit word). */
  static const struct {
    const char *name, *type, *help;
    bool reported;
  } per[] = {
      {"tessera_lease_memory_bytes", "gauge", "Memory the lease holds.", false},
      {"tessera_lease_used_bytes", "gauge",
       "Memory the lease's processes have allocated now, as they report it (source=\"reported\": "
       "a tenant can forge it; held to the lease's memory).",
       true},
      {"tessera_lease_peak_bytes", "gauge",
       "The most memory the lease's processes have held at once, as they report it "
       "(source=\"reported\": a tenant can forge it; held to the lease's memory).",
       true},
      {"tessera_lease_sm_share", "gauge", "The lease's share of the device's SMs (1: not limited).", false},
      {"tessera_lease_processes", "gauge",
       "Processes attached to the lease, as they report it (source=\"reported\": a tenant can forge it).", true},
      {"tessera_lease_deadline_seconds", "gauge", "When the lease ends, seconds since the epoch.", false},
      {"tessera_lease_allocation_denials_total", "counter",
       "Allocations refused to the lease's processes, as they report it (source=\"reported\": a tenant "
       "can forge it).",
       true},
      {"tessera_lease_throttled_seconds_total", "counter",
       "Time the lease's launches waited for their SM share, as they report it (source=\"reported\": a "
       "tenant can forge it).",
       true},
  };
  /* each region's counters read once a snapshot, not once a metric */
  tsr_region_stats_t *stats = n ? calloc(n, sizeof(*stats)) : NULL;
  if (n && !stats) {
    free(t.buf);
    free(t.runs);
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    tsr_regions_stats(d->regions, tsr_lease_table_at(table, i)->id, &stats[i]);
  }
  for (size_t k = 0; k < sizeof(per) / sizeof(per[0]); k++) {
    tsr__head(&t, per[k].name, per[k].type, per[k].help);
    for (size_t i = 0; i < n; i++) {
      const tsr_lease_t *l = tsr_lease_table_at(table, i);
      char user[TSR_LEASE_NAME_MAX * 2 + 2];
      tsr__label(user, sizeof(user), l->owner);
      const tsr_region_stats_t rs = stats[i];
      char labels[512];
      snprintf(labels, sizeof(labels), "device=\"%u\",lease=\"%llu\",%suser=\"%s\"", l->device,
               (unsigned long long)l->id, per[k].reported ? "source=\"reported\"," : "", user);
      tsr__owned_by(&t, l->owner_uid);
      switch (k) {
        case 0: tsr__add(&t, "%s{%s} %llu\n", per[k].name, labels, (unsigned long long)l->bytes); break;
        case 1: tsr__add(&t, "%s{%s} %llu\n", per[k].name, labels, (unsigned long long)rs.used_bytes); break;
        case 2: tsr__add(&t, "%s{%s} %llu\n", per[k].name, labels, (unsigned long long)rs.peak_bytes); break;
        case 3: tsr__add(&t, "%s{%s} %.6f\n", per[k].name, labels, l->sm_ppm ? l->sm_ppm / 1e6 : 1.0); break;
        case 4: tsr__add(&t, "%s{%s} %u\n", per[k].name, labels, rs.processes); break;
        case 5: tsr__add(&t, "%s{%s} %.3f\n", per[k].name, labels, (double)l->deadline_wall_ns / 1e9); break;
        case 6: tsr__add(&t, "%s{%s} %llu\n", per[k].name, labels, (unsigned long long)rs.denied); break;
        default: tsr__add(&t, "%s{%s} %.6f\n", per[k].name, labels, (double)rs.throttled_ns / 1e9); break;
      }
    }
  }

  free(stats);
  tsr__head(&t, "tessera_leases_created_total", "counter", "Leases granted since the daemon started.");
  tsr__add(&t, "tessera_leases_created_total %llu\n", (unsigned long long)c->created);
  tsr__head(&t, "tessera_leases_ended_total", "counter", "Leases ended since the daemon started, by how.");
  tsr__add(&t, "tessera_leases_ended_total{reason=\"released\"} %llu\n", (unsigned long long)c->released);
  tsr__add(&t, "tessera_leases_ended_total{reason=\"expired\"} %llu\n", (unsigned long long)d->expired);
  tsr__head(&t, "tessera_requests_refused_total", "counter",
            "Requests the daemon refused (the lease rules, permissions, bad requests).");
  tsr__add(&t, "tessera_requests_refused_total %llu\n", (unsigned long long)tsr_audit_denies(d->audit));
  tsr__head(&t, "tessera_processes_reaped_total", "counter",
            "Dead processes whose memory the daemon gave back to their lease.");
  tsr__add(&t, "tessera_processes_reaped_total %llu\n", (unsigned long long)c->reaped);
  tsr__head(&t, "tessera_backstop_actions_total", "counter",
            "Times the NVML backstop acted on processes over their lease or outside any.");
  tsr__add(&t, "tessera_backstop_actions_total %llu\n", (unsigned long long)c->backstop_actions);

  /* the creates waiting for capacity (daemon/waits.h) */
  const tsr_waits_t *ws = &d->waits;
  tsr__head(&t, "tessera_queue_length", "gauge", "Creates waiting for capacity on the device (lease create --wait).");
  for (size_t i = 0; i < d->config.device_count; i++)
    tsr__add(&t, "tessera_queue_length{device=\"%zu\"} %zu\n", i, tsr_lease_queue_count_on(ws->queue, (uint32_t)i));
  tsr__head(&t, "tessera_queue_requests_total", "counter",
            "Creates that waited for capacity, by outcome (refused: over max_queued_per_user, never queued).");
  tsr__add(&t, "tessera_queue_requests_total{outcome=\"granted\"} %llu\n", (unsigned long long)ws->granted);
  tsr__add(&t, "tessera_queue_requests_total{outcome=\"timed_out\"} %llu\n", (unsigned long long)ws->timed_out);
  tsr__add(&t, "tessera_queue_requests_total{outcome=\"withdrawn\"} %llu\n", (unsigned long long)ws->withdrawn);
  tsr__add(&t, "tessera_queue_requests_total{outcome=\"refused\"} %llu\n", (unsigned long long)ws->refused);
  tsr__head(&t, "tessera_queue_wait_seconds", "histogram",
            "How long each granted create waited for capacity, from its request to its grant.");
  for (int i = 0; i < TSR_WAIT_BUCKETS; i++)
    tsr__add(&t, "tessera_queue_wait_seconds_bucket{le=\"%g\"} %llu\n", tsr_wait_buckets[i],
             (unsigned long long)ws->wait_bucket[i]);
  tsr__add(&t, "tessera_queue_wait_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)ws->granted);
  tsr__add(&t, "tessera_queue_wait_seconds_sum %.9f\n", (double)ws->wait_sum_ns * 1e-9);
  tsr__add(&t, "tessera_queue_wait_seconds_count %llu\n", (unsigned long long)ws->granted);

  tsr__head(&t, "tessera_request_duration_seconds", "histogram", "Time to handle one request of the socket protocol.");
  for (int i = 0; i < TSR_METRICS_BUCKETS; i++)
    tsr__add(&t, "tessera_request_duration_seconds_bucket{le=\"%g\"} %llu\n", tsr_metrics_request_buckets[i],
             (unsigned long long)c->request_bucket[i]);
  tsr__add(&t, "tessera_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)d->requests);
  tsr__add(&t, "tessera_request_duration_seconds_sum %.9f\n", (double)c->request_sum_ns * 1e-9);
  tsr__add(&t, "tessera_request_duration_seconds_count %llu\n", (unsigned long long)d->requests);
  if (t.failed || !t.buf) {
    free(t.buf);
    free(t.runs);
    return false;
  }
  *out = (tsr_metrics_snapshot_t){.text = t.buf, .len = t.len, .runs = t.runs, .run_count = t.run_count};
  return true;
}

void tsr_daemon_metrics_publish(tsr_daemon_t *d, uint64_t now_mono_ns) {
  if (!d->metrics || now_mono_ns - d->metrics_published_ns < TSR_METRICS_PERIOD_NS) return;
  d->metrics_published_ns = now_mono_ns;
  tsr_metrics_snapshot_t s;
  if (tsr_daemon_metrics_snapshot(d, &s)) tsr_metrics_publish(d->metrics, &s);
}
