/* unpack_zstd.c: zstd frames (RFC 8878; unpack.h): raw, RLE and compressed
 * blocks; literals raw, RLE or Huffman-coded in one or four streams;
 * sequences with predefined, RLE, FSE-described or repeated tables.
 * Skippable frames are skipped; a frame that needs a dictionary is refused. */
#include "shim/unpack.h"

#include <stdlib.h>

#define TSR__ZB_MAX ((size_t)128 << 10) /* a block's largest content */
#define TSR__HUF_BITS 11                /* a Huffman code's longest */

/* One state of an FSE table: the symbol it gives, and how the next state
 * is found (base plus `bits` bits read). */
typedef struct {
  uint8_t sym, bits;
  uint16_t base;
} tsr__fse_cell_t;

typedef struct {
  unsigned log; /* accuracy: 1 << log states */
  tsr__fse_cell_t cell[512];
} tsr__fse_t;

/* A Huffman table: max_bits 0 until a block gives one. */
typedef struct {
  unsigned max_bits;
  uint8_t sym[1 << TSR__HUF_BITS], bits[1 << TSR__HUF_BITS];
} tsr__huf_t;

/* What a frame's blocks share, and a block's literals (heap: too big for
 * a stack the shim does not own). */
typedef struct {
  unsigned char lit[TSR__ZB_MAX + 16]; /* 16: room for tsr__copy16 to read past the end */
  tsr__huf_t huf;
  tsr__fse_t ll, of, ml, scratch; /* scratch: a Huffman table's weights */
  bool have_ll, have_of, have_ml;
  uint64_t rep[3];
} tsr__zstd_t;

static unsigned tsr__top_bit(uint32_t v) { /* v > 0 */
  unsigned b = 0;
  while (v >>= 1) b++;
  return b;
}

/* Bits [at, at + count) of p[0..n), least significant first; those before
 * 0 or past n bytes read as 0. count <= 32. */
static uint32_t tsr__bits_at(const unsigned char *p, size_t n, int64_t at, unsigned count) {
  if (count == 0) return 0;
  unsigned low = 0;
  if (at < 0) {
    if ((uint64_t)-at >= count) return 0;
    low = (unsigned)-at;
    count -= low;
    at = 0;
  }
  size_t byte = (size_t)at >> 3;
  uint64_t v = 0;
  if (byte < n && n - byte >= 8)
    v = tsr_le64(p + byte);
  else
    for (size_t k = 0; byte + k < n && k < 8; k++) v |= (uint64_t)p[byte + k] << (8 * k);
  v = (v >> (at & 7)) & (((uint64_t)1 << count) - 1);
  return (uint32_t)(v << low);
}

/* A backward bit stream (Huffman and FSE streams are read from their last
 * bit down); `at` goes below 0 when read past its start. */
typedef struct {
  const unsigned char *p;
  size_t n;
  int64_t at;
} tsr__back_t;

static bool tsr__back_init(tsr__back_t *b, const unsigned char *p, size_t n) {
  if (n == 0 || p[n - 1] == 0) return false; /* the last byte holds the start mark */
  b->p = p;
  b->n = n;
  b->at = (int64_t)(n - 1) * 8 + tsr__top_bit(p[n - 1]);
  return true;
}

static inline uint32_t tsr__back(tsr__back_t *b, unsigned count) {
  b->at -= count;
  size_t byte = (size_t)b->at >> 3;
  if (b->at >= 0 && byte + 8 <= b->n) /* the common case: one load */
    return (uint32_t)((tsr_le64(b->p + byte) >> (b->at & 7)) & (((uint64_t)1 << count) - 1));
  return tsr__bits_at(b->p, b->n, b->at, count);
}

static void tsr__fse_next(const tsr__fse_t *t, uint16_t *state, tsr__back_t *b) {
  const tsr__fse_cell_t *c = &t->cell[*state];
  *state = (uint16_t)(c->base + tsr__back(b, c->bits));
}

/* Spreads the probabilities prob[0..nsym) (-1: "less than 1") over the
 * 1 << log states. Their sum is 1 << log (tsr__fse_read checked it). */
