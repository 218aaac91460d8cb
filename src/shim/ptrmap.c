/* ptrmap.c: which allocation charged how much, per process, lock-free.
 *
 * An open-addressing table of (key, value) with linear probing. Keys
 * are device pointers or allocation handles (never 0). Insert claims an
 * empty or deleted cell with a CAS on the key; remove takes the entry with
 * a CAS from the key to TOMBSTONE, so two frees of one pointer racing credit
 * it once. Probes are bounded by the table's size: a full table refuses the
 * insert (the allocation is then refused as out of memory, never lost). */
#include "shim/ptrmap.h"

#include <stdlib.h>
#include <sys/mman.h>

#define TSR__EMPTY UINT64_C(0)
#define TSR__TOMBSTONE UINT64_MAX

static inline uint64_t tsr__hash(uint64_t k) {
  k ^= k >> 33;
  k *= UINT64_C(0xff51afd7ed558ccd);
  k ^= k >> 33;
  return k;
}

bool tsr_shim_ptrmap_init(tsr_shim_ptrmap_t *m, size_t cells) {
  size_t n = 1;
  while (n < cells) n <<= 1;
  void *p = mmap(NULL, n * sizeof(tsr_shim_ptrmap_cell_t), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  m->cells = p;
  m->mask = n - 1;
  return true;
}

void tsr_shim_ptrmap_free(tsr_shim_ptrmap_t *m) {
  if (m->cells) munmap(m->cells, (m->mask + 1) * sizeof(tsr_shim_ptrmap_cell_t));
  m->cells = NULL;
}

#define TSR__BUSY (UINT64_MAX - 1) /* a cell being filled in */

bool tsr_shim_ptrmap_put(tsr_shim_ptrmap_t *m, uint64_t key, const tsr_shim_ptrmap_val_t *val) {
  if (key == TSR__EMPTY || key >= TSR__BUSY) return false;
  size_t i = tsr__hash(key) & m->mask;
  for (size_t n = 0; n <= m->mask; n++, i = (i + 1) & m->mask) {
    tsr_shim_ptrmap_cell_t *c = &m->cells[i];
    uint64_t k = atomic_load_explicit(&c->key, memory_order_acquire);
    if (k != TSR__EMPTY && k != TSR__TOMBSTONE) continue;
    /* claim the cell: the value is written before the key is published with
     * a second store, so a reader that finds the key finds the value */
    if (!atomic_compare_exchange_strong_explicit(&c->key, &k, TSR__BUSY, memory_order_acq_rel, memory_order_relaxed))
      continue;
    atomic_store_explicit(&c->bytes, val->bytes, memory_order_relaxed);
    atomic_store_explicit(&c->tag, val->tag, memory_order_relaxed);
    atomic_store_explicit(&c->ctx, val->ctx, memory_order_relaxed);
    atomic_store_explicit(&c->pool, val->pool, memory_order_relaxed);
    atomic_store_explicit(&c->key, key, memory_order_release);
    return true;
  }
  return false;
}

/* The value of cell `c`, whose key was read with acquire. */
static tsr_shim_ptrmap_val_t tsr__read(tsr_shim_ptrmap_cell_t *c) {
  tsr_shim_ptrmap_val_t v;
  v.bytes = atomic_load_explicit(&c->bytes, memory_order_relaxed);
  v.tag = atomic_load_explicit(&c->tag, memory_order_relaxed);
  v.ctx = atomic_load_explicit(&c->ctx, memory_order_relaxed);
  v.pool = atomic_load_explicit(&c->pool, memory_order_relaxed);
  return v;
}

bool tsr_shim_ptrmap_take(tsr_shim_ptrmap_t *m, uint64_t key, tsr_shim_ptrmap_val_t *out_val) {
  if (key == TSR__EMPTY || key >= TSR__BUSY) return false;
  size_t i = tsr__hash(key) & m->mask;
  for (size_t n = 0; n <= m->mask; n++, i = (i + 1) & m->mask) {
    tsr_shim_ptrmap_cell_t *c = &m->cells[i];
    uint64_t k = atomic_load_explicit(&c->key, memory_order_acquire);
    if (k == TSR__EMPTY) return false; /* never inserted past here */
    if (k != key) continue;
    tsr_shim_ptrmap_val_t v = tsr__read(c);
    if (!atomic_compare_exchange_strong_explicit(&c->key, &k, TSR__TOMBSTONE, memory_order_acq_rel,
                                                 memory_order_relaxed))
      return false; /* a racing free took it */
    if (out_val) *out_val = v;
    return true;
  }
  return false;
}

size_t tsr_shim_ptrmap_take_ctx(tsr_shim_ptrmap_t *m, uint32_t ctx,
                                void (*visit)(void *arg, uint64_t key, const tsr_shim_ptrmap_val_t *val), void *arg) {
  size_t taken = 0;
  if (ctx == 0 || !m->cells) return 0;
  for (size_t i = 0; i <= m->mask; i++) {
    tsr_shim_ptrmap_cell_t *c = &m->cells[i];
    uint64_t k = atomic_load_explicit(&c->key, memory_order_acquire);
    if (k == TSR__EMPTY || k >= TSR__BUSY) continue;
    tsr_shim_ptrmap_val_t v = tsr__read(c);
    if (v.ctx != ctx) continue;
    /* the same key taken and put again between the read and the CAS could
     * only be a free of this context's pointer racing its end (and the
     * pointer handed out again): the program's own race */
    if (!atomic_compare_exchange_strong_explicit(&c->key, &k, TSR__TOMBSTONE, memory_order_acq_rel,
                                                 memory_order_relaxed))
      continue; /* a racing free took it */
    taken++;
    if (visit) visit(arg, k, &v);
  }
  return taken;
}
