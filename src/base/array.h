/* base/array.h: growing an array without overflow.
 *
 * Every growable array in tessera (lease table, heap, audit and reply
 * buffers, parse results) grows through tsr_array_grow, so the doubling and
 * its overflow checks are written once. Thread-safe, no global state. */
#ifndef TESSERA_BASE_ARRAY_H
#define TESSERA_BASE_ARRAY_H

#include <stddef.h>

/* Makes room for at least `need` elements of `elem` bytes in `buf`, whose
 * capacity is *cap elements: doubles *cap (starting at `min_cap`, at least
 * 1) until it holds `need`, and reallocs. Returns the (possibly moved)
 * buffer and updates *cap, or returns NULL, leaving `buf` and *cap as they
 * were, if the size would overflow size_t or memory runs out. When *cap
 * already holds `need`, returns `buf` unchanged. */
void *tsr_array_grow(void *buf, size_t *cap, size_t need, size_t elem, size_t min_cap);

#endif
