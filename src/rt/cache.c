/* cache.c: the disk cache of compiled operators (see cache.h).
 *
 * Layout of the cache directory:
 *   <32 hex digits>          one entry: header, key fields, blob (cache.h)
 *   .tmp-<name>-<pid>-<n>    a store in progress (stale ones go at open)
 *
 * The directory belongs to the user and nobody else can write it
 * (tsr_rt_cache_open refuses one they could), but its files may still be
 * damaged, cut short by a full disk or a crash, or copied in by hand, so a
 * file is a hit only if its checksum, its lengths, its size and its key all
 * agree; anything else is a miss, and a damaged file is removed so that the
 * next store replaces it. */
#include "rt/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"

#define TSR__MAGIC "TSRRTC1" /* with its NUL, the 8 bytes every entry starts with */
#define TSR__VERSION 1u
#define TSR__HEADER_LEN 56
#define TSR__CHECKSUM_AT 48 /* the checksum is the header's last field */
#define TSR__TMP ".tmp-"
#define TSR__TMP_STALE_S 60 /* a writer takes well under a second; one older was killed */
#define TSR__NAME_LEN 32    /* 128 bits in hex */
#define TSR__TMP_TRIES 16

/* Seeds of the three hashes: two halves of an entry's name, its checksum. */
#define TSR__SEED_NAME_LO UINT64_C(0x243f6a8885a308d3)
#define TSR__SEED_NAME_HI UINT64_C(0x13198a2e03707344)
#define TSR__SEED_CHECKSUM UINT64_C(0xa4093822299f31d0)

struct tsr_rt_cache_s {
  char *dir;  /* absolute, no trailing slash */
  int dir_fd; /* every entry is opened relative to it, never by path */
};

/* Numbers the temporary files of this process, so that threads storing at
 * once never share one. */
static atomic_uint_fast64_t tsr__tmp_counter;

/* ---- hashing ------------------------------------------------------------------ */

/* A streaming 64-bit hash: 8-byte words folded in as xxHash64 folds its
 * short inputs, the total length appended, then SplitMix64's finalizer,
 * so that every input bit reaches every output bit. Not cryptographic: it
 * guards against damage, not against the user (who owns the directory). */
typedef struct tsr__hash_s {
  uint64_t h;
  uint64_t total;        /* bytes taken so far */
  unsigned char tail[8]; /* bytes not yet folded */
  size_t ntail;
} tsr__hash_t;

#define TSR__P1 UINT64_C(0x9e3779b185ebca87)
#define TSR__P2 UINT64_C(0xc2b2ae3d27d4eb4f)
#define TSR__P4 UINT64_C(0x85ebca77c2b2ae63)

static inline uint64_t tsr__rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t tsr__load_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static inline void tsr__store_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline void tsr__store_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t tsr__load_le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void tsr__hash_word(tsr__hash_t *s, uint64_t w) {
  s->h ^= tsr__rotl(w * TSR__P2, 31) * TSR__P1;
  s->h = tsr__rotl(s->h, 27) * TSR__P1 + TSR__P4;
}

static void tsr__hash_init(tsr__hash_t *s, uint64_t seed) {
  s->h = seed ^ TSR__P1;
  s->total = 0;
  s->ntail = 0;
}

static void tsr__hash_add(tsr__hash_t *s, const void *data, size_t len) {
  const unsigned char *p = data;
  s->total += len;
  if (s->ntail) {
    size_t n = 8 - s->ntail < len ? 8 - s->ntail : len;
    memcpy(s->tail + s->ntail, p, n);
    s->ntail += n;
    p += n;
    len -= n;
    if (s->ntail < 8) return;
    tsr__hash_word(s, tsr__load_le64(s->tail));
    s->ntail = 0;
  }
  for (; len >= 8; p += 8, len -= 8) tsr__hash_word(s, tsr__load_le64(p));
  memcpy(s->tail, p, len);
  s->ntail = len;
}

/* A u64 as 8 little-endian bytes: lengths framed this way keep ("ab", "c")
 * and ("a", "bc") apart. */
static void tsr__hash_add_u64(tsr__hash_t *s, uint64_t v) {
  unsigned char b[8];
  tsr__store_le64(b, v);
  tsr__hash_add(s, b, sizeof(b));
}

