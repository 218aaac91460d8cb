/* cost.c: the cost model of launches and the classes of kernels (see
 * shim/cost.h). */
#include "shim/cost.h"

#include <ctype.h>
#include <string.h>

/* tsr_cost_learn keeps the fastest sample whatever the rest, so its mean is
 * of one sample at least */
_Static_assert(TSR_COST_TRIM_PCT >= 100, "TSR_COST_TRIM_PCT below 100 would keep not even the fastest sample");

static bool tsr__contains(const char *s, const char *word, bool fold) {
  size_t n = strlen(word);
  for (; *s; s++) {
    size_t i = 0;
    while (i < n && s[i] && (fold ? tolower((unsigned char)s[i]) == word[i] : s[i] == word[i])) i++;
    if (i == n) return true;
  }
  return false;
}

tsr_kclass_t tsr_shim_kclass(const char *name) {
  if (!name || !*name) return TSR_KCLASS_DEFAULT;
  /* NCCL's kernels: ncclDevKernel_<coll>_<op>_<type>_<algo>_<proto> since
   * 2.19, ncclKernel_... before; mangled they keep the word (_Z..ncclDevKernel..) */
  if (tsr__contains(name, "ncclDevKernel", false) || tsr__contains(name, "ncclKernel", false)) return TSR_KCLASS_NCCL;
  if (tsr__contains(name, "memcpy", true) || tsr__contains(name, "memset", true)) return TSR_KCLASS_MEMORY;
  return TSR_KCLASS_DEFAULT;
}

void tsr_cost_init(tsr_cost_table_t *t) {
  memset(t, 0, sizeof(*t));
  pthread_mutex_init(&t->mu, NULL);
}

uint64_t tsr_cost_shape(uint64_t blocks, uint32_t threads, uint32_t shmem) {
  if (blocks == 0) blocks = 1;
  if (blocks > UINT32_MAX) blocks = UINT32_MAX;
  if (threads > 0x7ff) threads = 0x7ff;
  if (shmem > 0xfffff) shmem = 0xfffff;
  return blocks | (uint64_t)threads << 32 | (uint64_t)shmem << 43;
}

static uint32_t tsr__hash(uint64_t fn, uint64_t shape) {
  uint64_t h = (fn ^ (shape * UINT64_C(0x9e3779b97f4a7c15))) * UINT64_C(0xff51afd7ed558ccd);
  h ^= h >> 33;
  return (uint32_t)(h % TSR_COST_ENTRIES);
}

static void tsr__fill(tsr_cost_entry_t *e, uint64_t fn, tsr_cost_namer_fn namer, void *ctx, uint64_t prior_ns,
                      uint32_t epoch) {
  atomic_store_explicit(&e->kclass, (uint32_t)tsr_shim_kclass(namer ? namer(ctx, fn) : NULL), memory_order_relaxed);
  atomic_store_explicit(&e->est_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&e->prior_ns, prior_ns ? prior_ns : TSR_COST_PRIOR_NS, memory_order_relaxed);
  atomic_store_explicit(&e->launches, 0, memory_order_relaxed);
  atomic_store_explicit(&e->prior_launches, 0, memory_order_relaxed);
  atomic_store_explicit(&e->owed_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&e->paid_ns, 0, memory_order_relaxed);
  e->nring = e->next = 0;
  e->debtors = 0;
  atomic_store_explicit(&e->ready, epoch + 1, memory_order_release);
}

tsr_cost_entry_t *tsr_cost_get(tsr_cost_table_t *t, uint64_t fn, uint64_t shape, tsr_cost_namer_fn namer, void *ctx,
                               uint64_t prior_ns) {
  uint32_t epoch = atomic_load_explicit(&t->epoch, memory_order_acquire);
  uint32_t h = tsr__hash(fn, shape);
  /* lock-free: probe until the key or a free entry */
  for (uint32_t i = 0; i < TSR_COST_ENTRIES; i++) {
    tsr_cost_entry_t *e = &t->e[(h + i) % TSR_COST_ENTRIES];
    uint32_t ready = atomic_load_explicit(&e->ready, memory_order_acquire);
    if (!ready) break; /* free, or being made: the slow path decides */
    if (atomic_load_explicit(&e->fn, memory_order_relaxed) == fn &&
        atomic_load_explicit(&e->shape, memory_order_relaxed) == shape) {
      if (ready == epoch + 1) return e;
      break; /* made before an unload: made afresh below */
    }
  }
  pthread_mutex_lock(&t->mu);
  tsr_cost_entry_t *found = NULL;
  for (uint32_t i = 0; i < TSR_COST_ENTRIES; i++) {
    tsr_cost_entry_t *e = &t->e[(h + i) % TSR_COST_ENTRIES];
    uint32_t ready = atomic_load_explicit(&e->ready, memory_order_acquire);
    if (ready && atomic_load_explicit(&e->fn, memory_order_relaxed) == fn &&
        atomic_load_explicit(&e->shape, memory_order_relaxed) == shape) {
      if (ready != epoch + 1) tsr__fill(e, fn, namer, ctx, prior_ns, epoch);
      found = e;
      break;
    }
    if (!ready) {
      if (atomic_load_explicit(&t->count, memory_order_relaxed) >= TSR_COST_ENTRIES * 7 / 8) break;
      atomic_store_explicit(&e->fn, fn, memory_order_relaxed);
      atomic_store_explicit(&e->shape, shape, memory_order_relaxed);
      atomic_fetch_add_explicit(&t->count, 1, memory_order_relaxed);
      tsr__fill(e, fn, namer, ctx, prior_ns, epoch);
      found = e;
      break;
    }
  }
  pthread_mutex_unlock(&t->mu);
  return found;
}

