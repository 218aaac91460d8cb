/* rt/desc.h: the task descriptor in the ring, as the host writes it and
 * the device (or the CPU backend's lane threads) reads it. Shared with
 * kernel.cu: plain C, fixed sizes, no pointers but as integers.
 *
 * A lane's ring is `slots` descriptors of 128 bytes in pinned host memory,
 * and beside it `slots` layouts of 256 bytes, read only for a task that is
 * not contiguous. Slot s of a lane holds the lane's task number n (1, 2,
 * ...) with s = (n - 1) mod slots; its `seq` word is written last, with
 * release order, and is n when the descriptor is whole. The consumer of the
 * lane reads `seq` with acquire order, runs the task, then publishes
 * `done[lane] = n`. */
#ifndef TESSERA_RT_DESC_H
#define TESSERA_RT_DESC_H

#include <stdint.h>

#include "tessera/rt.h"

#define TSR_RT_WAITS 4 /* waits on other lanes one descriptor carries */
#define TSR_RT_DONE_STRIDE 8 /* u64 words between lanes' done counters: one line each */

/* flags */
#define TSR_RT_DESC_CONTIG 0x01u /* every operand contiguous, out's shape: no layout */
#define TSR_RT_DESC_REDUCE 0x02u /* SUM or MEAN: numel outputs of rnumel inputs each */
#define TSR_RT_DESC_STOP 0x80u   /* no task: the lane's consumer stops */

typedef struct tsr_rt_desc_s {
  uint64_t seq;         /* the lane's task number; written last */
  uint16_t op;          /* tsr_rt_op_t */
  uint8_t flags;
  uint8_t ndim;
  uint8_t dtype[3];     /* out, in0, in1 (tsr_rt_dtype_t) */
  uint8_t nwait;        /* wait_lane/wait_seq entries in use */
  uint32_t reduce_mask;
  uint64_t numel;       /* elements of out */
  uint64_t rnumel;      /* reductions: inputs summed into each output */
  uint64_t ptr[3];      /* out, in0, in1 (0: absent) */
  float scalar[2];
  uint32_t wait_lane[TSR_RT_WAITS]; /* before running: done[wait_lane[k]] >= wait_seq[k] */
  uint64_t wait_seq[TSR_RT_WAITS];
  uint64_t ticket;      /* the global ticket, for errors */
} tsr_rt_desc_t;

/* Sizes and strides in elements, over out's dims (elementwise: strides of
 * out, in0, in1; reductions: in0's dims, out's strides 0 on reduced dims). */
typedef struct tsr_rt_layout_s {
  int64_t sizes[TSR_RT_MAX_DIMS];
  int64_t strides[3][TSR_RT_MAX_DIMS];
} tsr_rt_layout_t;

#ifndef __cplusplus
_Static_assert(sizeof(tsr_rt_desc_t) <= 128, "a descriptor fits 128 bytes");
_Static_assert(sizeof(tsr_rt_layout_t) == 256, "a layout is 256 bytes");
#endif
#define TSR_RT_DESC_BYTES 128

#endif