static uint64_t tsr__hash_end(const tsr__hash_t *s) {
  uint64_t h = s->h;
  if (s->ntail) {
    unsigned char last[8] = {0};
    memcpy(last, s->tail, s->ntail);
    h ^= tsr__rotl(tsr__load_le64(last) * TSR__P2, 31) * TSR__P1;
    h = tsr__rotl(h, 27) * TSR__P1 + TSR__P4;
  }
  h ^= s->total;
  h ^= h >> 30;
  h *= UINT64_C(0xbf58476d1ce4e5b9);
  h ^= h >> 27;
  h *= UINT64_C(0x94d049bb133111eb);
  h ^= h >> 31;
  return h;
}

/* ---- keys --------------------------------------------------------------------- */

/* A key's fields and their lengths, checked once. */
typedef struct tsr__key_s {
  const char *field[3]; /* source, options, arch */
  size_t len[3];
  size_t total;
  int driver_version;
} tsr__key_t;

static const char *const tsr__no_field[3] = {"has no source", "has no options", "has no arch"};

_Static_assert(TSR_RT_CACHE_KEY_MAX == (size_t)16 << 20, "tsr__key_take's message says 16 MiB");

/* NULL if `key` is usable, else why not ("has no arch"). */
static const char *tsr__key_take(const tsr_rt_cache_key_t *key, tsr__key_t *out_key) {
  if (!key) return "is missing";
  out_key->field[0] = key->source;
  out_key->field[1] = key->options;
  out_key->field[2] = key->arch;
  out_key->driver_version = key->driver_version;
  out_key->total = 0;
  for (int i = 0; i < 3; i++) {
    if (!out_key->field[i]) return tsr__no_field[i];
    /* strnlen: a source longer than the bound is not walked to its end */
    out_key->len[i] = strnlen(out_key->field[i], TSR_RT_CACHE_KEY_MAX + 1);
    out_key->total += out_key->len[i];
    if (out_key->total > TSR_RT_CACHE_KEY_MAX) return "is over 16 MiB";
  }
  return NULL;
}

/* The entry's file name: 128 bits of hash of everything in the key, in hex. */
static void tsr__entry_name(const tsr__key_t *k, char out[TSR__NAME_LEN + 1]) {
  uint64_t seeds[2] = {TSR__SEED_NAME_HI, TSR__SEED_NAME_LO};
  for (int half = 0; half < 2; half++) {
    tsr__hash_t s;
    tsr__hash_init(&s, seeds[half]);
    tsr__hash_add(&s, TSR__MAGIC, sizeof(TSR__MAGIC));
    tsr__hash_add_u64(&s, TSR__VERSION);
    for (int i = 0; i < 3; i++) {
      tsr__hash_add_u64(&s, k->len[i]);
      tsr__hash_add(&s, k->field[i], k->len[i]);
    }
    tsr__hash_add_u64(&s, (uint64_t)(int64_t)k->driver_version);
    snprintf(out + 16 * half, 17, "%016llx", (unsigned long long)tsr__hash_end(&s));
  }
}

/* ---- entries ------------------------------------------------------------------ */

/* The header of an entry holding `k` and a blob of `blob_len` bytes, its
 * checksum field left out (zero). */
static void tsr__header_fill(const tsr__key_t *k, size_t blob_len, unsigned char out[TSR__HEADER_LEN]) {
  memset(out, 0, TSR__HEADER_LEN);
  memcpy(out, TSR__MAGIC, sizeof(TSR__MAGIC));
  tsr__store_le32(out + 8, TSR__VERSION);
  tsr__store_le32(out + 12, (uint32_t)k->driver_version);
  for (int i = 0; i < 3; i++) tsr__store_le64(out + 16 + 8 * i, k->len[i]);
  tsr__store_le64(out + 40, blob_len);
}

/* The checksum of an entry: the header up to the checksum field (so that a
 * damaged version, length or driver version is caught like any other
 * byte), then the key fields and the blob as they lie in the file. */
static uint64_t tsr__checksum(const unsigned char *header, int nparts, const void *const *part,
                              const size_t *part_len) {
  tsr__hash_t s;
  tsr__hash_init(&s, TSR__SEED_CHECKSUM);
  tsr__hash_add(&s, header, TSR__CHECKSUM_AT);
  for (int i = 0; i < nparts; i++) tsr__hash_add(&s, part[i], part_len[i]);
  return tsr__hash_end(&s);
}

