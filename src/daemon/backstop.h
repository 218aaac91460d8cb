/* daemon/backstop.h: the NVML backstop (backstop.c): NVML's per-process
 * memory, attributed to leases and checked against their limits; the same
 * attribution and NVML's SM samples for `top` and the switching reserve.
 *
 * The backstop sees the daemon only through its context
 * (tsr_backstop_ctx_t): the leases, their regions and roots, the actions,
 * the audit log, one counter and four settings. */
#ifndef TESSERA_DAEMON_BACKSTOP_H
#define TESSERA_DAEMON_BACKSTOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/actions.h"
#include "daemon/audit.h"
#include "daemon/procs.h"
#include "daemon/regions.h"
#include "daemon/roots.h"
#include "device/device.h"
#include "lease/lease.h"
#include "tessera/status.h"

typedef struct tsr_backstop_s tsr_backstop_t;

/* What the backstop reads and calls, and nothing more. The daemon builds it
 * where it opens the backstop (main.c) from its own state, which outlives
 * the backstop; the backstop keeps a copy. The settings are copied: the
 * configuration does not change while the daemon runs. */
typedef struct tsr_backstop_ctx_s {
  const tsr_device_t *devices; /* the daemon's devices, found in NVML at open */
  size_t device_count;
  const tsr_lease_service_t *leases; /* the active leases: device, owner, limit, over_limit */
  tsr_regions_t *regions;            /* rule (a): the slots of each lease's region */
  const tsr_roots_t *roots;          /* rule (b): processes registered for a lease */
  tsr_actions_t *actions;            /* SIGTERM now, SIGKILL after the grace */
  tsr_audit_t *audit;                /* one "backstop" line per act */
  uint64_t *acts;                    /* counts every act (/metrics' tessera_backstop_actions_total) */
  const char *admin_group;           /* with uid 0 and the daemon's: never signalled */
  tsr_lease_over_limit_t over_limit; /* the node's over_limit: a lease that names none follows it */
  uint64_t expiry_grace_ns;          /* SIGTERM to SIGKILL, as the log line says */
  bool policy_deny;                  /* policy = deny: act on unleased processes of ordinary users */
} tsr_backstop_ctx_t;

/* Loads NVML (`library`, NULL: libnvidia-ml.so.1) and finds each of the
 * context's devices in it by UUID (by index when it has none). A device NVML
 * does not know, or a library without nvmlDeviceGetComputeRunningProcesses_v3,
 * is logged once and not watched. */
TSR_MUST_USE tsr_status_t tsr_backstop_open(const char *library, const tsr_backstop_ctx_t *ctx,
                                            tsr_backstop_t **out_backstop);
void tsr_backstop_close(tsr_backstop_t *backstop);
/* One round: reads every watched device's processes, attributes each to a
 * lease, and acts on leases over their limit and (policy deny) on unleased
 * processes of ordinary users. `procs` is this tick's snapshot. */
void tsr_backstop_run(tsr_backstop_t *backstop, const tsr_procs_t *procs, uint64_t now_mono_ns);

/* What the backstop does when lease `l`'s processes are over it: its own
 * over_limit, or `node`'s (the configuration's). Never DEFAULT when `node`
 * is not. */
tsr_lease_over_limit_t tsr_backstop_over_limit_of(const tsr_lease_t *l, tsr_lease_over_limit_t node);

/* A tsr_regions_running_fn (ctx: the backstop, may be NULL): whether lease
 * `lease`'s processes ran kernels lately, by NVML's per-process SM samples
 * of the last round; -1 where the backstop cannot tell. */
int tsr_backstop_running(void *backstop, uint64_t lease, uint32_t device);
/* What NVML said lease `lease`'s processes use, in the last round. False
 * when the backstop did not see it (not watched, NVML failed). */
bool tsr_backstop_lease_used(tsr_backstop_t *backstop, uint64_t lease, uint64_t *out_bytes);

/* Whether the backstop watches device `device` (NVML knows it and answers). */
bool tsr_backstop_watches(const tsr_backstop_t *backstop, uint32_t device);

/* One GPU process as NVML lists it, attributed as a backstop round does. */
typedef struct tsr_backstop_proc_s {
  int32_t pid;         /* host pid */
  uint64_t used_bytes; /* NVML's used memory; 0 when it does not say */
  uint64_t lease;      /* the lease of the device it belongs to; 0: none */
} tsr_backstop_proc_t;

/* Device `device`'s compute processes from NVML, each attributed to a lease
 * by the backstop's rules (slot, root, the user's own lease) from snapshot
 * `procs`; acts on nothing. At most `cap` into `out`; returns how many, or
 * -1 when the device is not watched or NVML failed. */
long tsr_backstop_attribute(tsr_backstop_t *backstop, const tsr_procs_t *procs, uint32_t device,
                            tsr_backstop_proc_t *out, size_t cap);

/* NVML's SM utilisation per process on device `device` over the samples
 * after `since_us` (us since the epoch; tsr_device_nvml_process_sm). False
 * when it is unknown: not watched, or NVML cannot or did not tell. */
bool tsr_backstop_sm_util(tsr_backstop_t *backstop, uint32_t device, uint64_t since_us, tsr_device_proc_util_t *out,
                          size_t cap, size_t *out_count);

#endif
