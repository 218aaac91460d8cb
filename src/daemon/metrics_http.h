/* daemon/metrics_http.h: GET /metrics over HTTP from a thread of its own
 * (metrics_http.c), serving the snapshot the event loop publishes. */
#ifndef TESSERA_DAEMON_METRICS_HTTP_H
#define TESSERA_DAEMON_METRICS_HTTP_H

#include "daemon/config.h"
#include "daemon/metrics.h"
#include "tessera/status.h"

/* Connections one client may hold at once: a local user (by uid) or a
 * remote address. One more is refused with 503. */
#define TSR_METRICS_PER_CLIENT 4
/* Connections in all. Past it, a new one is let in by closing the oldest
 * that is still sending its request (a scrape always gets in). */
#define TSR_METRICS_CONNECTIONS 64

typedef struct tsr_metrics_s tsr_metrics_t;
/* Serves GET /metrics on config->metrics from a thread of its own, which
 * runs libmicrohttpd's loop (docs/operations.md, "Metrics"): who asks is
 * found per connection, a connection must send its whole request within
 * config->metrics_request_timeout_ns of its accept, and the connection
 * limits above hold. */
TSR_MUST_USE tsr_status_t tsr_metrics_start(const tsr_config_t *config, tsr_metrics_t **out_metrics);
void tsr_metrics_stop(tsr_metrics_t *metrics);
/* Replaces the snapshot scrapes copy from with *snapshot (taken over; it is
 * left empty). */
void tsr_metrics_publish(tsr_metrics_t *metrics, tsr_metrics_snapshot_t *snapshot);

#endif
