/* wire.c: the compact, canonical wire encoding of a frontier and its strict
 * decoder (format in include/tessera/frontier.h).
 *
 * The decoder is written for hostile input: every read is bounds-checked
 * against `size`, the entry loop is bounded by a count that was checked
 * against the destination's capacity first, and anything that is not exactly
 * one canonical encoding is rejected. It is fuzzed by
 * tests/fuzz/frontier/fuzz_wire.c, which also checks encode(decode(x)) == x. */
#include "frontier/internal.h"

#define TSR__WIRE_VERSION 1u

/* ---- varints ------------------------------------------------------------ */

static size_t tsr__put_varint(uint8_t *buf, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  buf[n++] = (uint8_t)v;
  return n;
}

/* Reads one minimal LEB128 varint of at most 64 bits at data[*pos]. */
static tsr_frontier_wire_error_t tsr__get_varint(const uint8_t *data, size_t size, size_t *pos, uint64_t *out) {
  uint64_t v = 0;
  for (unsigned i = 0; i < 10; i++) {
    if (*pos >= size) return TSR_WIRE_TRUNCATED;
    uint8_t b = data[(*pos)++];
    if (i == 9 && b > 1) return TSR_WIRE_BAD_VARINT; /* past 64 bits */
    v |= (uint64_t)(b & 0x7F) << (7 * i);
    if (!(b & 0x80)) {
      if (b == 0 && i > 0) return TSR_WIRE_BAD_VARINT; /* not minimal */
      *out = v;
      return TSR_WIRE_OK;
    }
  }
  return TSR_WIRE_BAD_VARINT; /* 10 bytes, all with the continuation bit */
}

/* ---- encode ------------------------------------------------------------- */

size_t tsr_frontier_encode(const tsr_frontier_t *f, uint8_t *buf, size_t cap) {
  if (!f || !buf || f->count > TSR_FRONTIER_MAX_CAPACITY) return 0;
  uint8_t tmp[20];
  size_t n = 0;
  if (cap < 1) return 0;
  buf[n++] = (uint8_t)((TSR__WIRE_VERSION << 4) | (f->flags & TSR_FRONTIER_INCOMPLETE));
  size_t k = tsr__put_varint(tmp, f->count);
  if (cap - n < k) return 0;
  for (size_t j = 0; j < k; j++) buf[n++] = tmp[j];
  tsr_axis_t prev = 0;
  for (uint32_t i = 0; i < f->count; i++) {
    const tsr_frontier_entry_t *e = &f->entries[i];
    if (!tsr_axis_is_valid(e->axis) || e->epoch == 0) return 0;
    if (i > 0 && e->axis <= prev) return 0; /* not canonical: refuse */
    k = tsr__put_varint(tmp, e->axis - prev);
    k += tsr__put_varint(tmp + k, e->epoch);
    if (cap - n < k) return 0;
    for (size_t j = 0; j < k; j++) buf[n++] = tmp[j];
    prev = e->axis;
  }
  return n;
}

/* ---- decode ------------------------------------------------------------- */

static tsr_frontier_wire_error_t tsr__decode(const uint8_t *data, size_t size, tsr_frontier_t *out) {
  size_t pos = 0;
  if (size < 1) return TSR_WIRE_TRUNCATED;
  uint8_t head = data[pos++];
  if ((head >> 4) != TSR__WIRE_VERSION) return TSR_WIRE_BAD_VERSION;
  if (head & 0x0C) return TSR_WIRE_BAD_FLAGS;
  uint64_t count;
  tsr_frontier_wire_error_t err = tsr__get_varint(data, size, &pos, &count);
  if (err) return err;
  if (count > TSR_FRONTIER_MAX_CAPACITY) return TSR_WIRE_TOO_LARGE;
  if (count > out->capacity) return TSR_WIRE_CAPACITY;
  tsr_axis_t axis = 0;
  for (uint64_t i = 0; i < count; i++) {
    uint64_t delta, epoch;
    if ((err = tsr__get_varint(data, size, &pos, &delta))) return err;
    if ((err = tsr__get_varint(data, size, &pos, &epoch))) return err;
    if (delta == 0 || delta > UINT64_MAX - axis) return TSR_WIRE_UNSORTED;
    axis += delta;
    if (!tsr_axis_is_valid(axis)) return TSR_WIRE_BAD_AXIS;
    if (epoch == 0) return TSR_WIRE_ZERO_EPOCH;
    out->entries[i].axis = axis;
    out->entries[i].epoch = epoch;
  }
  if (pos != size) return TSR_WIRE_TRAILING;
  out->count = (uint16_t)count;
  out->flags = head & TSR_FRONTIER_INCOMPLETE;
  return TSR_WIRE_OK;
}

tsr_frontier_wire_error_t tsr_frontier_decode(const uint8_t *data, size_t size, tsr_frontier_t *out_frontier) {
  if (!out_frontier) return TSR_WIRE_NULL;
  tsr_frontier_wire_error_t err = (!data && size > 0) ? TSR_WIRE_NULL : tsr__decode(data, size, out_frontier);
  if (err) {
    /* Fail closed: an empty complete requirement would be dominated by all. */
    out_frontier->count = 0;
    out_frontier->flags = TSR_FRONTIER_INCOMPLETE;
  }
  return err;
}

const char *tsr_frontier_wire_error_name(tsr_frontier_wire_error_t error) {
  switch (error) {
    case TSR_WIRE_OK: return "ok";
    case TSR_WIRE_TRUNCATED: return "truncated";
    case TSR_WIRE_BAD_VERSION: return "bad_version";
    case TSR_WIRE_BAD_FLAGS: return "bad_flags";
    case TSR_WIRE_BAD_VARINT: return "bad_varint";
    case TSR_WIRE_TOO_LARGE: return "too_large";
    case TSR_WIRE_CAPACITY: return "capacity";
    case TSR_WIRE_UNSORTED: return "unsorted";
    case TSR_WIRE_BAD_AXIS: return "bad_axis";
    case TSR_WIRE_ZERO_EPOCH: return "zero_epoch";
    case TSR_WIRE_TRAILING: return "trailing";
    case TSR_WIRE_NULL: return "null";
  }
  return "unknown";
}
