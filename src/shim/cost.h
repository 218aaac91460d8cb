/* shim/cost.h: what a launch costs, learned per kernel and launch shape,
 * and which kernels are not charged at all (seed 002).
 *
 * A share is a fraction of the device's *time*, so a launch is charged the
 * GPU time it takes. The seed's grid x block ignores how long a kernel runs
 * and cannot hold a share across kernels of different lengths; here the
 * cost of a (function, grid, block, shared memory) is measured: CUDA events
 * around sampled launches of it (launch.c: these, and every launch that had
 * to wait for the bucket) report their durations, and the
 * estimate is the mean of the last TSR_COST_RING samples that are within
 * TSR_COST_TRIM_PCT (110%) of the fastest of them.
 *
 * Why trimmed: another tenant on the same device only ever lengthens a
 * measured duration (the GPU time-slices between processes, and a kernel
 * preempted in the middle is measured with the other's slice inside it),
 * so samples above the fastest are contention and are left out. Measured
 * on the H100 (bench/results/throttle-2026-11-28.md): a 2.7 ms PyTorch
 * fp32 matmul of a 30% lease beside a 70% lease was measured at about
 * twice its length in most samples (one whole slice of the other
 * context inside it) and clean in a few; 8 samples kept within 130% of
 * their fastest charged it 1.30 times its length, and the lease got 21%
 * of the device for its 28%. So the ring is long (32 samples: a clean one
 * is almost always among them) and the trim tight (110%: clean samples
 * of one kernel at one clock lie within 9% of each other there).
 * Why a mean and not the fastest: the same kernel runs at different
 * clocks (a power-bound GEMM runs ~15% faster on a GPU that is idle half
 * the time than on a busy one), and the fastest would charge every run
 * the best clock's duration. The window follows a kernel that genuinely
 * becomes slower within RING samples.
 *
 * Until a shape's first sample completes, its launches are charged a prior
 * (TSR_COST_PRIOR_NS, or for a graph the sum of its kernel nodes); when the
 * first measurement arrives the difference for every launch charged the
 * prior is settled: an overcharge is given back at once (returned, for the
 * lease's bucket), a debt is owed by the entry and paid by its next
 * launches, each paying at most its own cost again, so that no launch
 * waits for a lump. The debt follows the estimate until the ring is full:
 * a first sample taken behind other streams' kernels (several times the
 * kernel) would otherwise leave a debt the kernel never ran up. So a wrong
 * prior costs a short error, never a lasting one.
 *
 * Classes by name (cuFuncGetName, once per entry): NCCL kernels are not
 * charged (a throttled collective stalls every rank of a job); kernels
 * named like memory copies and sets are charged half (the seed's reduced
 * cost for memory operations).
 *
 * Thread safety: lookups and charges are lock-free (atomics on the entry);
 * creating an entry and learning take the table's mutex (the slow path).
 * No CUDA here: the shim passes a namer, tests pass a fake one. */
#ifndef TESSERA_SHIM_COST_H
#define TESSERA_SHIM_COST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define TSR_COST_ENTRIES 4096 /* kernels x shapes, and graphs, per process */
#ifndef TSR_COST_RING         /* (a -D may change these for a benchmark's variant build) */
#define TSR_COST_RING 32      /* samples the estimate is made of */
#endif
#define TSR_COST_EVERY 32                     /* after RING samples, one launch in this many */
#define TSR_COST_PRIOR_NS UINT64_C(100000)    /* 100 us: charged before a first sample */
#define TSR_COST_MIN_NS UINT64_C(1000)        /* no launch costs less (event resolution) */
#define TSR_COST_MAX_NS UINT64_C(10000000000) /* 10 s: a sample beyond is not believed */
#ifndef TSR_COST_TRIM_PCT
#define TSR_COST_TRIM_PCT 110 /* samples above 110% of the fastest are contention */
#endif

typedef enum tsr_kclass_e {
  TSR_KCLASS_DEFAULT = 1,
  TSR_KCLASS_NCCL = 2,   /* not charged */
  TSR_KCLASS_MEMORY = 3, /* charged half */
} tsr_kclass_t;

/* The class of a kernel by its (possibly mangled) name; NULL or "" is
 * DEFAULT. */
tsr_kclass_t tsr_shim_kclass(const char *name);

/* The fields a launch reads and writes fill the first cache line. */
typedef struct tsr_cost_entry_s {
  _Alignas(64) _Atomic uint64_t fn; /* the CUfunction (or a tagged graph exec); 0: free */
  _Atomic uint64_t shape;           /* tsr_cost_shape(); 0 for a graph */
  _Atomic uint32_t ready;           /* the epoch the entry was made in, +1; 0: being made */
  _Atomic uint32_t kclass;
  _Atomic uint64_t est_ns; /* 0 until a first sample */
  _Atomic uint64_t prior_ns;
  _Atomic uint64_t launches;       /* charged, all told */
  _Atomic uint64_t prior_launches; /* charged the prior, before the first sample */
  _Atomic uint64_t owed_ns;        /* what its next launches still pay for those */
  _Atomic uint64_t paid_ns;        /* what they paid so far */
  /* under the table's mutex */
  uint64_t ring[TSR_COST_RING];
  uint32_t nring, next;
  uint64_t debtors; /* launches charged the prior that owe: their debt follows the estimate */
} tsr_cost_entry_t;

/* A name for `fn` (NULL if none), for classing. */
typedef const char *(*tsr_cost_namer_fn)(void *ctx, uint64_t fn);

typedef struct tsr_cost_table_s {
  pthread_mutex_t mu;
  _Atomic uint32_t epoch; /* bumped when modules are unloaded: handles may be reused */
  _Atomic uint32_t count;
  tsr_cost_entry_t e[TSR_COST_ENTRIES];
} tsr_cost_table_t;

void tsr_cost_init(tsr_cost_table_t *t);

/* The shape of a launch: blocks, threads per block and dynamic shared
 * memory, packed; never 0. */
uint64_t tsr_cost_shape(uint64_t blocks, uint32_t threads, uint32_t shmem);

/* The entry of (fn, shape), made if new (classed through `namer`, prior
 * `prior_ns`, 0 for TSR_COST_PRIOR_NS). NULL when the table is full: the
 * caller charges TSR_COST_PRIOR_NS unlearned. */
tsr_cost_entry_t *tsr_cost_get(tsr_cost_table_t *t, uint64_t fn, uint64_t shape, tsr_cost_namer_fn namer, void *ctx,
                               uint64_t prior_ns);

/* Counts a launch of `e` and returns what to charge it (0 for NCCL), in
 * GPU ns. *out_sample: whether this launch should be measured. */
uint64_t tsr_cost_charge(tsr_cost_entry_t *e, bool *out_sample);

/* The estimate without counting a launch (a graph's node, the prior of a
 * graph). */
uint64_t tsr_cost_peek(const tsr_cost_entry_t *e);

/* A measured duration of one launch of `e`. The launches charged the prior
 * are settled: at the first sample an overcharge is returned (< 0, GPU ns)
 * for the caller to give back; a debt is owed by the entry (tsr_cost_charge
 * adds it to later launches) and follows the estimate until RING samples.
 * Else 0. */
int64_t tsr_cost_learn(tsr_cost_table_t *t, tsr_cost_entry_t *e, uint64_t measured_ns);

/* A graph was updated: a new prior, and what was learned is forgotten. */
void tsr_cost_reset(tsr_cost_table_t *t, tsr_cost_entry_t *e, uint64_t prior_ns);

/* Modules were unloaded: every entry is made afresh at its next use. */
void tsr_cost_forget_all(tsr_cost_table_t *t);

#endif
