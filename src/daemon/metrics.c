/* metrics.c: the Prometheus endpoint. libmicrohttpd serves GET /metrics
 * from its own thread; the event loop writes the exposition text into a
 * snapshot (tsr_daemon_metrics_publish, a few times a second at most) and
 * the HTTP thread only copies the latest snapshot under a mutex: a scrape
 * never waits for the lease service, and the lease service never waits for
 * a scrape longer than a memcpy. */
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"

struct tsr_metrics_s {
  struct MHD_Daemon *mhd;
  pthread_mutex_t mu;
  char *text; /* the latest snapshot (NUL-terminated) */
  size_t len;
};

static enum MHD_Result tsr__reply(struct MHD_Connection *conn, unsigned status, const char *type, char *body,
                                  size_t len) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  enum MHD_Result ret = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result tsr__answer(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                   const char *version, const char *upload, size_t *upload_size, void **state) {
  (void)version, (void)upload, (void)state;
  tsr_metrics_t *m = cls;
  if (*upload_size) {
    *upload_size = 0; /* a body is not read */
    return MHD_YES;
  }
  const char *plain = "text/plain; charset=utf-8";
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
    return tsr__reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, plain, strdup("GET /metrics\n"), 13);
  if (strcmp(url, "/metrics") != 0)
    return tsr__reply(conn, MHD_HTTP_NOT_FOUND, plain, strdup("not found: the metrics are at /metrics\n"), 39);
  pthread_mutex_lock(&m->mu);
  size_t len = m->len;
  char *copy = malloc(len ? len : 1);
  if (copy && len) memcpy(copy, m->text, len);
  pthread_mutex_unlock(&m->mu);
  if (!copy) return MHD_NO;
  return tsr__reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", copy, len);
}

tsr_status_t tsr_metrics_start(const char *listen, tsr_metrics_t **out) {
  *out = NULL;
  struct sockaddr_storage addr;
  socklen_t alen = 0;
  TSR_RETURN_IF_ERROR(tsr_config_parse_listen(listen, &addr, &alen));
  tsr_metrics_t *m = calloc(1, sizeof(*m));
  if (!m) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  pthread_mutex_init(&m->mu, NULL);
  m->text = strdup("");
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL_INTERNAL_THREAD;
  if (addr.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  /* the HTTP thread must never take the signals the event loop reads */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  m->mhd = MHD_start_daemon(flags, 0, NULL, NULL, tsr__answer, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)16, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)10, MHD_OPTION_END);
  int err = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (!m->mhd) {
    free(m->text);
    pthread_mutex_destroy(&m->mu);
    free(m);
    return tsr_status_make(TSR_UNAVAILABLE, "metrics: cannot listen on %s: %s", listen,
                           err ? strerror(err) : "libmicrohttpd refused");
  }
  *out = m;
  return NULL;
}

