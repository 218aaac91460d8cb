/* The shim's pointer map: what each allocation was charged, lock-free. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>

#include "shim/ptrmap.h"

Test(ptrmap, put_then_take_once) {
  tsr_shim_ptrmap_t m;
  cr_assert(tsr_shim_ptrmap_init(&m, 64));
  cr_assert(tsr_shim_ptrmap_put(&m, 0x7f0000001000, 4096, 2));
  uint64_t bytes = 0;
  uint32_t tag = 9;
  cr_assert(tsr_shim_ptrmap_take(&m, 0x7f0000001000, &bytes, &tag));
  cr_assert_eq(bytes, 4096);
  cr_assert_eq(tag, 2);
  cr_assert_not(tsr_shim_ptrmap_take(&m, 0x7f0000001000, &bytes, &tag), "a second free is not credited");
  cr_assert_not(tsr_shim_ptrmap_take(&m, 0x1234, &bytes, &tag), "a pointer never put");
  cr_assert_not(tsr_shim_ptrmap_put(&m, 0, 1, 0), "key 0 is refused");
  cr_assert_not(tsr_shim_ptrmap_put(&m, UINT64_MAX, 1, 0), "the tombstone is refused");
  tsr_shim_ptrmap_free(&m);
}

Test(ptrmap, a_full_map_refuses_and_deleted_cells_are_reused) {
  tsr_shim_ptrmap_t m;
  cr_assert(tsr_shim_ptrmap_init(&m, 16));
  for (uint64_t k = 1; k <= 16; k++) cr_assert(tsr_shim_ptrmap_put(&m, k * 4096, k, 0));
  cr_assert_not(tsr_shim_ptrmap_put(&m, 17 * 4096, 1, 0), "no room: refused, never lost");
  uint64_t b;
  for (uint64_t k = 1; k <= 16; k += 2) cr_assert(tsr_shim_ptrmap_take(&m, k * 4096, &b, NULL));
  for (uint64_t k = 17; k <= 24; k++) cr_assert(tsr_shim_ptrmap_put(&m, k * 4096, k, 0), "reuse %llu", (unsigned long long)k);
  for (uint64_t k = 2; k <= 16; k += 2) {
    cr_assert(tsr_shim_ptrmap_take(&m, k * 4096, &b, NULL));
    cr_assert_eq(b, k);
  }
  for (uint64_t k = 17; k <= 24; k++) {
    cr_assert(tsr_shim_ptrmap_take(&m, k * 4096, &b, NULL));
    cr_assert_eq(b, k);
  }
  tsr_shim_ptrmap_free(&m);
}

static tsr_shim_ptrmap_t g_map;
static _Atomic uint64_t g_credited;

static void *racer(void *arg) {
  uint64_t base = (uint64_t)(uintptr_t)arg;
  for (uint64_t i = 0; i < 20000; i++) {
    uint64_t key = (base << 32) | ((i + 1) << 12);
    if (!tsr_shim_ptrmap_put(&g_map, key, i + 1, 0)) return (void *)1;
    uint64_t b;
    if (!tsr_shim_ptrmap_take(&g_map, key, &b, NULL) || b != i + 1) return (void *)2;
  }
  return NULL;
}

static void *taker(void *arg) {
  uint64_t key = (uint64_t)(uintptr_t)arg, b;
  if (tsr_shim_ptrmap_take(&g_map, key, &b, NULL)) atomic_fetch_add(&g_credited, b);
  return NULL;
}

Test(ptrmap, threads_do_not_lose_or_double_entries) {
  cr_assert(tsr_shim_ptrmap_init(&g_map, 1 << 12));
  pthread_t t[8];
  for (uintptr_t i = 0; i < 8; i++) pthread_create(&t[i], NULL, racer, (void *)(i + 1));
  for (int i = 0; i < 8; i++) {
    void *rc;
    pthread_join(t[i], &rc);
    cr_assert_null(rc, "thread %d: %s", i, rc == (void *)1 ? "put failed" : "take lost its entry");
  }
  /* many threads free one pointer at once: it is credited exactly once */
  for (int round = 0; round < 200; round++) {
    uint64_t key = 0xdead0000ull + ((uint64_t)round << 12);
    atomic_store(&g_credited, 0);
    cr_assert(tsr_shim_ptrmap_put(&g_map, key, 777, 0));
    for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, taker, (void *)(uintptr_t)key);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    cr_assert_eq(atomic_load(&g_credited), 777, "round %d: credited %llu", round,
                 (unsigned long long)atomic_load(&g_credited));
  }
  tsr_shim_ptrmap_free(&g_map);
}
