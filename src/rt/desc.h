/* rt/desc.h: the task descriptor in the ring, as the host writes it and
 * the device (or the CPU backend's lane threads) reads it. Shared with
 * kernel.cu: plain C, fixed sizes, no pointers but as integers.
 *
 * A lane's ring is `slots` descriptors of 128 bytes in pinned host memory,
 * and beside it `slots` layouts of 384 bytes, read only for a task that is
 * not contiguous. Slot s of a lane holds the lane's task number n (1, 2,
 * ...) with s = (n - 1) mod slots. The host writes the descriptor (its
 * `seq` word is n, for checks), then `posted[lane] = n` with release
 * order; the consumer of the lane reads `posted[lane]` with acquire order,
 * so one read tells it how many descriptors are whole, and reads a
 * descriptor only once it is (never a line the host is writing). After
 * running tasks it publishes `done[lane]`. `posted` and `done` have a cache
 * line a lane (TSR_RT_DONE_STRIDE words), in two arrays: one the host
 * writes, one the consumer writes.
 *
 * The top bit of `posted[lane]` (TSR_RT_POSTED_PARK) is the host's request
 * that the running kernel end once idle (tsr_rt_park): it rides in the
 * word each block polls anyway. A separate word that every block read
 * made each block's publish take about 240 us instead of 1 on the H200
 * (2026-11-28, bench/results/rt-front-2026-11-28.md). The next post to the
 * lane, or the next launch, clears it. */
#ifndef TESSERA_RT_DESC_H
#define TESSERA_RT_DESC_H

#include <stdint.h>

#include "tessera/rt.h"

#define TSR_RT_WAITS 4         /* waits on other lanes one descriptor carries */
#define TSR_RT_DESC_OPERANDS 5 /* out and up to 4 inputs */
#define TSR_RT_DESC_JIT 1024u  /* op codes from here: JIT operators' physical slots */
#define TSR_RT_DONE_STRIDE 8   /* u64 words between lanes' done counters: one line each */

/* in posted[lane]: end once idle (tsr_rt_park, above) */
#define TSR_RT_POSTED_PARK (UINT64_C(1) << 63)

/* flags */
#define TSR_RT_DESC_CONTIG 0x01u /* every operand contiguous, out's shape: no layout */
#define TSR_RT_DESC_REDUCE 0x02u /* SUM or MEAN: numel outputs of rnumel inputs each */
#define TSR_RT_DESC_REG \
  0x04u /* a builtin elementwise operator, f32 throughout, contiguous,
                                  * 16-byte aligned, numel a multiple of 4 and at most
                                  * TSR_RT_REG_VEC float4 a thread: thread t handles float4
                                  * t, t + threads, ... and keeps out's in registers */
#define TSR_RT_DESC_FOLLOW \
  0x08u                   /* REG after a REG task of the same lane and numel, no waits,
                                  * and since the lane's last barrier every range touched is
                                  * the same as or disjoint from every range written: each
                                  * byte stays with one thread, so no barrier before it; an
                                  * input that is the last task's out comes from registers */
#define TSR_RT_REG_VEC 4u /* float4 a thread a REG task holds at most */
#define TSR_RT_DESC_GROUP \
  0x10u /* rnumel items of a contiguous elementwise task: item k's
                                  * operand r is at ptr[r] + offset k * nin+1 + r of the
                                  * slot's layout read as int32 elements (tsr_rt_group_t) */
#define TSR_RT_DESC_GROUP_VEC \
  0x20u                          /* GROUP, f32 throughout, every item's operands 16-byte
                                     * aligned, numel a multiple of 4: float4 loops */
#define TSR_RT_GROUP_OFFSETS 96u /* int32 offsets a layout slot holds */
#define TSR_RT_DESC_SWITCH \
  0x40u                        /* no task: counted done, then this generation of the
                                  * kernel ends in this lane (the next starts after it) */
#define TSR_RT_DESC_STOP 0x80u /* no task: the lane's consumer stops */

typedef struct tsr_rt_desc_s {
  uint64_t seq; /* the lane's task number (posted[lane] publishes it) */
  uint16_t op;  /* tsr_rt_op_t, or TSR_RT_DESC_JIT + a JIT operator's physical slot */
  uint8_t flags;
  uint8_t ndim;
  uint8_t dtype[TSR_RT_DESC_OPERANDS]; /* out, in0 .. in3 (tsr_rt_dtype_t) */
  uint8_t nwait;                       /* wait_lane/wait_seq entries in use */
  uint8_t nin;                         /* inputs */
  uint8_t imm;                         /* bit k: input k is a number, its float's bits in ptr[1 + k] */
  uint32_t reduce_mask;
  uint64_t numel;                     /* elements of out */
  uint64_t rnumel;                    /* reductions: inputs summed into each output; GROUP: items */
  uint64_t ptr[TSR_RT_DESC_OPERANDS]; /* out, in0 .. in3 (0: absent) */
  float scalar[2];
  uint32_t wait_lane[TSR_RT_WAITS]; /* before running: done[wait_lane[k]] has reached wait_seq[k] */
  uint32_t wait_seq[TSR_RT_WAITS];  /* its low 32 bits (compared modulo 2^32: tsr_rt_reached) */
  uint64_t ticket;                  /* the global ticket, for errors */
} tsr_rt_desc_t;

/* Sizes and strides in elements, over out's dims (elementwise: strides of
 * out, in0 .. in3; reductions: in0's dims, out's strides 0 on reduced dims). */
typedef struct tsr_rt_layout_s {
  int64_t sizes[TSR_RT_MAX_DIMS];
  int64_t strides[TSR_RT_DESC_OPERANDS][TSR_RT_MAX_DIMS];
} tsr_rt_layout_t;

/* Whether a lane's done count has reached the task number whose low 32
 * bits are `seq32` (a lane never has 2^31 tasks outstanding). */
#ifdef __CUDACC__
__host__ __device__
#endif
    static inline int
    tsr_rt_reached(uint64_t done, uint32_t seq32) {
  return (int32_t)((uint32_t)done - seq32) >= 0;
}

#ifndef __cplusplus
_Static_assert(sizeof(tsr_rt_desc_t) == 128, "a descriptor is 128 bytes");
_Static_assert(sizeof(tsr_rt_layout_t) == 384, "a layout is 384 bytes");
_Static_assert(TSR_RT_GROUP_OFFSETS * 4 == sizeof(tsr_rt_layout_t), "a group's offsets fill a layout");
#endif
#define TSR_RT_DESC_BYTES 128

#endif
