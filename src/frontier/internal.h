/* frontier/internal.h: helpers shared by the files of the frontier module.
 * Not part of the public API (tessera/frontier.h). */
#ifndef TESSERA_FRONTIER_INTERNAL_H
#define TESSERA_FRONTIER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/frontier.h"

/* Words of a bitset with one bit per entry of the largest frontier. */
#define TSR__FRONTIER_BITSET_WORDS (TSR_FRONTIER_MAX_CAPACITY / 64u)

/* Raises `axis` to `epoch` in a KNOWLEDGE frontier and guarantees the entry is
 * present afterwards: if the frontier is full, the smallest (epoch, axis)
 * entry other than `axis` is evicted and the frontier marked TAINTED.
 * Requires capacity >= 1 and epoch >= 1. Used for a queue's own entry. */
tsr_frontier_fit_t tsr_frontier_raise_pinned(tsr_frontier_t *frontier, tsr_axis_t axis, uint64_t epoch);

/* Semaphore side of tsr_queue_submit, under one lock: true if the wait on
 * S >= value must be issued (knowledge does not cover it); in that case the
 * frontier of the signal that reached `value` is merged into `knowledge`
 * when known. False (elided) leaves knowledge unchanged. */
bool tsr_semaphore_resolve(tsr_semaphore_t *semaphore, uint64_t value, tsr_frontier_t *knowledge);

/* Buffer planning: among the tracked signals remembered by `semaphore`, finds
 * the one whose frontier covers the most entries of `death` whose bit is set
 * in `remaining` (ties: the smallest value). On return *out_count is that
 * number (0: none covers anything), *out_value its value, and `out_covered`
 * has the bits of the entries it covers. One lock acquisition. */
void tsr_semaphore_best_cover(tsr_semaphore_t *semaphore, const tsr_frontier_t *death, const uint64_t *remaining,
                              uint32_t *out_count, uint64_t *out_value, uint64_t *out_covered);

#endif
