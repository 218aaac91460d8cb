/* daemon/top.h: the `top` request (top.c): a node's leases, their
 * processes and what they use, as the asking user may see them. */
#ifndef TESSERA_DAEMON_TOP_H
#define TESSERA_DAEMON_TOP_H

#include "base/json.h"
#include "daemon/daemon.h"
#include "daemon/identity.h"

#define TSR_TOP_PROCS_MAX 4096                     /* GPU processes one device's part of a reply lists */
#define TSR_TOP_SNAPSHOT_AGE_NS (500 * 1000000ull) /* an older /proc snapshot is taken anew */

/* Writes the members of a `top` reply into the open reply object: "ok" and
 * "top", every device with its active leases (region counters, processes,
 * NVML's per-process SM utilisation over the last second) and the GPU
 * processes of no lease (docs/top.md). Any local user may ask: an admin
 * sees every lease and process, an ordinary user (`who`) her own, and of
 * the others only how many there are and what they hold ("others"). Takes
 * a /proc snapshot when the last is older than TSR_TOP_SNAPSHOT_AGE_NS. */
void tsr_daemon_top(tsr_daemon_t *d, const tsr_identity_t *who, tsr_json_writer_t *w);

#endif