static void tsr__fse_build(tsr__fse_t *t, const int16_t *prob, unsigned nsym, unsigned log) {
  uint32_t size = 1u << log, mask = size - 1, step = (size >> 1) + (size >> 3) + 3;
  int32_t high = (int32_t)size - 1;
  uint16_t next[256] = {0};
  t->log = log;
  for (unsigned s = 0; s < nsym; s++)
    if (prob[s] == -1) {
      t->cell[high--].sym = (uint8_t)s;
      next[s] = 1;
    }
  uint32_t pos = 0;
  for (unsigned s = 0; s < nsym; s++) {
    if (prob[s] <= 0) continue;
    next[s] = (uint16_t)prob[s];
    for (int16_t k = 0; k < prob[s]; k++) {
      t->cell[pos].sym = (uint8_t)s;
      /* step is odd, so this visits every state; high >= 0 here */
      do pos = (pos + step) & mask;
      while ((int32_t)pos > high);
    }
  }
  for (uint32_t i = 0; i < size; i++) {
    uint32_t x = next[t->cell[i].sym]++;
    unsigned bits = log - tsr__top_bit(x);
    t->cell[i].bits = (uint8_t)bits;
    t->cell[i].base = (uint16_t)((x << bits) - size);
  }
}

/* An FSE table description at p[0..n): returns the bytes it took, 0 if it
 * is not one (accuracy over max_log, a symbol past max_sym, a sum that is
 * not 1 << log, or more bits than n). */
static size_t tsr__fse_read(tsr__fse_t *t, const unsigned char *p, size_t n, unsigned max_log, unsigned max_sym) {
  if (n == 0) return 0;
  unsigned log = (p[0] & 15u) + 5;
  if (log > max_log) return 0;
  int16_t prob[256];
  int64_t at = 4;
  int32_t remaining = 1 << log;
  unsigned nsym = 0;
  while (remaining > 0) {
    if (nsym > max_sym || at > (int64_t)n * 8) return 0;
    unsigned bits = tsr__top_bit((uint32_t)remaining + 1) + 1;
    uint32_t lower = (1u << (bits - 1)) - 1, threshold = (1u << bits) - 1 - ((uint32_t)remaining + 1);
    uint32_t v = tsr__bits_at(p, n, at, bits);
    if ((v & lower) < threshold) {
      v &= lower;
      at += bits - 1;
    } else {
      if (v > lower) v -= threshold;
      at += bits;
    }
    int32_t pr = (int32_t)v - 1;
    remaining -= pr < 0 ? -pr : pr;
    prob[nsym++] = (int16_t)pr;
    if (pr != 0) continue;
    for (;;) { /* zeros: a 2-bit count of more, 3 meaning another count follows */
      uint32_t more = tsr__bits_at(p, n, at, 2);
      at += 2;
      if (more > max_sym + 1 - nsym || at > (int64_t)n * 8) return 0;
      for (uint32_t k = 0; k < more; k++) prob[nsym++] = 0;
      if (more != 3) break;
    }
  }
  if (remaining != 0 || at > (int64_t)n * 8) return 0;
  tsr__fse_build(t, prob, nsym, log);
  return (size_t)(at + 7) / 8;
}

static void tsr__fse_rle(tsr__fse_t *t, uint8_t sym) {
  t->log = 0;
  t->cell[0] = (tsr__fse_cell_t){sym, 0, 0};
}

