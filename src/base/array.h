/* base/array.h: growing an array without overflow, and searching a sorted one.
 *
 * Every growable array in tessera (lease table, heap, audit and reply
 * buffers, parse results) grows through tsr_array_grow, so the doubling and
 * its overflow checks are written once; every sorted one (the lease table,
 * the process table, the backstop's leases) is searched through
 * tsr_array_lower_bound. Thread-safe, no global state. */
#ifndef TESSERA_BASE_ARRAY_H
#define TESSERA_BASE_ARRAY_H

#include <stdbool.h>
#include <stddef.h>

/* Makes room for at least `need` elements of `elem` bytes in `buf`, whose
 * capacity is *cap elements: doubles *cap (starting at `min_cap`, at least
 * 1) until it holds `need`, and reallocs. Returns the (possibly moved)
 * buffer and updates *cap, or returns NULL, leaving `buf` and *cap as they
 * were, if the size would overflow size_t or memory runs out. When *cap
 * already holds `need`, returns `buf` unchanged. */
void *tsr_array_grow(void *buf, size_t *cap, size_t need, size_t elem, size_t min_cap);

/* Where `key` is, or would go, among the `count` elements of `elem` bytes at
 * `base`, sorted so that before(element, key) holds for a first run of them:
 * the index of the first element for which it does not (`count` when it
 * holds for all). Binary search: O(log count) calls of `before`. */
size_t tsr_array_lower_bound(const void *base, size_t count, size_t elem, const void *key,
                             bool (*before)(const void *element, const void *key));

#endif