uint64_t tsr_cost_peek(const tsr_cost_entry_t *e) {
  uint32_t k = atomic_load_explicit(&e->kclass, memory_order_relaxed);
  if (k == TSR_KCLASS_NCCL) return 0;
  uint64_t c = atomic_load_explicit(&e->est_ns, memory_order_relaxed);
  if (!c) c = atomic_load_explicit(&e->prior_ns, memory_order_relaxed);
  if (k == TSR_KCLASS_MEMORY) c /= 2;
  return c < TSR_COST_MIN_NS ? TSR_COST_MIN_NS : c;
}

uint64_t tsr_cost_charge(tsr_cost_entry_t *e, bool *out_sample) {
  *out_sample = false;
  if (atomic_load_explicit(&e->kclass, memory_order_relaxed) == TSR_KCLASS_NCCL) return 0;
  uint64_t n = atomic_fetch_add_explicit(&e->launches, 1, memory_order_relaxed);
  if (!atomic_load_explicit(&e->est_ns, memory_order_acquire))
    atomic_fetch_add_explicit(&e->prior_launches, 1, memory_order_relaxed);
  *out_sample = n < TSR_COST_RING || n % TSR_COST_EVERY == 0;
  uint64_t c = tsr_cost_peek(e);
  /* a debt of launches charged too little is paid at most one cost a launch */
  uint64_t owed = atomic_load_explicit(&e->owed_ns, memory_order_relaxed);
  while (owed) {
    uint64_t pay = owed < c ? owed : c;
    if (atomic_compare_exchange_weak_explicit(&e->owed_ns, &owed, owed - pay, memory_order_relaxed,
                                              memory_order_relaxed)) {
      atomic_fetch_add_explicit(&e->paid_ns, pay, memory_order_relaxed);
      return c + pay;
    }
  }
  return c;
}

int64_t tsr_cost_learn(tsr_cost_table_t *t, tsr_cost_entry_t *e, uint64_t measured) {
  if (measured > TSR_COST_MAX_NS) return 0;
  if (measured < TSR_COST_MIN_NS) measured = TSR_COST_MIN_NS;
  pthread_mutex_lock(&t->mu);
  e->ring[e->next] = measured;
  e->next = (e->next + 1) % TSR_COST_RING;
  if (e->nring < TSR_COST_RING) e->nring++;
  uint64_t fastest = UINT64_MAX, sum = 0, kept = 0;
  for (uint32_t i = 0; i < e->nring; i++)
    if (e->ring[i] < fastest) fastest = e->ring[i];
  for (uint32_t i = 0; i < e->nring; i++)
    if (e->ring[i] * 100 <= fastest * TSR_COST_TRIM_PCT) { /* <= 1e10 x TRIM_PCT */
      sum += e->ring[i];                                   /* <= RING x 10 s: no overflow */
      kept++;
    }
  uint64_t est = kept ? sum / kept : fastest; /* kept >= 1: the fastest is kept (TRIM_PCT >= 100) */
  uint64_t old = atomic_exchange_explicit(&e->est_ns, est, memory_order_acq_rel);
  uint64_t prior = atomic_load_explicit(&e->prior_ns, memory_order_relaxed);
  uint32_t k = atomic_load_explicit(&e->kclass, memory_order_relaxed);
  uint64_t a = k == TSR_KCLASS_MEMORY ? est / 2 : est, b = k == TSR_KCLASS_MEMORY ? prior / 2 : prior;
  if (a < TSR_COST_MIN_NS) a = TSR_COST_MIN_NS;
  if (b < TSR_COST_MIN_NS) b = TSR_COST_MIN_NS;
  int64_t settle = 0;
  if (!old) {
    /* the launches charged the prior pay (or get back) the difference */
    uint64_t n = atomic_exchange_explicit(&e->prior_launches, 0, memory_order_relaxed);
    if (n > 1000000) n = 1000000; /* a bound, so that no product can overflow */
    if (a < b)
      settle = -(int64_t)((b - a) * n);
    else
      e->debtors = n;
  }
  if (e->debtors) {
    /* what they owe at the estimate as it stands, less what was paid */
    uint64_t target = a > b ? (a - b) * e->debtors : 0; /* <= 1e10 x 1e6 */
    uint64_t paid = atomic_load_explicit(&e->paid_ns, memory_order_relaxed);
    atomic_store_explicit(&e->owed_ns, target > paid ? target - paid : 0, memory_order_relaxed);
    if (e->nring == TSR_COST_RING) e->debtors = 0; /* settled for good */
  }
  pthread_mutex_unlock(&t->mu);
  return settle;
}

void tsr_cost_reset(tsr_cost_table_t *t, tsr_cost_entry_t *e, uint64_t prior_ns) {
  pthread_mutex_lock(&t->mu);
  atomic_store_explicit(&e->prior_ns, prior_ns ? prior_ns : TSR_COST_PRIOR_NS, memory_order_relaxed);
  atomic_store_explicit(&e->prior_launches, 0, memory_order_relaxed);
  atomic_store_explicit(&e->owed_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&e->paid_ns, 0, memory_order_relaxed);
  e->debtors = 0;
  atomic_store_explicit(&e->launches, 0, memory_order_relaxed);
  atomic_store_explicit(&e->est_ns, 0, memory_order_release);
  e->nring = e->next = 0;
  pthread_mutex_unlock(&t->mu);
}

void tsr_cost_forget_all(tsr_cost_table_t *t) { atomic_fetch_add_explicit(&t->epoch, 1, memory_order_acq_rel); }
