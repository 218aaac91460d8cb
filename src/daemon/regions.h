/* daemon/regions.h: the shared region of every active lease (regions.c):
 * made or adopted at a lease's start, ended with it, read and repaired on
 * the daemon's side, reaped of dead processes, and the compute shares'
 * switching reserve. */
#ifndef TESSERA_DAEMON_REGIONS_H
#define TESSERA_DAEMON_REGIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "device/device.h"
#include "lease/lease.h"
#include "region/region.h"
#include "tessera/status.h"

typedef struct tsr_regions_s tsr_regions_t;

/* Opens (creating, mode 0711) the region directory; refuses one that
 * tsr_fs_check_private_dir refuses. */
TSR_MUST_USE tsr_status_t tsr_regions_open(const char *dir, tsr_regions_t **out_regions);
void tsr_regions_close(tsr_regions_t *regions);
/* What new regions get besides their lease: one stream's share of the
 * lease's SM share (ppm, 0 = all of it) and the bucket's burst (ns). */
void tsr_regions_set_compute(tsr_regions_t *regions, uint32_t stream_ppm, uint64_t burst_ns);
const char *tsr_regions_dir(const tsr_regions_t *regions);
/* The region directory, open (O_DIRECTORY), for the files kept beside the
 * regions. */
int tsr_regions_dir_fd(const tsr_regions_t *regions);

/* Told when a region is found to say what its lease does not (`damage`:
 * TSR_REGION_DAMAGE_* bits), once per kind of damage and region; `repaired`:
 * the daemon's words are back in place. */
typedef void (*tsr_regions_damage_fn)(void *ctx, uint64_t lease, uint32_t damage, bool repaired);
void tsr_regions_on_damage(tsr_regions_t *regions, tsr_regions_damage_fn fn, void *ctx);

/* The region of active lease `lease` on device `device`: an intact one left
 * by an earlier daemon is adopted with its counters, else one is made. */
TSR_MUST_USE tsr_status_t tsr_regions_add(tsr_regions_t *regions, const tsr_lease_t *lease, const tsr_device_t *device);
/* Lease `lease`'s region says its deadline, limit and share as they are now
 * (a renew, a resize): the daemon's words are written again in place; the
 * tenants' mappings and counters stay, and their next charge, view and
 * launch see the new words. Counters up to the largest limit the lease has
 * had are not tampering (a shrink leaves them above the new one). */
TSR_MUST_USE tsr_status_t tsr_regions_update(tsr_regions_t *regions, const tsr_lease_t *lease);
/* Whether lease `id` has a region. */
bool tsr_regions_has(const tsr_regions_t *regions, uint64_t id);
/* Gives lease `id`'s region state `state` (every charge fails from now on
 * unless it is active) and keeps it so. */
void tsr_regions_set_state(tsr_regions_t *regions, uint64_t id, tsr_region_state_t state);
/* Marks lease `id`'s region ended and removes its file. */
void tsr_regions_end(tsr_regions_t *regions, uint64_t id, tsr_region_state_t state);
/* Whether lease `id`'s region is ended while the lease is active (the
 * daemon's word, not the file's). Nothing in this daemon revokes a live
 * lease's region; a region an earlier tesserad's backstop revoked (before
 * over_limit, it applied the expiry action) is adopted as it is, and stays
 * so. */
bool tsr_regions_revoked(const tsr_regions_t *regions, uint64_t id);
/* Whether lease `id`'s region was ever found saying what its lease does not:
 * its tenants wrote what no shim writes, and nothing it says is trusted. */
bool tsr_regions_tampered(const tsr_regions_t *regions, uint64_t id);
/* A copy of lease `id`'s region as it is now, compared with what it must
 * say; the daemon's words are put back in place if a tenant changed them.
 * False when the lease has no region or it cannot be read. */
bool tsr_regions_read(tsr_regions_t *regions, uint64_t id, tsr_region_copy_t *out_copy);
/* What lease `id`'s processes report through its region, for people:
 * used and peak clamped to the lease's limit (what dead processes' slots
 * still hold left out), and the limit, state and shares the daemon's own.
 * False when it has no region. */
bool tsr_regions_stats(tsr_regions_t *regions, uint64_t id, tsr_region_stats_t *out_stats);
/* Removes region files of leases that are not active (after start-up). */
void tsr_regions_sweep(tsr_regions_t *regions);
/* Marks the slots of exited processes in every region (the reaper, once an
 * enforcement tick), through the liveness resolver `alive` (NULL: the region
 * library's default check); a tenant of the lease gives back what they held
 * (tsr_region_reclaim). Returns the slots marked; *out_bytes gets what they
 * hold. */
uint32_t tsr_regions_reap_with(tsr_regions_t *regions, tsr_region_alive_fn alive, void *ctx, uint64_t *out_bytes);
/* Whether lease `id` on `device` ran kernels since the last tick, as the
 * driver says: 1 yes, 0 no, -1 it cannot tell. */
typedef int (*tsr_regions_running_fn)(void *ctx, uint64_t id, uint32_t device);
/* The switching reserve, once per enforcement tick: a lease with an SM
 * share "runs" when `running` says so (NULL, or it cannot tell: when its
 * launch counters moved since the last tick). While two or more run on one
 * device and their shares add up to more than all of it less
 * `switch_cost_ppm` (the device time the GPU loses switching between their
 * contexts), each gets share x (1e6 - cost) / sum in force; otherwise its
 * own share. Returns how many leases are scaled down. */
uint32_t tsr_regions_share_tick(tsr_regions_t *regions, uint32_t switch_cost_ppm, tsr_regions_running_fn running,
                                void *ctx);

#endif
