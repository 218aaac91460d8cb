/* region/atomic.h: the named atomic operations the shared region uses.
 *
 * Every access to a word of a region goes through one of these, so that the
 * memory order of each is visible at the call site and reviewed once (as in
 * mimalloc's atomic.h). The words live in a file mapped MAP_SHARED by
 * several processes: C11 atomics on lock-free 32- and 64-bit types are
 * address-free, so they work across processes (checked at compile time
 * below). Private to src/region and the code that maps regions (the shim). */
#ifndef TESSERA_REGION_ATOMIC_H
#define TESSERA_REGION_ATOMIC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free to be shared between processes");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "32-bit atomics must be lock-free to be shared between processes");

typedef _Atomic uint64_t tsr_atomic_u64;
typedef _Atomic uint32_t tsr_atomic_u32;

static inline uint64_t tsr_atomic_load_relaxed(tsr_atomic_u64 *p) {
  return atomic_load_explicit(p, memory_order_relaxed);
}
static inline uint64_t tsr_atomic_load_acquire(tsr_atomic_u64 *p) {
  return atomic_load_explicit(p, memory_order_acquire);
}
static inline void tsr_atomic_store_relaxed(tsr_atomic_u64 *p, uint64_t v) {
  atomic_store_explicit(p, v, memory_order_relaxed);
}
static inline void tsr_atomic_store_release(tsr_atomic_u64 *p, uint64_t v) {
  atomic_store_explicit(p, v, memory_order_release);
}
static inline uint64_t tsr_atomic_add_acq_rel(tsr_atomic_u64 *p, uint64_t v) {
  return atomic_fetch_add_explicit(p, v, memory_order_acq_rel);
}
static inline uint64_t tsr_atomic_sub_acq_rel(tsr_atomic_u64 *p, uint64_t v) {
  return atomic_fetch_sub_explicit(p, v, memory_order_acq_rel);
}
static inline uint64_t tsr_atomic_add_relaxed(tsr_atomic_u64 *p, uint64_t v) {
  return atomic_fetch_add_explicit(p, v, memory_order_relaxed);
}
static inline uint64_t tsr_atomic_sub_relaxed(tsr_atomic_u64 *p, uint64_t v) {
  return atomic_fetch_sub_explicit(p, v, memory_order_relaxed);
}
/* One attempt (may fail spuriously); *expected gets the current value. */
static inline bool tsr_atomic_cas_weak_relaxed(tsr_atomic_u64 *p, uint64_t *expected, uint64_t v) {
  return atomic_compare_exchange_weak_explicit(p, expected, v, memory_order_relaxed, memory_order_relaxed);
}
static inline bool tsr_atomic_cas_strong_acq_rel(tsr_atomic_u64 *p, uint64_t *expected, uint64_t v) {
  return atomic_compare_exchange_strong_explicit(p, expected, v, memory_order_acq_rel, memory_order_acquire);
}

static inline uint32_t tsr_atomic_load32_acquire(tsr_atomic_u32 *p) {
  return atomic_load_explicit(p, memory_order_acquire);
}
static inline uint32_t tsr_atomic_load32_relaxed(tsr_atomic_u32 *p) {
  return atomic_load_explicit(p, memory_order_relaxed);
}
static inline void tsr_atomic_store32_relaxed(tsr_atomic_u32 *p, uint32_t v) {
  atomic_store_explicit(p, v, memory_order_relaxed);
}
static inline void tsr_atomic_store32_release(tsr_atomic_u32 *p, uint32_t v) {
  atomic_store_explicit(p, v, memory_order_release);
}
static inline bool tsr_atomic_cas32_strong_acq_rel(tsr_atomic_u32 *p, uint32_t *expected, uint32_t v) {
  return atomic_compare_exchange_strong_explicit(p, expected, v, memory_order_acq_rel, memory_order_acquire);
}

#endif
