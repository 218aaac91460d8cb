/* rt/cache.h: the disk cache of compiled operators.
 *
 * NVRTC takes hundreds of ms to compile an operator; the cache lets every
 * process after the first load the compiled code instead. An entry is keyed
 * by everything that decides the code NVRTC produces: the operator's source,
 * the compile options, the GPU architecture and the driver version.
 *
 * The cache lives in $XDG_CACHE_HOME/tessera, or $HOME/.cache/tessera when
 * XDG_CACHE_HOME is unset or not absolute (as the XDG spec says to treat a
 * relative one). One file per entry, named by the hex of a 128-bit hash of
 * the key, holding:
 *
 *   header (56 bytes, integers little-endian)
 *     0  magic "TSRRTC1\0"
 *     8  u32 format version (1)
 *    12  i32 driver version
 *    16  u64 length of source, 24 of options, 32 of arch, 40 of blob
 *    48  u64 checksum of header bytes 0..47 and everything after the header
 *   source, options, arch (verbatim, no NULs), blob
 *
 * Nothing in the directory is trusted: a file whose checksum, lengths or
 * size do not agree is removed and treated as a miss, and the key is
 * compared byte for byte, so a hash collision is a miss too, never another
 * operator's code. Entries are written to a temporary file and renamed into
 * place, so a reader sees the old entry or the new, whole, never part of one.
 *
 * A cache that cannot be opened or written is not fatal: the runtime then
 * compiles every time. All functions may be called from any thread on the
 * same cache at once (the object is not changed after open), and from any
 * number of processes sharing the directory. */
#ifndef TESSERA_RT_CACHE_H
#define TESSERA_RT_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/status.h"

/* The largest blob store accepts. */
#define TSR_RT_CACHE_BLOB_MAX ((size_t)64 << 20)
/* The largest source + options + arch store accepts (a sanity bound that
 * also caps what lookup will read). */
#define TSR_RT_CACHE_KEY_MAX ((size_t)16 << 20)

/* What an entry is keyed by. The strings are NUL-terminated and borrowed
 * for the length of the call. */
typedef struct tsr_rt_cache_key_s {
  const char *source;  /* the operator's source text */
  const char *options; /* compile options, one string */
  const char *arch;    /* "sm_90" */
  int driver_version;  /* cuDriverGetVersion */
} tsr_rt_cache_key_t;

typedef struct tsr_rt_cache_s tsr_rt_cache_t;

/* Opens the cache in `dir` (absolute), or in the default directory above
 * when `dir` is NULL. Either is created, mode 0700, with missing parents.
 * Refused (TSR_FAILED_PRECONDITION, saying why) if it is a symbolic link,
 * not a directory, owned by another user, writable by group or others, or
 * inside a directory another user could change (tsr_fs_check_private_dir);
 * TSR_INVALID_ARGUMENT for a relative `dir`; TSR_FAILED_PRECONDITION when
 * there is no default (neither XDG_CACHE_HOME nor HOME is an absolute
 * path). Removes temporary
 * files older than a minute, left by writers that were killed.
 * *out_cache is NULL on failure. */
TSR_MUST_USE tsr_status_t tsr_rt_cache_open(const char *dir, tsr_rt_cache_t **out_cache);

/* Closes `cache` (NULL is ignored). Entries stay on disk. */
void tsr_rt_cache_close(tsr_rt_cache_t *cache);

/* The cache's directory, without a trailing slash; owned by `cache`. */
const char *tsr_rt_cache_dir(const tsr_rt_cache_t *cache);

/* Looks up `key`. On a hit, returns true with *out_blob (malloc'd, never
 * NULL, even for an empty blob; the caller frees it) and *out_len holding
 * exactly the bytes that tsr_rt_cache_store wrote for this exact key. A miss
 * returns false with *out_blob NULL and *out_len 0: no entry, an entry of
 * another key under the same name, an invalid key, or a corrupt entry, which
 * is removed and its reason logged at debug level. Reads one file; costs its
 * size in memory and a checksum pass over it. */
bool tsr_rt_cache_lookup(tsr_rt_cache_t *cache, const tsr_rt_cache_key_t *key, void **out_blob, size_t *out_len);

/* Stores `len` bytes of `blob` (NULL allowed when `len` is 0) under `key`,
 * replacing any entry there, atomically: a temporary file in the cache's
 * directory is written in full, fsync'ed and renamed over the entry's name.
 * Two processes storing the same key at once both succeed and the entry is
 * one of theirs, whole. TSR_INVALID_ARGUMENT, writing nothing, for a blob
 * over TSR_RT_CACHE_BLOB_MAX or a key over TSR_RT_CACHE_KEY_MAX or with a
 * NULL field; a failed write leaves no file behind. Files are mode 0600. */
TSR_MUST_USE tsr_status_t tsr_rt_cache_store(tsr_rt_cache_t *cache, const tsr_rt_cache_key_t *key, const void *blob,
                                             size_t len);

#endif