void tsr_metrics_stop(tsr_metrics_t *m) {
  if (!m) return;
  MHD_stop_daemon(m->mhd);
  free(m->text);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

void tsr_metrics_publish(tsr_metrics_t *m, char *text, size_t len) {
  pthread_mutex_lock(&m->mu);
  char *old = m->text;
  m->text = text;
  m->len = len;
  pthread_mutex_unlock(&m->mu);
  free(old);
}

/* ---- the exposition text ----------------------------------------------------- */

typedef struct {
  char *buf;
  size_t len, cap;
  bool failed;
} tsr__text_t;

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

static void tsr__head(tsr__text_t *t, const char *name, const char *type, const char *help) {
  tsr__add(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

const double tsr_metrics_request_buckets[TSR_METRICS_BUCKETS] = {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
                                                                 1e-3, 2.5e-3, 5e-3, 1e-2, 0.1,  1.0};

void tsr_metrics_observe_request(tsr_daemon_counters_t *c, uint64_t ns) {
  double s = (double)ns * 1e-9;
  for (int i = 0; i < TSR_METRICS_BUCKETS; i++)
    if (s <= tsr_metrics_request_buckets[i]) c->request_bucket[i]++;
  c->request_sum_ns += ns;
}

char *tsr_daemon_metrics_text(tsr_daemon_t *d, size_t *out_len) {
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

  /* per lease: what it holds and what its processes use (its region) */
  static const struct {
    const char *name, *type, *help;
  } per[] = {
      {"tessera_lease_memory_bytes", "gauge", "Memory the lease holds."},
      {"tessera_lease_used_bytes", "gauge", "Memory the lease's processes have allocated now."},
      {"tessera_lease_peak_bytes", "gauge", "The most memory the lease's processes have held at once."},
      {"tessera_lease_sm_share", "gauge", "The lease's share of the device's SMs (1: not limited)."},
      {"tessera_lease_processes", "gauge", "Processes attached to the lease."},
      {"tessera_lease_deadline_seconds", "gauge", "When the lease ends, seconds since the epoch."},
      {"tessera_lease_allocation_denials_total", "counter", "Allocations refused to the lease's processes."},
      {"tessera_lease_throttled_seconds_total", "counter", "Time the lease's launches waited for their SM share."},
  };
  /* each region's counters read once a snapshot, not once a metric */
  tsr_region_stats_t *stats = n ? calloc(n, sizeof(*stats)) : NULL;
  if (n && !stats) {
    free(t.buf);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    tsr_region_t *r = tsr_regions_find(d->regions, tsr_lease_table_at(table, i)->id);
    if (r) tsr_region_stats(r, &stats[i]);
  }
  for (size_t k = 0; k < sizeof(per) / sizeof(per[0]); k++) {
    tsr__head(&t, per[k].name, per[k].type, per[k].help);
    for (size_t i = 0; i < n; i++) {
      const tsr_lease_t *l = tsr_lease_table_at(table, i);
      char user[TSR_LEASE_NAME_MAX * 2 + 2];
      tsr__label(user, sizeof(user), l->owner);
      const tsr_region_stats_t rs = stats[i];
      char labels[512];
      snprintf(labels, sizeof(labels), "device=\"%u\",lease=\"%llu\",user=\"%s\"", l->device,
               (unsigned long long)l->id, user);
      switch (k) {
        case 0: tsr__add(&t, "%s{%s} %llu\n", per[k].name, labels, (unsigned long long)l->bytes); break;
        case 1: tsr__add(&t, "%s{%s} %llu\n", per[k].name, labels, (unsigned long long)rs.used_bytes); break;
        case 2: tsr__add(&t, "%s{%s} %llu\n", per[k].name, labels, (unsigned long long)rs.peak_bytes); break;
        case 3: tsr__add(&t, "%s{%s} %.6f\n", per[k].name, labels, l->sm_ppm ? l->sm_ppm / 1e6 : 1.0); break;
        case 4: tsr__add(&t, "%s{%s} %u\n", per[k].name, labels, rs.processes); break;
        case 5:
          tsr__add(&t, "%s{%s} %.3f\n", per[k].name, labels, (double)l->deadline_wall_ns / 1e9);
          break;
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

  tsr__head(&t, "tessera_request_duration_seconds", "histogram", "Time to handle one request of the socket protocol.");
  for (int i = 0; i < TSR_METRICS_BUCKETS; i++)
    tsr__add(&t, "tessera_request_duration_seconds_bucket{le=\"%g\"} %llu\n", tsr_metrics_request_buckets[i],
             (unsigned long long)c->request_bucket[i]);
  tsr__add(&t, "tessera_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)d->requests);
  tsr__add(&t, "tessera_request_duration_seconds_sum %.9f\n", (double)c->request_sum_ns * 1e-9);
  tsr__add(&t, "tessera_request_duration_seconds_count %llu\n", (unsigned long long)d->requests);
  if (t.failed) {
    free(t.buf);
    return NULL;
  }
  *out_len = t.len;
  return t.buf;
}

void tsr_daemon_metrics_publish(tsr_daemon_t *d, uint64_t now_mono_ns) {
  if (!d->metrics || now_mono_ns - d->metrics_published_ns < TSR_METRICS_PERIOD_NS) return;
  d->metrics_published_ns = now_mono_ns;
  size_t len = 0;
  char *text = tsr_daemon_metrics_text(d, &len);
  if (text) tsr_metrics_publish(d->metrics, text, len);
}
