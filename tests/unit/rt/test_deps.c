/* The dependency table (src/rt/deps.c) on its own, against lanes whose
 * done counters the test sets: what a lookup finds for reads and writes,
 * overlaps, the same lane's records replacing each other, completed
 * records dropped, and a full table emptied by a prune. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "rt/internal.h"

enum { LANES = 4 };
static _Atomic uint64_t done_words[LANES * TSR_RT_DONE_STRIDE];
static uint64_t seen[LANES];
static uint32_t seen_epoch[LANES];
static struct tsr_rt_s rt;

static void setup(void) {
  memset(&rt, 0, sizeof(rt));
  memset((void *)done_words, 0, sizeof(done_words));
  memset(seen, 0, sizeof(seen));
  memset(seen_epoch, 0, sizeof(seen_epoch));
  rt.opt.lanes = LANES;
  rt.done = done_words;
  rt.seen = seen;
  rt.seen_epoch = seen_epoch;
  rt.epoch = 1;
}
TestSuite(rt_deps, .init = setup);

static void set_done(uint32_t lane, uint64_t n) {
  atomic_store(&done_words[lane * TSR_RT_DONE_STRIDE], n);
  rt.epoch++; /* a new submit call reads the counters afresh */
}

static tsr__rt_dep_t who(uint32_t lane, uint64_t n) { return (tsr__rt_dep_t){lane, n, n * 10 + lane}; }

Test(rt_deps, reads_find_writes_and_writes_find_everything) {
  tsr__rt_deps_t *d = NULL;
  cr_assert_null(tsr_rt_deps_create(256, &d));
  cr_assert(tsr_rt_deps_add(d, 0x1000, 0x1400, true, who(0, 1), false));  /* lane 0 writes A */
  cr_assert(tsr_rt_deps_add(d, 0x1000, 0x1400, false, who(1, 1), false)); /* lane 1 reads A */
  tsr__rt_dep_t out[8];
  /* a read of part of A finds the write only */
  uint32_t n = tsr_rt_deps_find(d, &rt, 0x1200, 0x1204, false, out, 0, 8);
  cr_assert_eq(n, 1);
  cr_assert_eq(out[0].lane, 0);
  /* a write overlapping A's end finds both */
  n = tsr_rt_deps_find(d, &rt, 0x13fc, 0x2000, true, out, 0, 8);
  cr_assert_eq(n, 2);
  /* a range just past A finds nothing */
  cr_assert_eq(tsr_rt_deps_find(d, &rt, 0x1400, 0x1800, true, out, 0, 8), 0);
  /* lane 0 done: only lane 1's read is left for a writer */
  set_done(0, 1);
  n = tsr_rt_deps_find(d, &rt, 0x1000, 0x1400, true, out, 0, 8);
  cr_assert_eq(n, 1);
  cr_assert_eq(out[0].lane, 1);
  tsr_rt_deps_free(d);
}

Test(rt_deps, one_lane_keeps_one_record_per_range) {
  tsr__rt_deps_t *d = NULL;
  cr_assert_null(tsr_rt_deps_create(64, &d));
  /* a chain of 1000 writes of one buffer in one lane fits a table of 64 */
  for (uint64_t k = 1; k <= 1000; k++) cr_assert(tsr_rt_deps_add(d, 0x8000, 0x9000, true, who(2, k), false));
  tsr__rt_dep_t out[4];
  uint32_t n = tsr_rt_deps_find(d, &rt, 0x8000, 0x9000, false, out, 0, 4);
  cr_assert_eq(n, 1);
  cr_assert_eq(out[0].n, 1000, "the latest write: %llu", (unsigned long long)out[0].n);
  tsr_rt_deps_free(d);
}

Test(rt_deps, a_full_table_is_emptied_by_a_prune_once_its_tasks_are_done) {
  tsr__rt_deps_t *d = NULL;
  cr_assert_null(tsr_rt_deps_create(32, &d));
  /* distinct ranges far apart, never looked up: nothing drops them on the way */
  uint32_t added = 0;
  while (tsr_rt_deps_add(d, (uint64_t)added << 24, ((uint64_t)added << 24) + 64, true, who(added % LANES, added + 1),
                         false))
    added++;
  cr_assert_geq(added, 15, "only %u records fit a table of 32", added);
  /* nothing done yet: a prune keeps everything */
  cr_assert_eq(tsr_rt_deps_prune(d, &rt), added, "a prune dropped records of tasks not done");
  cr_assert_not(tsr_rt_deps_add(d, 0x7f000000, 0x7f000040, true, who(0, 99), false));
  /* some done (lane 0): only theirs go */
  set_done(0, 1000);
  uint32_t left = tsr_rt_deps_prune(d, &rt);
  cr_assert(left < added && left >= added / 2, "%u of %u left with lane 0 done", left, added);
  /* every task done: the prune empties it and adds succeed again */
  for (uint32_t l = 0; l < LANES; l++) set_done(l, 1000);
  cr_assert_eq(tsr_rt_deps_prune(d, &rt), 0);
  cr_assert(tsr_rt_deps_add(d, 0x7f000000, 0x7f000040, true, who(0, 1001), false));
  tsr_rt_deps_free(d);
}

Test(rt_deps, a_large_range_finds_the_small_ranges_inside_it_and_only_those) {
  tsr__rt_deps_t *d = NULL;
  cr_assert_null(tsr_rt_deps_create(256, &d));
  /* small writes (256 bytes) in lanes 1 and 2, far apart; a 128 KiB read
   * from lane 0 between them */
  cr_assert(tsr_rt_deps_add(d, 0x100000, 0x100100, true, who(1, 1), false));
  cr_assert(tsr_rt_deps_add(d, 0x900000, 0x900100, true, who(2, 1), false));
  cr_assert(tsr_rt_deps_add(d, 0x400000, 0x420000, false, who(0, 1), false));
  tsr__rt_dep_t out[8];
  /* a write over the big range finds its reader, not the small writes */
  uint32_t n = tsr_rt_deps_find(d, &rt, 0x400000, 0x420000, true, out, 0, 8);
  cr_assert_eq(n, 1);
  cr_assert_eq(out[0].lane, 0);
  /* a big read that covers the first small write finds it */
  n = tsr_rt_deps_find(d, &rt, 0x0f0000, 0x110000, false, out, 0, 8);
  cr_assert_eq(n, 1);
  cr_assert_eq(out[0].lane, 1);
  /* one that covers both finds both */
  n = tsr_rt_deps_find(d, &rt, 0x100000, 0x900080, false, out, 0, 8);
  cr_assert_eq(n, 2);
  /* once lane 1 is done and its record dropped, a new small write far away
   * is still found (the level's span starts afresh) */
  set_done(1, 1);
  n = tsr_rt_deps_find(d, &rt, 0x100000, 0x100100, true, out, 0, 8);
  cr_assert_eq(n, 0);
  cr_assert(tsr_rt_deps_add(d, 0x2000000, 0x2000100, true, who(3, 1), false));
  n = tsr_rt_deps_find(d, &rt, 0x1ff0000, 0x2010000, false, out, 0, 8);
  cr_assert_eq(n, 1);
  cr_assert_eq(out[0].lane, 3);
  tsr_rt_deps_free(d);
}
