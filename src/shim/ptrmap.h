/* shim/ptrmap.h: what each allocation of this process was charged (see
 * ptrmap.c). Lock-free; any thread may call any function at once. */
#ifndef TESSERA_SHIM_PTRMAP_H
#define TESSERA_SHIM_PTRMAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  _Atomic uint64_t key;   /* pointer or handle; 0 empty, UINT64_MAX deleted */
  _Atomic uint64_t bytes; /* what was charged for it */
  _Atomic uint32_t tag;   /* which lease (index into the shim's attached leases) */
  uint32_t pad;
} tsr_shim_ptrmap_cell_t;

typedef struct {
  tsr_shim_ptrmap_cell_t *cells;
  size_t mask; /* cells - 1 (a power of two) */
} tsr_shim_ptrmap_t;

/* Reserves `cells` (rounded up to a power of two) cells of address space;
 * pages are touched only as they are used. False if mmap fails. */
bool tsr_shim_ptrmap_init(tsr_shim_ptrmap_t *map, size_t cells);
void tsr_shim_ptrmap_free(tsr_shim_ptrmap_t *map);

/* Records `key` -> (bytes, tag). False for key 0 or UINT64_MAX-1.. or when
 * the table is full. */
bool tsr_shim_ptrmap_put(tsr_shim_ptrmap_t *map, uint64_t key, uint64_t bytes, uint32_t tag);

/* Removes `key`, giving what it was charged; false if it is not there (not
 * ours, or already taken by a racing free). */
bool tsr_shim_ptrmap_take(tsr_shim_ptrmap_t *map, uint64_t key, uint64_t *out_bytes,
                          uint32_t *out_tag);

#endif