/* A Huffman table description at p[0..n) into h; *used: its bytes. */
static bool tsr__huf_read(tsr__zstd_t *z, const unsigned char *p, size_t n, size_t *used) {
  uint8_t w[256];
  unsigned nw = 0;
  if (n == 0) return false;
  unsigned head = p[0];
  if (head < 128) { /* FSE-compressed weights in the next `head` bytes */
    tsr__fse_t *t = &z->scratch;
    if (head == 0 || head > n - 1) return false;
    size_t k = tsr__fse_read(t, p + 1, head, 6, 255);
    tsr__back_t b;
    if (k == 0 || k >= head || !tsr__back_init(&b, p + 1 + k, head - k)) return false;
    uint16_t s[2];
    s[0] = (uint16_t)tsr__back(&b, t->log);
    s[1] = (uint16_t)tsr__back(&b, t->log);
    for (unsigned j = 0;; j ^= 1) { /* two states in turn, until the stream runs out */
      if (nw >= 255) return false;
      w[nw++] = t->cell[s[j]].sym;
      tsr__fse_next(t, &s[j], &b);
      if (b.at < 0) {
        if (nw >= 255) return false;
        w[nw++] = t->cell[s[j ^ 1]].sym;
        break;
      }
    }
    *used = 1 + (size_t)head;
  } else { /* 4-bit weights, two a byte */
    nw = head - 127;
    if ((nw + 1) / 2 > n - 1) return false;
    for (unsigned k = 0; k < nw; k++) w[k] = (uint8_t)(k % 2 ? p[1 + k / 2] & 15 : p[1 + k / 2] >> 4);
    *used = 1 + (size_t)(nw + 1) / 2;
  }
  /* the last symbol's weight is what makes the total a power of 2 */
  uint32_t total = 0;
  for (unsigned k = 0; k < nw; k++) {
    if (w[k] > TSR__HUF_BITS) return false;
    if (w[k]) total += 1u << (w[k] - 1);
  }
  if (total == 0) return false;
  unsigned max_bits = tsr__top_bit(total) + 1;
  uint32_t left = (1u << max_bits) - total;
  if (max_bits > TSR__HUF_BITS || (left & (left - 1)) != 0) return false;
  w[nw++] = (uint8_t)(tsr__top_bit(left) + 1);
  /* codes: the longest first, each symbol a run of 1 << (max_bits - bits) */
  uint32_t count[TSR__HUF_BITS + 2] = {0}, start[TSR__HUF_BITS + 2];
  for (unsigned k = 0; k < nw; k++)
    if (w[k]) count[max_bits + 1 - w[k]]++;
  start[max_bits] = 0;
  for (unsigned bits = max_bits; bits >= 1; bits--) start[bits - 1] = start[bits] + (count[bits] << (max_bits - bits));
  if (start[0] != 1u << max_bits) return false;
  tsr__huf_t *h = &z->huf;
  for (unsigned k = 0; k < nw; k++) {
    if (!w[k]) continue;
    unsigned bits = max_bits + 1 - w[k];
    uint32_t run = 1u << (max_bits - bits);
    memset(h->sym + start[bits], (int)k, run);
    memset(h->bits + start[bits], (int)bits, run);
    start[bits] += run;
  }
  h->max_bits = max_bits;
  return true;
}

/* The next literal of a Huffman stream: the code in the max_bits bits
 * below those read so far (b->at), then its length read. */
static inline unsigned char tsr__huf_next(const tsr__huf_t *h, tsr__back_t *b) {
  int64_t below = b->at - h->max_bits;
  uint32_t code = below >= 0 && (size_t)below / 8 + 8 <= b->n
                      ? (uint32_t)((tsr_le64(b->p + below / 8) >> (below & 7)) & ((1u << h->max_bits) - 1))
                      : tsr__bits_at(b->p, b->n, below, h->max_bits);
  b->at -= h->bits[code];
  return h->sym[code];
}

/* Huffman streams s[0..nstreams) of part literals each (the last one
 * `last` <= part) into out, `part` apart; the four of a block decode in
 * step, as they do not depend on each other. Each must end exactly at its
 * first bit. */
static bool tsr__huf_streams(const tsr__huf_t *h, tsr__back_t *s, unsigned nstreams, unsigned char *out, size_t part,
                             size_t last) {
  if (nstreams == 4)
    for (size_t k = 0; k < last; k++) {
      out[k] = tsr__huf_next(h, &s[0]);
      out[part + k] = tsr__huf_next(h, &s[1]);
      out[2 * part + k] = tsr__huf_next(h, &s[2]);
      out[3 * part + k] = tsr__huf_next(h, &s[3]);
    }
  for (unsigned j = 0; j < nstreams; j++) {
    size_t from = nstreams == 4 ? last : 0, to = j + 1 == nstreams ? last : part;
    for (size_t k = from; k < to; k++) out[j * part + k] = tsr__huf_next(h, &s[j]);
    if (s[j].at != 0) return false;
  }
  return true;
}

