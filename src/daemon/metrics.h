/* daemon/metrics.h: the Prometheus exposition (metrics.c). The event loop
 * counts (tsr_daemon_counters_t) and writes a snapshot of every series, each
 * run of lines tagged with the audience that may see it; the HTTP side
 * (metrics_http.h) serves each scrape the lines its audience may see
 * (tsr_metrics_snapshot_filter), never touching the daemon's state. */
#ifndef TESSERA_DAEMON_METRICS_H
#define TESSERA_DAEMON_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TSR_METRICS_BUCKETS 12                   /* request latency histogram */
#define TSR_METRICS_PERIOD_NS (250 * 1000000ull) /* the snapshot is rewritten at most this often */
extern const double tsr_metrics_request_buckets[TSR_METRICS_BUCKETS];

/* What the daemon counts for /metrics besides tsr_daemon_t's requests and
 * expired (the event loop's thread only). */
typedef struct tsr_daemon_counters_s {
  uint64_t created, released; /* leases */
  uint64_t reaped;            /* dead processes' memory given back */
  uint64_t backstop_actions;
  uint64_t request_bucket[TSR_METRICS_BUCKETS], request_sum_ns; /* their count is requests */
} tsr_daemon_counters_t;

/* One exposition, cut into runs of whole lines: node-wide lines (every
 * audience sees them, HELP and TYPE included) or the series of leases of
 * one owner. The event loop builds it; scrapes copy what their audience may
 * see, so the HTTP side never touches the lease table. */
typedef struct tsr_metrics_run_s {
  size_t end;     /* the run is text[end of the run before, end) */
  bool lease;     /* a lease's series: its owner's and the full audience's */
  uint32_t owner; /* with lease: the lease's owner uid */
} tsr_metrics_run_t;

typedef struct tsr_metrics_snapshot_s {
  char *text; /* NUL-terminated */
  size_t len;
  tsr_metrics_run_t *runs; /* in order, the last ends at len */
  size_t run_count;
} tsr_metrics_snapshot_t;

void tsr_metrics_snapshot_free(tsr_metrics_snapshot_t *snapshot);

typedef enum tsr_metrics_scope_e {
  TSR_METRICS_SCOPE_COUNTS = 0, /* the node-wide series only */
  TSR_METRICS_SCOPE_OWN,        /* the node-wide series and those of uid's own leases */
  TSR_METRICS_SCOPE_ALL,        /* every series, every lease with its owner */
} tsr_metrics_scope_t;

typedef struct tsr_metrics_audience_s {
  tsr_metrics_scope_t scope;
  uint32_t uid; /* with TSR_METRICS_SCOPE_OWN */
} tsr_metrics_audience_t;

/* The lines of `snapshot` that `audience` may see, in order (malloc'd,
 * NUL-terminated; *out_len without the NUL), or NULL out of memory. */
char *tsr_metrics_snapshot_filter(const tsr_metrics_snapshot_t *snapshot, tsr_metrics_audience_t audience,
                                  size_t *out_len);

/* Adds one request that took `ns` to the latency buckets and sum (tsr_daemon_handle counts it in requests). */
void tsr_metrics_observe_request(tsr_daemon_counters_t *counters, uint64_t ns);

/* The exposition of the daemon's state now, tagged for the audiences (the
 * event loop's thread). False out of memory. */
struct tsr_daemon_s;
bool tsr_daemon_metrics_snapshot(struct tsr_daemon_s *d, tsr_metrics_snapshot_t *out_snapshot);
/* Rewrites /metrics' snapshot if TSR_METRICS_PERIOD_NS passed since the last. */
void tsr_daemon_metrics_publish(struct tsr_daemon_s *d, uint64_t now_mono_ns);

#endif
