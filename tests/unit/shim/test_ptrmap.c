/* The shim's pointer map: what each allocation was charged, lock-free. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>

#include "shim/ptrmap.h"

Test(ptrmap, put_then_take_once) {
  tsr_shim_ptrmap_t m;
  cr_assert(tsr_shim_ptrmap_init(&m, 64));
  cr_assert(tsr_shim_ptrmap_put(&m, 0x7f0000001000, &(tsr_shim_ptrmap_val_t){4096, 2, 5, 6}));
  tsr_shim_ptrmap_val_t v = {0, 9, 9, 9};
  cr_assert(tsr_shim_ptrmap_take(&m, 0x7f0000001000, &v));
  cr_assert_eq(v.bytes, 4096);
  cr_assert_eq(v.tag, 2);
  cr_assert_eq(v.ctx, 5);
  cr_assert_eq(v.pool, 6);
  cr_assert_not(tsr_shim_ptrmap_take(&m, 0x7f0000001000, &v), "a second free is not credited");
  cr_assert_not(tsr_shim_ptrmap_take(&m, 0x1234, &v), "a pointer never put");
  cr_assert_not(tsr_shim_ptrmap_put(&m, 0, &v), "key 0 is refused");
  cr_assert_not(tsr_shim_ptrmap_put(&m, UINT64_MAX, &v), "the tombstone is refused");
  tsr_shim_ptrmap_free(&m);
}

Test(ptrmap, a_full_map_refuses_and_deleted_cells_are_reused) {
  tsr_shim_ptrmap_t m;
  cr_assert(tsr_shim_ptrmap_init(&m, 16));
  for (uint64_t k = 1; k <= 16; k++) cr_assert(tsr_shim_ptrmap_put(&m, k * 4096, &(tsr_shim_ptrmap_val_t){.bytes = k}));
  cr_assert_not(tsr_shim_ptrmap_put(&m, 17 * 4096, &(tsr_shim_ptrmap_val_t){.bytes = 1}),
                "no room: refused, never lost");
  tsr_shim_ptrmap_val_t v;
  for (uint64_t k = 1; k <= 16; k += 2) cr_assert(tsr_shim_ptrmap_take(&m, k * 4096, NULL));
  for (uint64_t k = 17; k <= 24; k++)
    cr_assert(tsr_shim_ptrmap_put(&m, k * 4096, &(tsr_shim_ptrmap_val_t){.bytes = k}), "reuse %llu",
              (unsigned long long)k);
  for (uint64_t k = 2; k <= 16; k += 2) {
    cr_assert(tsr_shim_ptrmap_take(&m, k * 4096, &v));
    cr_assert_eq(v.bytes, k);
  }
  for (uint64_t k = 17; k <= 24; k++) {
    cr_assert(tsr_shim_ptrmap_take(&m, k * 4096, &v));
    cr_assert_eq(v.bytes, k);
  }
  tsr_shim_ptrmap_free(&m);
}

static tsr_shim_ptrmap_t g_map;
static _Atomic uint64_t g_credited;

static void *racer(void *arg) {
  uint64_t base = (uint64_t)(uintptr_t)arg;
  for (uint64_t i = 0; i < 20000; i++) {
    uint64_t key = (base << 32) | ((i + 1) << 12);
    if (!tsr_shim_ptrmap_put(&g_map, key, &(tsr_shim_ptrmap_val_t){.bytes = i + 1})) return (void *)1;
    tsr_shim_ptrmap_val_t v;
    if (!tsr_shim_ptrmap_take(&g_map, key, &v) || v.bytes != i + 1) return (void *)2;
  }
  return NULL;
}

static void *taker(void *arg) {
  uint64_t key = (uint64_t)(uintptr_t)arg;
  tsr_shim_ptrmap_val_t v;
  if (tsr_shim_ptrmap_take(&g_map, key, &v)) atomic_fetch_add(&g_credited, v.bytes);
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
    cr_assert(tsr_shim_ptrmap_put(&g_map, key, &(tsr_shim_ptrmap_val_t){.bytes = 777}));
    for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, taker, (void *)(uintptr_t)key);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    cr_assert_eq(atomic_load(&g_credited), 777, "round %d: credited %llu", round,
                 (unsigned long long)atomic_load(&g_credited));
  }
  tsr_shim_ptrmap_free(&g_map);
}

/* A context's end takes its entries, and only its own, exactly once. */
static void sum_visit(void *arg, uint64_t key, const tsr_shim_ptrmap_val_t *v) {
  (void)key;
  *(uint64_t *)arg += v->bytes;
}

Test(ptrmap, a_context_end_takes_its_entries_once) {
  tsr_shim_ptrmap_t m;
  cr_assert(tsr_shim_ptrmap_init(&m, 256));
  /* k % 3 == 0: no context (ctx 0); 1 and 2: contexts 1 and 2 */
  for (uint64_t k = 1; k <= 90; k++)
    cr_assert(tsr_shim_ptrmap_put(&m, k << 21, &(tsr_shim_ptrmap_val_t){.bytes = k, .ctx = (uint32_t)(k % 3)}));
  cr_assert(tsr_shim_ptrmap_take(&m, 4 << 21, NULL), "freed before the end: not taken again");
  uint64_t sum = 0, want = 1; /* k = 1, then 7, 10, ... 88 */
  for (uint64_t k = 7; k <= 90; k += 3) want += k;
  cr_assert_eq(tsr_shim_ptrmap_take_ctx(&m, 0, sum_visit, &sum), 0, "0 names no context");
  cr_assert_eq(tsr_shim_ptrmap_take_ctx(&m, 3, sum_visit, &sum), 0, "no entries of context 3");
  cr_assert_eq(tsr_shim_ptrmap_take_ctx(&m, 1, sum_visit, &sum), 29);
  cr_assert_eq(sum, want);
  cr_assert_eq(tsr_shim_ptrmap_take_ctx(&m, 1, sum_visit, &sum), 0, "a second end takes nothing");
  cr_assert_not(tsr_shim_ptrmap_take(&m, 7 << 21, NULL), "a free after the end finds nothing");
  for (uint64_t k = 1; k <= 90; k++)
    if (k % 3 != 1)
      cr_assert(tsr_shim_ptrmap_take(&m, k << 21, NULL), "%llu: other entries stay", (unsigned long long)k);
  tsr_shim_ptrmap_free(&m);
}
