/* region/layout.h: the bytes of a region file, version 1.
 *
 * Fixed offsets, native byte order (the file never leaves the node), every
 * hot word on its own 64-byte cache line so that processes charging the
 * lease do not slow each other down through false sharing. The same table
 * is in docs/enforcement.md; the _Static_asserts below keep the two honest.
 *
 *   offset  size  what
 *   0       64    header (magic ... owner_uid), the daemon's (written again in
 *                 place by a renew or a resize)
 *   64      64    reserved, used: the hot counters
 *   128     64    peak, denied
 *   192     64    compute settings (SM share, stream share, burst, the share
 *                 in force now), daemon
 *   256     64    the lease's token bucket (one word of virtual time)
 *   320     64    compute counters (GPU time charged, time throttled, launches)
 *   384     16    device PCI bus id ("0000:01:00.0"), NUL-terminated, or zeros
 *   400     48    the OpenCL device name it answers to, NUL-terminated, or zeros
 *   448     64    device UUID, NUL-terminated
 *   512     64*S  slots, one per process (S = TSR_REGION_SLOTS)
 *   512+64S 8*S   heartbeats, one per slot, apart from the slots so that a
 *                 heartbeat does not dirty the line a charge reads
 *   the file is rounded up to whole 4 KiB pages */
#ifndef TESSERA_REGION_LAYOUT_H
#define TESSERA_REGION_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "region/atomic.h"
#include "region/region.h"

#define TSR_REGION_MAGIC UINT64_C(0x314e474552525354) /* "TSRREGN1" in memory */
#define TSR_REGION_LINE 64
#define TSR_REGION_PAGE 4096

/* pid values of a slot besides a real pid */
#define TSR_SLOT_FREE 0u
#define TSR_SLOT_BUSY UINT32_MAX /* being claimed or reaped */

typedef struct {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes; /* offset of the slots: 512 */
  uint64_t generation;
  uint64_t lease_id;
  uint32_t device;
  uint32_t slot_count;
  uint64_t limit_bytes;
  uint64_t deadline_wall_ns;
  tsr_atomic_u32 state; /* tsr_region_state_t */
  uint32_t owner_uid;
} tsr__region_header_t;

typedef struct {
  tsr_atomic_u32 pid;         /* TSR_SLOT_FREE, TSR_SLOT_BUSY, or the holder's pid */
  tsr_atomic_u32 dead_pid;    /* the daemon's mark: the holder (pid, start time) is gone */
  tsr_atomic_u64 start_ticks; /* the holder's start time (/proc/PID/stat field 22) */
  tsr_atomic_u64 used;        /* bytes the holder was admitted and has not freed */
  tsr_atomic_u64 charges;     /* admitted charges, for statistics */
  tsr_atomic_u64 pidns;       /* inode of the holder's PID namespace (0: unknown) */
  tsr_atomic_u64 dead_ticks;  /* the daemon's mark, with dead_pid (0: none) */
  uint8_t pad[TSR_REGION_LINE - 48];
} tsr__region_slot_t;

typedef struct {
  tsr__region_header_t header;
  uint8_t pad0[TSR_REGION_LINE - sizeof(tsr__region_header_t)];
  tsr_atomic_u64 reserved; /* offset 64 */
  tsr_atomic_u64 used;     /* offset 72 */
  uint8_t pad1[TSR_REGION_LINE - 16];
  tsr_atomic_u64 peak;   /* offset 128 */
  tsr_atomic_u64 denied; /* offset 136 */
  uint8_t pad2[TSR_REGION_LINE - 16];
  /* offset 192: compute settings, written by the daemon (the share again
   * when the lease is resized); 0 = default */
  tsr_atomic_u32 sm_ppm; /* the lease's SM share; 0: not limited */
  uint32_t stream_ppm;   /* one stream's share of the lease's; 0: all of it */
  uint64_t burst_ns;     /* idle time that earns credit (region/bucket.h) */
  /* offset 208: the share in force now, written by the daemon whenever it
   * changes: sm_ppm, or less while other leases run on the device (the
   * switching reserve, docs/enforcement.md); 0 or more than sm_ppm: sm_ppm */
  tsr_atomic_u32 sm_now_ppm;
  uint8_t pad3[TSR_REGION_LINE - 20];
  tsr_atomic_u64 tat; /* offset 256: the lease's bucket */
  uint8_t pad4[TSR_REGION_LINE - 8];
  tsr_atomic_u64 gpu_ns;       /* offset 320: GPU time charged by launches */
  tsr_atomic_u64 throttled_ns; /* time launch calls waited for the bucket */
  tsr_atomic_u64 launches;     /* launches charged */
  tsr_atomic_u64 bypassed;     /* launches let through uncharged (NCCL) */
  uint8_t pad5[TSR_REGION_LINE - 32];
  /* offset 384: how an OpenCL device finds this lease (libtessera-opencl.so);
   * zeros in a region written before there was one: no OpenCL device matches */
  char device_pci[16];                        /* offset 384 */
  char device_opencl[48];                     /* offset 400 */
  char device_uuid[TSR_REGION_LINE];          /* offset 448 */
  tsr__region_slot_t slots[TSR_REGION_SLOTS]; /* offset 512 */
  tsr_atomic_u64 heartbeat[TSR_REGION_SLOTS]; /* offset 512 + 64 S */
} tsr__region_file_t;

_Static_assert(sizeof(tsr__region_header_t) == 64, "header is one line");
_Static_assert(offsetof(tsr__region_file_t, reserved) == 64, "layout: reserved");
_Static_assert(offsetof(tsr__region_file_t, used) == 72, "layout: used");
_Static_assert(offsetof(tsr__region_file_t, peak) == 128, "layout: peak");
_Static_assert(offsetof(tsr__region_file_t, sm_ppm) == 192, "layout: compute settings");
_Static_assert(offsetof(tsr__region_file_t, sm_now_ppm) == 208, "layout: share in force");
_Static_assert(offsetof(tsr__region_file_t, tat) == 256, "layout: bucket");
_Static_assert(offsetof(tsr__region_file_t, gpu_ns) == 320, "layout: compute counters");
_Static_assert(offsetof(tsr__region_file_t, device_pci) == 384, "layout: pci");
_Static_assert(offsetof(tsr__region_file_t, device_opencl) == 400, "layout: opencl name");
_Static_assert(offsetof(tsr__region_file_t, device_uuid) == 448, "layout: uuid");
_Static_assert(offsetof(tsr__region_file_t, slots) == 512, "layout: slots");
_Static_assert(sizeof(tsr__region_slot_t) == TSR_REGION_LINE, "a slot is one line");
_Static_assert(offsetof(tsr__region_slot_t, dead_pid) == 4, "layout: slot mark pid");
_Static_assert(offsetof(tsr__region_slot_t, dead_ticks) == 40, "layout: slot mark time");
_Static_assert(offsetof(tsr__region_header_t, state) == 56, "layout: state");
_Static_assert(offsetof(tsr__region_header_t, limit_bytes) == 40, "layout: limit");
_Static_assert(offsetof(tsr__region_file_t, heartbeat) == 512 + 64 * TSR_REGION_SLOTS, "layout: heartbeats");

#define TSR_REGION_FILE_BYTES ((sizeof(tsr__region_file_t) + TSR_REGION_PAGE - 1) / TSR_REGION_PAGE * TSR_REGION_PAGE)

#endif
