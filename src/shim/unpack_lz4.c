/* unpack_lz4.c: one LZ4 block (unpack.h): sequences of a token, literals,
 * a 16-bit offset and a match; the last sequence is literals only. */
#include "shim/unpack.h"

/* An LZ4 length's extension bytes (255 means another follows), added to
 * *len; false if the input ends first. */
static bool tsr__lz4_len(const unsigned char *in, size_t n, size_t *at, size_t *len) {
  unsigned char b;
  do {
    if (*at >= n) return false;
    b = in[(*at)++];
    *len += b;
  } while (b == 255);
  return true;
}

/* Unpacks the LZ4 block in[0..n) into out[0..cap); *out_len: its size. */
bool tsr_unpack_lz4_block(const unsigned char *in, size_t n, unsigned char *out, size_t cap, size_t *out_len) {
  size_t i = 0, o = 0;
  for (;;) { /* every pass takes at least one input byte */
    if (i >= n) return false;
    unsigned token = in[i++];
    size_t lit = token >> 4;
    if (lit == 15 && !tsr__lz4_len(in, n, &i, &lit)) return false;
    if (lit > n - i || lit > cap - o) return false;
    memcpy(out + o, in + i, lit);
    i += lit;
    o += lit;
    if (i == n) break; /* the last sequence is literals only */
    if (n - i < 2) return false;
    size_t off = (size_t)in[i] | (size_t)in[i + 1] << 8, len = (token & 15u) + 4;
    i += 2;
    if ((token & 15u) == 15 && !tsr__lz4_len(in, n, &i, &len)) return false;
    if (off == 0 || off > o || len > cap - o) return false;
    for (size_t k = 0; k < len; k++, o++) out[o] = out[o - off];
  }
  *out_len = o;
  return true;
}