/* Reads exactly `len` bytes at `off`; false on an error or an early end. */
static bool tsr__pread_full(int fd, void *buf, size_t len, off_t off) {
  unsigned char *p = buf;
  while (len) {
    ssize_t r = pread(fd, p, len, off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    len -= (size_t)r;
    off += r;
  }
  return true;
}

TSR_MUST_USE static tsr_status_t tsr__write_full(int fd, const void *buf, size_t len) {
  const unsigned char *p = buf;
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return tsr_status_from_errno(errno, "write");
    p += w;
    len -= (size_t)w;
  }
  return NULL;
}

/* Removes damaged entry `name`, whose open file (if it could be opened) had
 * stat `opened`, and logs why, once. The name is removed only if it still
 * names that file: another process may have stored a good entry over it
 * since. */
static void tsr__discard(tsr_rt_cache_t *c, const char *name, const struct stat *opened, const char *why) {
  struct stat now;
  if (fstatat(c->dir_fd, name, &now, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (opened && (now.st_dev != opened->st_dev || now.st_ino != opened->st_ino)) return;
  tsr_log_debug("compiled-operator cache: removing %s/%s: %s", c->dir, name, why);
  unlinkat(c->dir_fd, name, S_ISDIR(now.st_mode) ? AT_REMOVEDIR : 0);
}

bool tsr_rt_cache_lookup(tsr_rt_cache_t *cache, const tsr_rt_cache_key_t *key, void **out_blob, size_t *out_len) {
  *out_blob = NULL;
  *out_len = 0;
  tsr__key_t k;
  if (!cache || tsr__key_take(key, &k)) return false;
  char name[TSR__NAME_LEN + 1];
  tsr__entry_name(&k, name);

  /* Opened as tsr_fs_read_file would (no symlink, no FIFO), but read here:
   * read_file's buffer is sized for the largest entry, 80 MiB per lookup,
   * where the header tells the exact sizes before anything is allocated. */
  int fd;
  struct stat sb;
  tsr_status_t st = tsr_fs_open_regular_stat(cache->dir_fd, name, O_RDONLY, 0, &fd, &sb);
  if (st) {
    tsr_status_code_t code = tsr_status_code(st);
    if (code == TSR_FAILED_PRECONDITION) /* a symlink, a FIFO, a directory */
      tsr__discard(cache, name, NULL, tsr_status_message(st));
    else if (code != TSR_NOT_FOUND) /* EMFILE and the like: not the entry's fault */
      tsr_log_debug("compiled-operator cache: %s", tsr_status_message(st));
    tsr_status_free(st);
    return false;
  }

  const char *why = NULL;
  char whybuf[160];
  unsigned char header[TSR__HEADER_LEN];
  unsigned char *key_bytes = NULL, *blob = NULL;
  uint64_t len[4] = {0}; /* source, options, arch, blob */
  uint64_t key_len = 0;
  if (sb.st_size < TSR__HEADER_LEN || !tsr__pread_full(fd, header, sizeof(header), 0)) {
    why = "shorter than its header";
    goto out;
  }
  if (memcmp(header, TSR__MAGIC, sizeof(TSR__MAGIC)) != 0) {
    why = "not an entry (bad magic)";
    goto out;
  }
  if (tsr__load_le32(header + 8) != TSR__VERSION) {
    snprintf(whybuf, sizeof(whybuf), "format version %u, not %u", tsr__load_le32(header + 8), TSR__VERSION);
    why = whybuf;
    goto out;
  }
  for (int i = 0; i < 4; i++) len[i] = tsr__load_le64(header + 16 + 8 * i);
  /* each bounded before they are added, so the sums cannot wrap */
  if (len[0] > TSR_RT_CACHE_KEY_MAX || len[1] > TSR_RT_CACHE_KEY_MAX || len[2] > TSR_RT_CACHE_KEY_MAX ||
      len[3] > TSR_RT_CACHE_BLOB_MAX || (key_len = len[0] + len[1] + len[2]) > TSR_RT_CACHE_KEY_MAX) {
    why = "lengths over the limits";
    goto out;
  }
  if ((uint64_t)sb.st_size != TSR__HEADER_LEN + key_len + len[3]) {
    snprintf(whybuf, sizeof(whybuf), "%lld bytes long, its header says %llu", (long long)sb.st_size,
             (unsigned long long)(TSR__HEADER_LEN + key_len + len[3]));
    why = whybuf;
    goto out;
  }
  key_bytes = malloc(key_len ? key_len : 1);
  blob = malloc(len[3] ? len[3] : 1);
  if (!key_bytes || !blob) goto out; /* a miss, and the entry is not at fault */
  unsigned char extra;
  if (!tsr__pread_full(fd, key_bytes, key_len, TSR__HEADER_LEN) ||
      !tsr__pread_full(fd, blob, len[3], (off_t)(TSR__HEADER_LEN + key_len)) ||
      pread(fd, &extra, 1, (off_t)(TSR__HEADER_LEN + key_len + len[3])) != 0) {
    why = "changed size while read";
    goto out;
  }
  const void *parts[2] = {key_bytes, blob};
  size_t part_lens[2] = {key_len, len[3]};
  if (tsr__checksum(header, 2, parts, part_lens) != tsr__load_le64(header + TSR__CHECKSUM_AT)) {
    why = "checksum does not match";
    goto out;
  }

  /* A whole entry: a hit only if it is this key's, byte for byte. */
  bool same = (int)tsr__load_le32(header + 12) == k.driver_version;
  size_t off = 0;
  for (int i = 0; same && i < 3; i++) {
    same = len[i] == k.len[i] && memcmp(key_bytes + off, k.field[i], k.len[i]) == 0;
    off += k.len[i];
  }
  if (!same) {
    tsr_log_debug("compiled-operator cache: %s/%s holds another key (a hash collision); a miss", cache->dir, name);
    goto out;
  }
  close(fd);
  free(key_bytes);
  *out_blob = blob;
  *out_len = len[3];
  return true;

out:
  if (why) tsr__discard(cache, name, &sb, why);
  close(fd);
  free(key_bytes);
  free(blob);
  return false;
}

tsr_status_t tsr_rt_cache_store(tsr_rt_cache_t *cache, const tsr_rt_cache_key_t *key, const void *blob, size_t len) {
  if (!cache) return tsr_status_make(TSR_INVALID_ARGUMENT, "no compiled-operator cache");
  tsr__key_t k;
  const char *bad = tsr__key_take(key, &k);
  if (bad) return tsr_status_make(TSR_INVALID_ARGUMENT, "compiled-operator cache key %s; not storing it", bad);
  if (len > TSR_RT_CACHE_BLOB_MAX)
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "compiled operator of %zu bytes is over the cache's limit of %zu; "
                           "not storing it",
                           len, TSR_RT_CACHE_BLOB_MAX);
  if (!blob && len) return tsr_status_make(TSR_INVALID_ARGUMENT, "compiled operator of %zu bytes is NULL", len);
  if (!blob) blob = "";

  char name[TSR__NAME_LEN + 1];
  tsr__entry_name(&k, name);
  unsigned char header[TSR__HEADER_LEN];
  tsr__header_fill(&k, len, header);
  const void *parts[4] = {k.field[0], k.field[1], k.field[2], blob};
  size_t part_lens[4] = {k.len[0], k.len[1], k.len[2], len};
  tsr__store_le64(header + TSR__CHECKSUM_AT, tsr__checksum(header, 4, parts, part_lens));

  /* A name of our own: a store from another thread or process never
   * writes into this file, and O_EXCL never writes into one it did not
   * make (a leftover of an earlier process of the same pid is skipped). */
  char tmp[TSR__NAME_LEN + 64];
  int fd = -1;
  tsr_status_t st = NULL;
  for (int tries = 0; fd < 0; tries++) {
    unsigned long long n = atomic_fetch_add_explicit(&tsr__tmp_counter, 1, memory_order_relaxed);
    snprintf(tmp, sizeof(tmp), TSR__TMP "%s-%ld-%llu", name, (long)getpid(), n);
    st = tsr_fs_open_regular(cache->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600, &fd);
    if (!st) break;
    if (tsr_status_code(st) != TSR_ALREADY_EXISTS || tries + 1 == TSR__TMP_TRIES)
      return tsr_status_annotate(st, "compiled-operator cache %s", cache->dir);
    tsr_status_free(st);
  }

  /* 0600 whatever the umask: the code is the user's alone */
  if (fchmod(fd, 0600) != 0) st = tsr_status_from_errno(errno, "chmod");
  if (!st) st = tsr__write_full(fd, header, sizeof(header));
  for (int i = 0; !st && i < 3; i++) st = tsr__write_full(fd, k.field[i], k.len[i]);
  if (!st) st = tsr__write_full(fd, blob, len);
  /* Synced before the rename, so that after a crash the name holds the
   * whole entry or the previous one, never a file still being filled. The
   * directory is not synced: losing the rename to a power cut only costs a
   * compile. */
  if (!st && fdatasync(fd) != 0) st = tsr_status_from_errno(errno, "sync");
  if (close(fd) != 0 && !st) st = tsr_status_from_errno(errno, "close");
  if (!st && renameat(cache->dir_fd, tmp, cache->dir_fd, name) != 0)
    st = tsr_status_from_errno(errno, "rename to %s", name);
  if (st) {
    unlinkat(cache->dir_fd, tmp, 0);
    return tsr_status_annotate(st, "compiled-operator cache: storing %s/%s", cache->dir, tmp);
  }
  return NULL;
}

/* ---- the directory ------------------------------------------------------------ */

/* The default directory (cache.h) into buf (PATH_MAX bytes). */
TSR_MUST_USE static tsr_status_t tsr__default_dir(char *buf) {
  /* XDG: a relative XDG_CACHE_HOME is invalid and must be ignored */
  const char *base = getenv("XDG_CACHE_HOME");
  const char *tail = "/tessera";
  if (!base || base[0] != '/') {
    base = getenv("HOME");
    tail = "/.cache/tessera";
    if (!base || base[0] != '/')
      return tsr_status_make(TSR_FAILED_PRECONDITION,
                             "no compiled-operator cache directory: neither XDG_CACHE_HOME nor "
                             "HOME is an absolute path");
  }
  size_t n = strlen(base);
  while (n && base[n - 1] == '/') n--; /* "/" and "/home/u/" alike */
  size_t tail_len = strlen(tail);
  if (n + tail_len >= PATH_MAX)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "compiled-operator cache path is too long");
  memcpy(buf, base, n);
  memcpy(buf + n, tail, tail_len + 1); /* with its NUL: n + tail_len < PATH_MAX */
  return NULL;
}

