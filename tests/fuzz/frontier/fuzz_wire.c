/* fuzz_wire.c: libFuzzer target for the frontier wire decoder.
 *
 * For every input: decoding must not crash or read out of bounds (ASan,
 * UBSan); a rejected input leaves the destination empty and incomplete; an
 * accepted one is canonical (valid frontier, and re-encoding it gives back
 * exactly the input bytes), decodes into a small destination iff it fits, and
 * survives the frontier operations with their invariants (copy into a small
 * knowledge frontier keeps only facts; compare agrees with dominates; the
 * missing set of find-undominated is what a merge needs). Built and run by
 * run.sh (registered with ctest as fuzz.frontier_wire). */
#include <stdlib.h>
#include <string.h>

#include "tessera/frontier.h"

#include "../check.h"

static TSR_FRONTIER_STORAGE(TSR_FRONTIER_MAX_CAPACITY) big, big2, missing;
static TSR_FRONTIER_STORAGE(4) small;
static uint8_t re[1 + 10 + TSR_FRONTIER_MAX_CAPACITY * 20];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tsr_frontier_t *f = tsr_frontier_init(&big, TSR_FRONTIER_MAX_CAPACITY, TSR_FRONTIER_REQUIREMENT);
  tsr_frontier_wire_error_t err = tsr_frontier_decode(data, size, f);
  if (err != TSR_WIRE_OK) {
    FUZZ_CHECK(tsr_frontier_count(f) == 0 && !tsr_frontier_is_complete(f));
    FUZZ_CHECK(strcmp(tsr_frontier_wire_error_name(err), "unknown") != 0);
    return 0;
  }
  FUZZ_CHECK(tsr_frontier_is_valid(f));
  size_t n = tsr_frontier_encode(f, re, sizeof re);
  FUZZ_CHECK(n == size && memcmp(re, data, size) == 0);

  tsr_frontier_t *s = tsr_frontier_init(&small, 4, TSR_FRONTIER_KNOWLEDGE);
  tsr_frontier_wire_error_t err2 = tsr_frontier_decode(data, size, s);
  FUZZ_CHECK(f->count <= 4 ? err2 == TSR_WIRE_OK : err2 == TSR_WIRE_CAPACITY);

  /* copy into a small knowledge frontier: only facts survive */
  s = tsr_frontier_init(&small, 4, TSR_FRONTIER_KNOWLEDGE);
  tsr_frontier_copy(s, f);
  FUZZ_CHECK(tsr_frontier_is_valid(s));
  for (uint32_t i = 0; i < s->count; i++) FUZZ_CHECK(tsr_frontier_get(f, s->entries[i].axis) == s->entries[i].epoch);
  FUZZ_CHECK(f->count <= 4 || tsr_frontier_is_tainted(s));

  /* compare agrees with dominates, both ways */
  bool fs = tsr_frontier_dominates(f, s), sf = tsr_frontier_dominates(s, f);
  tsr_frontier_order_t o = tsr_frontier_compare(f, s);
  FUZZ_CHECK(o == (fs && sf ? TSR_FRONTIER_EQUAL
                   : fs     ? TSR_FRONTIER_AFTER
                   : sf     ? TSR_FRONTIER_BEFORE
                            : TSR_FRONTIER_CONCURRENT));

  /* find-undominated of f against the small one, then merge closes it when
   * f is complete */
  tsr_frontier_t *m = tsr_frontier_init(&missing, TSR_FRONTIER_MAX_CAPACITY, TSR_FRONTIER_REQUIREMENT);
  bool covered = tsr_frontier_find_undominated(s, f, m);
  FUZZ_CHECK(covered == sf);
  tsr_frontier_t *g = tsr_frontier_init(&big2, TSR_FRONTIER_MAX_CAPACITY, TSR_FRONTIER_KNOWLEDGE);
  tsr_frontier_copy(g, s);
  g->flags = 0;
  FUZZ_CHECK(tsr_frontier_merge(g, m) == TSR_FRONTIER_FIT);
  FUZZ_CHECK(tsr_frontier_is_valid(g));
  if (tsr_frontier_is_complete(f)) FUZZ_CHECK(tsr_frontier_dominates(g, f));
  /* self merge and self compare */
  FUZZ_CHECK(tsr_frontier_merge(g, g) == TSR_FRONTIER_FIT);
  FUZZ_CHECK(tsr_frontier_is_complete(g) == (tsr_frontier_compare(g, g) == TSR_FRONTIER_EQUAL));
  return 0;
}
