/* buffer.c: death frontiers, the reuse test, and "try before you fence":
 * the waits that close the gap between a queue's frontier and a buffer's
 * death frontier (see include/tessera/frontier.h). */
#include <string.h>

#include "frontier/internal.h"

tsr_frontier_fit_t tsr_buffer_record_death(const tsr_frontier_t *freeing_frontier, tsr_frontier_t *death) {
  return tsr_frontier_copy(death, freeing_frontier);
}

bool tsr_buffer_can_reuse(const tsr_frontier_t *queue_frontier, const tsr_frontier_t *death) {
  return tsr_frontier_dominates(queue_frontier, death);
}

static bool tsr__bits_any(const uint64_t *bits) {
  for (uint32_t w = 0; w < TSR__FRONTIER_BITSET_WORDS; w++)
    if (bits[w]) return true;
  return false;
}

tsr_buffer_reuse_t tsr_buffer_plan_reuse(const tsr_frontier_t *queue_frontier, const tsr_frontier_t *death,
                                         tsr_semaphore_t *const *semaphores, uint32_t semaphore_count,
                                         uint32_t max_waits, tsr_buffer_wait_t *out_waits, uint32_t *out_wait_count) {
  if (out_wait_count) *out_wait_count = 0;
  if (!queue_frontier || !death) return TSR_BUFFER_REUSE_FENCE;
  if (!tsr_frontier_is_complete(death)) return TSR_BUFFER_REUSE_FENCE;

  /* remaining: bit q set = death entry q not covered yet. */
  uint64_t remaining[TSR__FRONTIER_BITSET_WORDS];
  memset(remaining, 0, sizeof(remaining));
  const tsr_frontier_entry_t *h = queue_frontier->entries;
  uint32_t p = 0;
  for (uint32_t q = 0; q < death->count; q++) {
    const tsr_frontier_entry_t *e = &death->entries[q];
    while (p < queue_frontier->count && h[p].axis < e->axis) p++;
    if (p < queue_frontier->count && h[p].axis == e->axis && h[p].epoch >= e->epoch) continue;
    remaining[q / 64] |= UINT64_C(1) << (q % 64);
  }
  if (!tsr__bits_any(remaining)) return TSR_BUFFER_REUSE_NOW;
  if (!semaphores || !out_waits || !out_wait_count) return TSR_BUFFER_REUSE_FENCE;

  uint64_t best_bits[TSR__FRONTIER_BITSET_WORDS], cand_bits[TSR__FRONTIER_BITSET_WORDS];
  uint32_t waits = 0;
  while (tsr__bits_any(remaining)) {
    if (waits == max_waits) return TSR_BUFFER_REUSE_FENCE;
    uint32_t best_n = 0, best_j = 0;
    uint64_t best_value = 0;
    for (uint32_t j = 0; j < semaphore_count; j++) {
      uint32_t n;
      uint64_t value;
      tsr_semaphore_best_cover(semaphores[j], death, remaining, &n, &value, cand_bits);
      if (n > best_n) {
        best_n = n, best_j = j, best_value = value;
        memcpy(best_bits, cand_bits, sizeof(best_bits));
      }
    }
    if (best_n == 0) return TSR_BUFFER_REUSE_FENCE; /* something no history covers */
    for (uint32_t w = 0; w < TSR__FRONTIER_BITSET_WORDS; w++) remaining[w] &= ~best_bits[w];
    out_waits[waits].semaphore = semaphores[best_j];
    out_waits[waits].value = best_value;
    waits++;
  }
  *out_wait_count = waits;
  return TSR_BUFFER_REUSE_AFTER_WAITS;
}