/* Removes the temporary files of stores that were killed (older than
 * TSR__TMP_STALE_S: one that is younger may be a store in progress). */
static void tsr__sweep(tsr_rt_cache_t *c) {
  int fd = dup(c->dir_fd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    return;
  }
  time_t now = time(NULL);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, TSR__TMP, strlen(TSR__TMP)) != 0) continue;
    struct stat sb;
    if (fstatat(c->dir_fd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(sb.st_mode)) continue;
    if (now - sb.st_mtime <= TSR__TMP_STALE_S) continue;
    if (unlinkat(c->dir_fd, e->d_name, 0) == 0)
      tsr_log_debug("compiled-operator cache: removed %s/%s, left by a store that did not finish", c->dir, e->d_name);
  }
  closedir(d);
}

tsr_status_t tsr_rt_cache_open(const char *dir, tsr_rt_cache_t **out_cache) {
  *out_cache = NULL;
  char path[PATH_MAX];
  if (dir) {
    if (dir[0] != '/')
      return tsr_status_make(TSR_INVALID_ARGUMENT, "compiled-operator cache directory '%s' is not an absolute path",
                             dir);
    size_t n = strlen(dir);
    if (n >= PATH_MAX) return tsr_status_make(TSR_INVALID_ARGUMENT, "compiled-operator cache path is too long");
    memcpy(path, dir, n + 1);
    while (n > 1 && path[n - 1] == '/') path[--n] = '\0';
  } else {
    TSR_RETURN_IF_ERROR(tsr__default_dir(path));
  }
  TSR_RETURN_IF_ERROR(tsr_fs_make_private_dir(path, 0700, "compiled-operator cache directory"));

  /* The checks above went by path; this binds the descriptor every entry
   * is opened through to a directory that passes them too. */
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return tsr_status_from_errno(errno, "open compiled-operator cache directory %s", path);
  struct stat sb;
  if (fstat(fd, &sb) != 0 || sb.st_uid != geteuid() || (sb.st_mode & (S_IWGRP | S_IWOTH))) {
    close(fd);
    return tsr_status_make(TSR_FAILED_PRECONDITION, "compiled-operator cache directory %s changed while it was opened",
                           path);
  }
  tsr_rt_cache_t *c = calloc(1, sizeof(*c));
  char *copy = strdup(path);
  if (!c || !copy) {
    free(c);
    free(copy);
    close(fd);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory opening the compiled-operator cache");
  }
  c->dir = copy;
  c->dir_fd = fd;
  tsr__sweep(c);
  *out_cache = c;
  return NULL;
}

void tsr_rt_cache_close(tsr_rt_cache_t *cache) {
  if (!cache) return;
  close(cache->dir_fd);
  free(cache->dir);
  free(cache);
}

const char *tsr_rt_cache_dir(const tsr_rt_cache_t *cache) { return cache->dir; }