/* A block's literals section at p[0..n) into z->lit; *used: its bytes. */
static bool tsr__zstd_literals(tsr__zstd_t *z, const unsigned char *p, size_t n, size_t *used, size_t *count) {
  if (n == 0) return false;
  unsigned type = p[0] & 3u, form = (p[0] >> 2) & 3u;
  size_t head, size;
  if (type < 2) {                             /* raw or RLE */
    head = form == 1 ? 2 : form == 3 ? 3 : 1; /* 5, 12 or 20 bits of size */
    if (head > n) return false;
    size = head == 1 ? (size_t)p[0] >> 3 : (size_t)(p[0] >> 4) | (size_t)p[1] << 4;
    if (head == 3) size |= (size_t)p[2] << 12;
    if (size > TSR__ZB_MAX) return false;
    if (type == 0) {
      if (size > n - head) return false;
      memcpy(z->lit, p + head, size);
      *used = head + size;
    } else {
      if (n - head < 1) return false;
      memset(z->lit, p[head], size);
      *used = head + 1;
    }
    *count = size;
    return true;
  }
  /* Huffman-coded, with a new table (2) or the last one (3) */
  head = form < 2 ? 3 : form == 2 ? 4 : 5;
  if (head > n) return false;
  uint64_t h = 0;
  for (size_t k = 0; k < head; k++) h |= (uint64_t)p[k] << (8 * k);
  unsigned width = form < 2 ? 10 : form == 2 ? 14 : 18;
  size = (size_t)(h >> 4) & ((1u << width) - 1);
  size_t packed = (size_t)(h >> (4 + width)) & ((1u << width) - 1);
  if (size > TSR__ZB_MAX || packed > n - head) return false;
  const unsigned char *c = p + head;
  size_t cn = packed;
  if (type == 2) {
    size_t tu;
    if (!tsr__huf_read(z, c, cn, &tu)) return false;
    c += tu;
    cn -= tu;
  } else if (z->huf.max_bits == 0) {
    return false;
  }
  tsr__back_t streams[4];
  bool ok;
  if (form == 0) {
    ok = tsr__back_init(&streams[0], c, cn) && tsr__huf_streams(&z->huf, streams, 1, z->lit, size, size);
  } else { /* four streams, the first three's sizes in a 6-byte jump table */
    size_t part = (size + 3) / 4, at = 6;
    ok = cn >= 6 && 3 * part <= size;
    for (unsigned k = 0; ok && k < 4; k++) {
      size_t sn = k < 3 ? tsr_le16(c + 2 * k) : cn - at;
      ok = sn <= cn - at && tsr__back_init(&streams[k], c + at, sn);
      at += sn;
    }
    ok = ok && tsr__huf_streams(&z->huf, streams, 4, z->lit, part, size - 3 * part);
  }
  if (!ok) return false;
  *used = head + packed;
  *count = size;
  return true;
}

