/* The cost model of launches and the classes of kernels (shim/cost.h). */
#include <criterion/criterion.h>
#include <string.h>

#include "shim/cost.h"

static tsr_cost_table_t table;
static int named;

static const char *namer(void *ctx, uint64_t fn) {
  (void)ctx;
  named++;
  switch (fn) {
    case 1: return "_Z6matmulPfS_S_";
    case 2: return "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
    case 3: return "void at::native::memset_kernel<float>(float*, int)";
    default: return NULL;
  }
}

static void setup(void) {
  tsr_cost_init(&table);
  named = 0;
}
TestSuite(cost, .init = setup);

Test(cost, classes_by_name) {
  cr_assert_eq(tsr_shim_kclass("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), TSR_KCLASS_NCCL);
  cr_assert_eq(tsr_shim_kclass("_Z24ncclKernel_AllReduce_RING_LL_Sum_floatP11ncclDevComm"), TSR_KCLASS_NCCL);
  cr_assert_eq(tsr_shim_kclass("_Z13ncclDevKernelv"), TSR_KCLASS_NCCL);
  cr_assert_eq(tsr_shim_kclass("Memset32"), TSR_KCLASS_MEMORY);
  cr_assert_eq(tsr_shim_kclass("my_memcpy_2d"), TSR_KCLASS_MEMORY);
  cr_assert_eq(tsr_shim_kclass("sgemm_128x128"), TSR_KCLASS_DEFAULT);
  cr_assert_eq(tsr_shim_kclass("nccl_like_but_not"), TSR_KCLASS_DEFAULT);
  cr_assert_eq(tsr_shim_kclass(""), TSR_KCLASS_DEFAULT);
  cr_assert_eq(tsr_shim_kclass(NULL), TSR_KCLASS_DEFAULT);
}

Test(cost, shape_packs_without_spilling) {
  uint64_t a = tsr_cost_shape(UINT64_MAX, UINT32_MAX, UINT32_MAX);
  cr_assert_neq(a, 0);
  cr_assert_eq(a & 0xffffffffu, 0xffffffffu);
  cr_assert_neq(tsr_cost_shape(132, 256, 0), tsr_cost_shape(132, 128, 0));
  cr_assert_neq(tsr_cost_shape(132, 256, 0), tsr_cost_shape(133, 256, 0));
  cr_assert_neq(tsr_cost_shape(132, 256, 0), tsr_cost_shape(132, 256, 16));
  cr_assert_neq(tsr_cost_shape(0, 0, 0), 0, "never 0");
}

Test(cost, one_entry_per_function_and_shape, .init = setup) {
  uint64_t s1 = tsr_cost_shape(132, 256, 0), s2 = tsr_cost_shape(8448, 256, 0);
  tsr_cost_entry_t *a = tsr_cost_get(&table, 1, s1, namer, NULL, 0);
  tsr_cost_entry_t *b = tsr_cost_get(&table, 1, s1, namer, NULL, 0);
  tsr_cost_entry_t *c = tsr_cost_get(&table, 1, s2, namer, NULL, 0);
  cr_assert_not_null(a);
  cr_assert_eq(a, b);
  cr_assert_neq(a, c);
  cr_assert_eq(named, 2, "named once per entry, not per launch");
}

Test(cost, prior_then_the_minimum_of_recent_samples, .init = setup) {
  tsr_cost_entry_t *e = tsr_cost_get(&table, 1, tsr_cost_shape(132, 256, 0), namer, NULL, 0);
  bool sample;
  for (int i = 0; i < 10; i++) cr_assert_eq(tsr_cost_charge(e, &sample), TSR_COST_PRIOR_NS);
  /* the ten launches charged 100 us took 1 ms: 9 ms owed, paid by the next
   * launches at most one cost each (no lump for one launch to wait for) */
  cr_assert_eq(tsr_cost_learn(&table, e, 1000000), 0, "a debt is owed, not returned");
  uint64_t paid = 0;
  for (int i = 0; i < 9; i++) {
    uint64_t c = tsr_cost_charge(e, &sample);
    cr_assert_eq(c, 2000000, "launch %d charged %lu", i, c);
    paid += c - 1000000;
  }
  cr_assert_eq(paid, 10 * (1000000 - TSR_COST_PRIOR_NS));
  cr_assert_eq(tsr_cost_charge(e, &sample), 1000000, "then the cost alone");
  /* contention only lengthens a measurement: samples past 110% of the
   * fastest are left out (a slice of another context inside a kernel: up
   * to twice it; or just over the trim) */
  cr_assert_eq(tsr_cost_learn(&table, e, 1900000), 0, "settled once, at the first sample");
  tsr_cost_learn(&table, e, 2400000);
  tsr_cost_learn(&table, e, 1110000);
  cr_assert_eq(tsr_cost_peek(e), 1000000);
  /* samples within the trim (one kernel at the clocks of one run) are
   * averaged: 1.0 and 1.08 ms -> 1.04 */
  tsr_cost_learn(&table, e, 1080000);
  cr_assert_eq(tsr_cost_peek(e), 1040000);
  /* one clean sample among many slowed by contention is enough */
  for (int i = 0; i < TSR_COST_RING - 6; i++) tsr_cost_learn(&table, e, 2000000);
  cr_assert_eq(tsr_cost_peek(e), 1040000);
  /* a kernel that really became slower is followed within the ring */
  for (int i = 0; i < TSR_COST_RING; i++) tsr_cost_learn(&table, e, 2000000 + 2 * (uint64_t)i);
  cr_assert_eq(tsr_cost_peek(e), 2000000 + (TSR_COST_RING - 1)); /* the mean of 2i, i < RING */
}

Test(cost, a_debt_follows_the_estimate, .init = setup) {
  tsr_cost_entry_t *e = tsr_cost_get(&table, 1, tsr_cost_shape(132, 256, 0), namer, NULL, 0);
  bool s;
  for (int i = 0; i < 10; i++) tsr_cost_charge(e, &s);
  /* the first sample waited behind other streams' kernels: 10 ms, not 1 */
  tsr_cost_learn(&table, e, 10000000);
  cr_assert_eq(atomic_load(&e->owed_ns), 10 * (10000000 - TSR_COST_PRIOR_NS));
  cr_assert_eq(tsr_cost_charge(e, &s), 20000000, "one cost paid back with the launch");
  /* a clean sample: 1 ms; the ten owed 9 ms in all, and 10 ms were paid */
  tsr_cost_learn(&table, e, 1000000);
  cr_assert_eq(tsr_cost_peek(e), 1000000);
  cr_assert_eq(atomic_load(&e->owed_ns), 0, "what was paid covers what is owed now");
  cr_assert_eq(tsr_cost_charge(e, &s), 1000000);
}

Test(cost, overcharged_prior_is_given_back, .init = setup) {
  tsr_cost_entry_t *e = tsr_cost_get(&table, 1, tsr_cost_shape(1, 32, 0), namer, NULL, 0);
  bool sample;
  for (int i = 0; i < 4; i++) tsr_cost_charge(e, &sample);
  cr_assert_eq(tsr_cost_learn(&table, e, 10000), -4 * ((int64_t)TSR_COST_PRIOR_NS - 10000));
}

Test(cost, which_launches_are_measured, .init = setup) {
  tsr_cost_entry_t *e = tsr_cost_get(&table, 1, tsr_cost_shape(1, 32, 0), namer, NULL, 0);
  int sampled = 0;
  for (int i = 0; i < TSR_COST_RING + 10 * TSR_COST_EVERY; i++) {
    bool s;
    tsr_cost_charge(e, &s);
    sampled += s;
  }
  cr_assert_eq(sampled, TSR_COST_RING + 10, "every launch at first, then one in %d", TSR_COST_EVERY);
}

Test(cost, nccl_free_memory_ops_half, .init = setup) {
  bool s;
  tsr_cost_entry_t *n = tsr_cost_get(&table, 2, tsr_cost_shape(8, 512, 0), namer, NULL, 0);
  cr_assert_eq(tsr_cost_charge(n, &s), 0);
  cr_assert_not(s, "an NCCL kernel is neither charged nor measured");
  tsr_cost_entry_t *m = tsr_cost_get(&table, 3, tsr_cost_shape(8, 512, 0), namer, NULL, 0);
  tsr_cost_charge(m, &s);
  cr_assert_eq(tsr_cost_learn(&table, m, 400000), 0);
  cr_assert_eq(tsr_cost_charge(m, &s), 200000 + 200000 - TSR_COST_PRIOR_NS / 2, "half, and the debt");
  cr_assert_eq(tsr_cost_charge(m, &s), 200000);
}

Test(cost, measurements_out_of_range, .init = setup) {
  tsr_cost_entry_t *e = tsr_cost_get(&table, 4, tsr_cost_shape(1, 1, 0), namer, NULL, 0);
  cr_assert_eq(tsr_cost_learn(&table, e, TSR_COST_MAX_NS + 1), 0);
  cr_assert_eq(tsr_cost_peek(e), TSR_COST_PRIOR_NS, "a sample past 10 s is not believed");
  tsr_cost_learn(&table, e, 0);
  cr_assert_eq(tsr_cost_peek(e), TSR_COST_MIN_NS, "nothing costs less than the floor");
}

Test(cost, settlement_cannot_overflow, .init = setup) {
  tsr_cost_entry_t *e = tsr_cost_get(&table, 4, tsr_cost_shape(1, 1, 0), namer, NULL, 1);
  atomic_store(&e->prior_launches, UINT64_MAX);
  cr_assert_eq(tsr_cost_learn(&table, e, TSR_COST_MAX_NS), 0);
  cr_assert_eq(atomic_load(&e->owed_ns), (TSR_COST_MAX_NS - TSR_COST_MIN_NS) * 1000000,
               "a debt of a million launches at most, never wrapped");
  bool s;
  cr_assert_eq(tsr_cost_charge(e, &s), 2 * TSR_COST_MAX_NS, "and is paid one cost a launch");
  /* an overcharge of many launches is bounded too */
  tsr_cost_entry_t *g = tsr_cost_get(&table, 5, tsr_cost_shape(1, 1, 0), namer, NULL, TSR_COST_MAX_NS);
  atomic_store(&g->prior_launches, UINT64_MAX);
  int64_t back = tsr_cost_learn(&table, g, TSR_COST_MIN_NS);
  cr_assert_lt(back, 0);
  cr_assert_geq(back, -(int64_t)TSR_COST_MAX_NS * 1000000);
}

Test(cost, an_unload_makes_entries_afresh, .init = setup) {
  uint64_t sh = tsr_cost_shape(1, 32, 0);
  tsr_cost_entry_t *e = tsr_cost_get(&table, 1, sh, namer, NULL, 0);
  tsr_cost_learn(&table, e, 5000);
  tsr_cost_forget_all(&table);
  tsr_cost_entry_t *again = tsr_cost_get(&table, 1, sh, namer, NULL, 0);
  cr_assert_eq(again, e, "the same slot, made again");
  cr_assert_eq(tsr_cost_peek(again), TSR_COST_PRIOR_NS, "what was learned is forgotten");
  cr_assert_eq(named, 2, "and it is named again: the handle may be another kernel's");
}

Test(cost, a_full_table_answers_null, .init = setup) {
  uint32_t made = 0;
  for (uint64_t fn = 100; fn < 100 + TSR_COST_ENTRIES; fn++)
    if (tsr_cost_get(&table, fn, 1, NULL, NULL, 0)) made++;
  cr_assert_eq(made, TSR_COST_ENTRIES * 7 / 8);
  cr_assert_null(tsr_cost_get(&table, 99999, 1, NULL, NULL, 0));
  cr_assert_not_null(tsr_cost_get(&table, 100, 1, NULL, NULL, 0), "known entries are still found");
}

Test(cost, graph_reset_takes_a_new_prior, .init = setup) {
  tsr_cost_entry_t *g = tsr_cost_get(&table, UINT64_C(1) << 63 | 77, 0, NULL, NULL, 8000000);
  cr_assert_eq(tsr_cost_peek(g), 8000000);
  tsr_cost_learn(&table, g, 7000000);
  tsr_cost_reset(&table, g, 3000000);
  cr_assert_eq(tsr_cost_peek(g), 3000000);
}
