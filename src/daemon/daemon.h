/* daemon/daemon.h: tesserad's state, and a map of its parts.
 *
 *   main.c      options, configuration, devices, start-up and shutdown
 *   config.c    the configuration file and its defaults
 *   server.c    the event loop: its epoll set, the expiry, tick and enforcement timers, signals
 *   clients.c   the client connections: accepting, reading requests, queuing replies, per-user limits
 *   handlers.c  one function per protocol op
 *   lifecycle.c what a create and a release add (region, audit, signals, history): the lease service's hooks
 *   identity.c  who is on the other end of a connection (SO_PEERCRED)
 *   audit.c     the audit log, one JSON line per event
 *   regions.c   the shared region of every active lease
 *   userindex.c the per-user lease index beside the regions (the shim's node-wide mode)
 *   procs.c     one /proc snapshot per enforcement tick (pids, namespaces, the tree)
 *   roots.c     processes registered for a lease (lease.attach, `tessera run`)
 *   actions.c   SIGTERM, then SIGKILL after the grace, without touching a reused pid
 *   backstop.c  NVML's per-process memory, attributed to leases, checked
 *   top.c       the `top` request: a node's leases, their processes and use
 *   enforce.c   the enforcement tick, and what ends a lease's processes
 *   metrics.c   the Prometheus exposition, written by the event loop
 *   metrics_http.c, metrics_peer.c  /metrics served over HTTP, and who may see what
 *
 * Each foo.c declares what it offers in foo.h, which includes only what its
 * declarations need. The parts below the daemon (config, identity, audit,
 * regions, userindex, procs, roots, actions, backstop, the metrics HTTP side)
 * know nothing of it: each takes what it works on, and the backstop reads
 * the daemon through a context of its own (tsr_backstop_ctx_t). The parts
 * that act on the whole daemon (handlers, lifecycle, enforce, top, metrics,
 * server) take the tsr_daemon_t below, which is all this header holds.
 *
 * Everything runs on one thread, the event loop's; nothing here locks,
 * except /metrics: its HTTP server has a thread of its own (metrics_http.c)
 * that shares only the published snapshot, under a mutex. */
#ifndef TESSERA_DAEMON_DAEMON_H
#define TESSERA_DAEMON_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/actions.h"
#include "daemon/audit.h"
#include "daemon/backstop.h"
#include "daemon/config.h"
#include "daemon/metrics.h"
#include "daemon/metrics_http.h"
#include "daemon/procs.h"
#include "daemon/regions.h"
#include "daemon/roots.h"
#include "daemon/waits.h"
#include "lease/lease.h"

#define TSR_HISTORY_MAX 1024 /* ended leases kept for `lease show` */

/* The daemon's state: made by main.c, then the event loop's alone. */
typedef struct tsr_daemon_s {
  tsr_config_t config;
  tsr_lease_service_t *leases;
  tsr_audit_t *audit;
  tsr_regions_t *regions;
  tsr_procs_t procs;                    /* the last /proc snapshot */
  tsr_roots_t roots;                    /* lease.attach */
  tsr_actions_t *actions;               /* signals in their grace period */
  tsr_backstop_t *backstop;             /* NULL: no backstop (off, or no NVML) */
  uint64_t backstop_next_ns;            /* monotonic: when the backstop runs next */
  tsr_lease_t history[TSR_HISTORY_MAX]; /* ring of ended leases */
  size_t history_next, history_count;
  uint64_t requests, expired; /* requests handled, leases expired */
  uint64_t started_wall_ns;   /* when this daemon started: earlier deadlines fell due while none ran */
  tsr_daemon_counters_t counters;
  tsr_waits_t waits;             /* creates waiting for capacity */
  tsr_metrics_t *metrics;        /* NULL: no /metrics */
  uint64_t metrics_published_ns; /* monotonic */
} tsr_daemon_t;

#endif