/* Literal length and match length codes: baseline and extra bits. */
static const uint32_t tsr__ll_base[36] = {0,  1,  2,   3,   4,   5,    6,    7,    8,    9,     10,    11,
                                          12, 13, 14,  15,  16,  18,   20,   22,   24,   28,    32,    40,
                                          48, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
static const uint8_t tsr__ll_bits[36] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  0,  0,  0,  1,  1,
                                         1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint32_t tsr__ml_base[53] = {3,  4,   5,   6,   7,    8,    9,    10,   11,    12,    13,   14, 15, 16,
                                          17, 18,  19,  20,  21,   22,   23,   24,   25,    26,    27,   28, 29, 30,
                                          31, 32,  33,  34,  35,   37,   39,   41,   43,    47,    51,   59, 67, 83,
                                          99, 131, 259, 515, 1027, 2051, 4099, 8195, 16387, 32771, 65539};
static const uint8_t tsr__ml_bits[53] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  0,  0,  0,  0,  0, 0,
                                         0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  0,  0,  1,  1,  1, 1,
                                         2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
/* The predefined distributions (mode 0). */
static const int16_t tsr__ll_default[36] = {4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1,  1,  2,  2,
                                            2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1};
static const int16_t tsr__ml_default[53] = {1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1,  1,  1,  1,  1,  1,  1, 1,
                                            1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  1,  1,  1,  1,  1,  1, 1,
                                            1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1};
static const int16_t tsr__of_default[29] = {1, 1, 1, 1, 1, 1, 2, 2, 2, 1,  1,  1,  1,  1, 1,
                                            1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1};

/* One of a sequences section's three tables, by its 2-bit mode:
 * predefined, one symbol (RLE), described here, or the frame's last. */
static bool tsr__zstd_table(tsr__fse_t *t, bool *have, unsigned mode, const int16_t *def, unsigned ndef,
                            unsigned def_log, unsigned max_log, unsigned max_sym, const unsigned char *p, size_t n,
                            size_t *at) {
  if (mode == 0)
    tsr__fse_build(t, def, ndef, def_log);
  else if (mode == 1) {
    if (*at >= n || p[*at] > max_sym) return false;
    tsr__fse_rle(t, p[(*at)++]);
  } else if (mode == 2) {
    size_t k = tsr__fse_read(t, p + *at, n - *at, max_log, max_sym);
    if (k == 0) return false;
    *at += k;
  } else if (!*have) {
    return false;
  }
  *have = true;
  return true;
}

/* The output so far is out[0..*o); this frame's begins at `start`. */
typedef struct {
  unsigned char *out;
  size_t cap, o, start;
} tsr__sink_t;

/* Copies len bytes 16 at a time: writes up to 15 bytes past to + len (the
 * caller has that room) and reads as far past from + len; where the two
 * overlap, `from` is at least 16 bytes behind `to`, so every chunk reads
 * bytes already written. Short copies are most of a block's: this is
 * several times faster than a memcpy call for each. */
static inline void tsr__copy16(unsigned char *to, const unsigned char *from, size_t len) {
  for (size_t k = 0; k < len; k += 16) memcpy(to + k, from + k, 16);
}

/* Puts len bytes from lit; `padded`: lit may be read 16 bytes past its
 * end (a block's literals, in tsr__zstd_t.lit), so short copies are fast. */
static bool tsr__put_literals(tsr__sink_t *s, const unsigned char *lit, size_t len, bool padded) {
  if (len > s->cap - s->o) return false;
  if (padded && s->cap - s->o - len >= 16)
    tsr__copy16(s->out + s->o, lit, len);
  else
    memcpy(s->out + s->o, lit, len);
  s->o += len;
  return true;
}
static bool tsr__put_match(tsr__sink_t *s, uint64_t off, uint64_t len) {
  if (off == 0 || off > s->o - s->start || len > s->cap - s->o) return false;
  unsigned char *to = s->out + s->o, *from = to - off;
  if (off >= 16 && s->cap - s->o - len >= 16)
    tsr__copy16(to, from, (size_t)len);
  else if (off >= len)
    memcpy(to, from, (size_t)len);
  else /* overlapping: a byte at a time repeats the pattern */
    for (size_t k = 0; k < (size_t)len; k++) to[k] = from[k];
  s->o += (size_t)len;
  return true;
}
static bool tsr__zstd_block(tsr__zstd_t *z, const unsigned char *p, size_t n, tsr__sink_t *s) {
  size_t at, nlit, lit = 0;
  if (!tsr__zstd_literals(z, p, n, &at, &nlit)) return false;
  if (at >= n) return false; /* the sequences section has at least its count */
  uint32_t nseq = p[at++];
  if (nseq >= 128) {
    if (at >= n) return false;
    if (nseq < 255)
      nseq = ((nseq - 128) << 8) + p[at++];
    else {
      if (n - at < 2) return false;
      nseq = p[at] + ((uint32_t)p[at + 1] << 8) + 0x7F00;
      at += 2;
    }
  }
  if (nseq == 0) return tsr__put_literals(s, z->lit, nlit, true);
  if (at >= n) return false;
  unsigned modes = p[at++];
  if (modes & 3u) return false;
  if (!tsr__zstd_table(&z->ll, &z->have_ll, modes >> 6, tsr__ll_default, 36, 6, 9, 35, p, n, &at) ||
      !tsr__zstd_table(&z->of, &z->have_of, (modes >> 4) & 3u, tsr__of_default, 29, 5, 8, 31, p, n, &at) ||
      !tsr__zstd_table(&z->ml, &z->have_ml, (modes >> 2) & 3u, tsr__ml_default, 53, 6, 9, 52, p, n, &at))
    return false;
  tsr__back_t b;
  if (!tsr__back_init(&b, p + at, n - at)) return false;
  uint16_t sll = (uint16_t)tsr__back(&b, z->ll.log), sof = (uint16_t)tsr__back(&b, z->of.log),
           sml = (uint16_t)tsr__back(&b, z->ml.log);
  for (uint32_t k = 0; k < nseq; k++) {
    unsigned llc = z->ll.cell[sll].sym, ofc = z->of.cell[sof].sym, mlc = z->ml.cell[sml].sym;
    uint64_t ofv = ((uint64_t)1 << ofc) + tsr__back(&b, ofc);
    uint64_t ml = tsr__ml_base[mlc] + tsr__back(&b, tsr__ml_bits[mlc]);
    uint64_t ll = tsr__ll_base[llc] + tsr__back(&b, tsr__ll_bits[llc]);
    if (k + 1 < nseq) {
      tsr__fse_next(&z->ll, &sll, &b);
      tsr__fse_next(&z->ml, &sml, &b);
      tsr__fse_next(&z->of, &sof, &b);
    }
    if (b.at < 0) return false;
    uint64_t off;
    if (ofv > 3) { /* a new offset */
      off = ofv - 3;
      z->rep[2] = z->rep[1];
      z->rep[1] = z->rep[0];
      z->rep[0] = off;
    } else { /* a repeated one: with no literals, shifted by one */
      unsigned r = (unsigned)ofv - 1 + (ll == 0);
      if (r == 0)
        off = z->rep[0];
      else {
        off = r == 3 ? z->rep[0] - 1 : z->rep[r];
        if (r > 1) z->rep[2] = z->rep[1];
        z->rep[1] = z->rep[0];
        z->rep[0] = off;
      }
    }
    if (ll > nlit - lit || !tsr__put_literals(s, z->lit + lit, (size_t)ll, true) || !tsr__put_match(s, off, ml))
      return false;
    lit += (size_t)ll;
  }
  return b.at == 0 && tsr__put_literals(s, z->lit + lit, nlit - lit, true);
}

/* One frame at in[*i..n) into s; no dictionary. */
static bool tsr__zstd_frame(tsr__zstd_t *z, const unsigned char *in, size_t n, size_t *i, tsr__sink_t *s) {
  if (*i >= n) return false;
  unsigned fhd = in[(*i)++];
  unsigned fcs_flag = fhd >> 6, single = (fhd >> 5) & 1u, sum = (fhd >> 2) & 1u, dict = fhd & 3u;
  static const unsigned dict_len[4] = {0, 1, 2, 4}, fcs_len[4] = {0, 2, 4, 8};
  size_t fcs_n = fcs_flag == 0 && single ? 1 : fcs_len[fcs_flag];
  if ((fhd & 8u) || (size_t)!single + dict_len[dict] + fcs_n > n - *i) return false;
  *i += !single; /* the window: this output is one buffer */
  uint64_t id = 0, fcs = 0;
  for (unsigned k = 0; k < dict_len[dict]; k++) id |= (uint64_t)in[(*i)++] << (8 * k);
  for (unsigned k = 0; k < fcs_n; k++) fcs |= (uint64_t)in[(*i)++] << (8 * k);
  if (id != 0) return false;
  if (fcs_n == 2) fcs += 256;
  s->start = s->o;
  z->huf.max_bits = 0;
  z->have_ll = z->have_of = z->have_ml = false;
  z->rep[0] = 1, z->rep[1] = 4, z->rep[2] = 8;
  for (bool last = false; !last;) { /* every block takes at least 3 input bytes */
    if (n - *i < 3) return false;
    uint32_t h = in[*i] | (uint32_t)in[*i + 1] << 8 | (uint32_t)in[*i + 2] << 16;
    *i += 3;
    last = h & 1u;
    size_t size = h >> 3;
    switch ((h >> 1) & 3u) {
      case 0: /* raw */
        if (size > n - *i || !tsr__put_literals(s, in + *i, size, false)) return false;
        *i += size;
        break;
      case 1: /* one byte, `size` times */
        if (n - *i < 1 || size > s->cap - s->o) return false;
        memset(s->out + s->o, in[*i], size);
        s->o += size;
        *i += 1;
        break;
      case 2:
        if (size > TSR__ZB_MAX || size > n - *i || !tsr__zstd_block(z, in + *i, size, s)) return false;
        *i += size;
        break;
      default: return false;
    }
  }
  if (fcs_n && s->o - s->start != fcs) return false;
  if (sum) { /* the content checksum: not checked, the driver took the image */
    if (n - *i < 4) return false;
    *i += 4;
  }
  return true;
}

/* Unpacks the zstd frames in[0..n) (skippable ones skipped) into
 * out[0..cap); *out_len: their size. */
bool tsr_unpack_zstd(const unsigned char *in, size_t n, unsigned char *out, size_t cap, size_t *out_len) {
  tsr__zstd_t *z = malloc(sizeof(*z));
  tsr__sink_t s = {out, cap, 0, 0};
  size_t i = 0;
  bool ok = z && n > 0;
  while (ok && i < n) {
    uint32_t magic = n - i >= 4 ? tsr_le32(in + i) : 0;
    if ((magic & 0xFFFFFFF0u) == 0x184D2A50u && n - i >= 8 && tsr_le32(in + i + 4) <= n - i - 8) {
      i += 8 + (size_t)tsr_le32(in + i + 4);
    } else if (magic == 0xFD2FB528u) {
      i += 4;
      ok = tsr__zstd_frame(z, in, n, &i, &s);
    } else {
      ok = false;
    }
  }
  free(z);
  *out_len = s.o;
  return ok;
}
