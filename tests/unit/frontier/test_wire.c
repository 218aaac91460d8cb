/* test_wire.c: the wire encoding round-trips and the decoder rejects every
 * malformed input it is shown (tests/fuzz/frontier runs the random search). */
#include "helpers.h"

static size_t enc(const tsr_frontier_t *f, uint8_t *buf, size_t cap) {
  size_t n = tsr_frontier_encode(f, buf, cap);
  cr_assert_gt(n, 0);
  return n;
}

static tsr_frontier_wire_error_t dec(const uint8_t *b, size_t n, uint32_t cap) {
  tf_storage_t st;
  tsr_frontier_t *f = tsr_frontier_init(&st, cap, TSR_FRONTIER_REQUIREMENT);
  tsr_frontier_wire_error_t e = tsr_frontier_decode(b, n, f);
  if (e != TSR_WIRE_OK) {
    /* fail closed: empty and incomplete */
    cr_assert_eq(tsr_frontier_count(f), 0);
    cr_assert_not(tsr_frontier_is_complete(f));
  } else {
    cr_assert(tsr_frontier_is_valid(f));
  }
  return e;
}

Test(wire, round_trip_exact_bytes) {
  tf_storage_t s1, s2;
  tsr_frontier_t *f =
      K(&s1, 3, E(AX_A, 5), E(AX_B, 300),
        E(tsr_axis_make(255, TSR_AXIS_DOMAIN_EXTERNAL, TSR_AXIS_SESSION_MAX, TSR_AXIS_ORDINAL_MAX), UINT64_MAX));
  f->flags = TSR_FRONTIER_TAINTED;
  uint8_t buf[128];
  size_t n = enc(f, buf, sizeof buf);
  cr_assert_leq(n, tsr_frontier_wire_size_max(3));
  tsr_frontier_t *g = tsr_frontier_init(&s2, 16, TSR_FRONTIER_KNOWLEDGE);
  cr_assert_eq(tsr_frontier_decode(buf, n, g), TSR_WIRE_OK);
  cr_assert(tsr_frontier_equal(f, g));
  cr_assert_eq(tsr_frontier_kind(g), TSR_FRONTIER_KNOWLEDGE); /* receiver's role kept */
  uint8_t again[128];
  cr_assert_eq(tsr_frontier_encode(g, again, sizeof again), n);
  cr_assert_eq(memcmp(buf, again, n), 0);
}

Test(wire, empty_frontier_is_two_bytes) {
  tf_storage_t s1;
  uint8_t buf[4];
  cr_assert_eq(tsr_frontier_encode(KEMPTY(&s1), buf, sizeof buf), 2);
  cr_assert_eq(buf[0], 0x10);
  cr_assert_eq(buf[1], 0x00);
  cr_assert_eq(dec(buf, 2, 0), TSR_WIRE_OK);
}

Test(wire, compact) {
  /* 16 queue axes of one machine with small epochs: the deltas are 1 byte. */
  TSR_FRONTIER_STORAGE(16) st;
  tsr_frontier_t *f = tsr_frontier_init(&st, 16, TSR_FRONTIER_KNOWLEDGE);
  for (int i = 0; i < 16; i++) tsr_frontier_insert_or_raise(f, tf_axis(i), 100);
  uint8_t buf[512];
  size_t n = enc(f, buf, sizeof buf);
  /* header + count + first axis (8 bytes: 0x001... needs 8 varint bytes) +
   * 15 one-byte deltas + 16 one-byte epochs */
  cr_assert_leq(n, 2 + 8 + 1 + 15 * 2, "encoded %zu bytes", n);
}

Test(wire, encode_refuses_small_buffer_and_invalid_axes) {
  tf_storage_t s1;
  tsr_frontier_t *f = K(&s1, 2, E(AX_A, 5), E(AX_B, 3));
  uint8_t buf[64];
  size_t n = enc(f, buf, sizeof buf);
  for (size_t cap = 0; cap < n; cap++) cr_assert_eq(tsr_frontier_encode(f, buf, cap), 0);
  tsr_frontier_insert_or_raise(f, 42, 1); /* domain 0: not a valid axis */
  cr_assert_eq(tsr_frontier_encode(f, buf, sizeof buf), 0);
}

Test(wire, every_truncation_rejected) {
  tf_storage_t s1;
  tsr_frontier_t *f = K(&s1, 3, E(AX_A, 5), E(AX_B, 3000000), E(AX_D, 1));
  uint8_t buf[128];
  size_t n = enc(f, buf, sizeof buf);
  for (size_t k = 0; k < n; k++) cr_assert_eq(dec(buf, k, 16), TSR_WIRE_TRUNCATED, "prefix of %zu bytes", k);
  cr_assert_eq(dec(buf, n, 16), TSR_WIRE_OK);
  cr_assert_eq(dec(NULL, 0, 16), TSR_WIRE_TRUNCATED);
  cr_assert_eq(dec(NULL, 3, 16), TSR_WIRE_NULL);
  cr_assert_eq(tsr_frontier_decode(buf, n, NULL), TSR_WIRE_NULL);
}

/* Hand-made malformed inputs, one per rule. Axis 0x0010000100000000 is
 * (machine 0, queue, session 1, ordinal 0) = AX_A; as a varint:
 * 80 80 80 80 90 80 80 08 (value 0x0010_0001_0000_0000). */
#define AXA 0x80, 0x80, 0x80, 0x80, 0x90, 0x80, 0x80, 0x08
Test(wire, malformed_inputs) {
  cr_assert_eq(tsr_axis_make(0, TSR_AXIS_DOMAIN_QUEUE, 1, 0), UINT64_C(0x0010000100000000));
  struct {
    uint8_t b[40];
    size_t n;
    tsr_frontier_wire_error_t want;
  } cases[] = {
      {{0x10, 0x01, AXA, 0x05}, 11, TSR_WIRE_OK},
      {{0x20, 0x00}, 2, TSR_WIRE_BAD_VERSION},
      {{0x00, 0x00}, 2, TSR_WIRE_BAD_VERSION},
      {{0x14, 0x00}, 2, TSR_WIRE_BAD_FLAGS},
      {{0x18, 0x00}, 2, TSR_WIRE_BAD_FLAGS},
      {{0x13, 0x00}, 2, TSR_WIRE_OK},                     /* both marks: allowed */
      {{0x10, 0x80, 0x00}, 3, TSR_WIRE_BAD_VARINT},       /* count 0 padded */
      {{0x10, 0x81, 0x80, 0x00}, 4, TSR_WIRE_BAD_VARINT}, /* padded */
      {{0x10, 0x81, 0x20}, 3, TSR_WIRE_TOO_LARGE},        /* 4097 */
      {{0x10, 0x11}, 2, TSR_WIRE_CAPACITY},               /* 17 > 16 */
      {{0x10, 0x01, AXA, 0x00}, 11, TSR_WIRE_ZERO_EPOCH},
      {{0x10, 0x01, AXA, 0x05, 0x00}, 12, TSR_WIRE_TRAILING},
      {{0x10, 0x02, AXA, 0x05, 0x00, 0x01}, 13, TSR_WIRE_UNSORTED},                                /* delta 0 */
      {{0x10, 0x01, 0x2A, 0x05}, 4, TSR_WIRE_BAD_AXIS},                                            /* axis 42 */
      {{0x10, 0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x78, 0x05}, 11, TSR_WIRE_BAD_AXIS}, /* domain 15 */
      {{0x10, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02, 0x05},
       13,
       TSR_WIRE_BAD_VARINT}, /* 65 bits */
      {{0x10, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x81, 0x05},
       13,
       TSR_WIRE_BAD_VARINT}, /* 11 bytes */
      /* second axis delta overflows past 2^64 */
      {{0x10, 0x02, AXA, 0x05, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x05},
       22,
       TSR_WIRE_UNSORTED},
      /* epoch 2^64-1 is fine */
      {{0x10, 0x01, AXA, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}, 20, TSR_WIRE_OK},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tsr_frontier_wire_error_t got = dec(cases[i].b, cases[i].n, 16);
    cr_assert_eq(got, cases[i].want, "case %zu: got %s want %s", i, tsr_frontier_wire_error_name(got),
                 tsr_frontier_wire_error_name(cases[i].want));
  }
  cr_assert_str_eq(tsr_frontier_wire_error_name(TSR_WIRE_TRAILING), "trailing");
}

/* Every single-byte change of a valid encoding is either rejected or decodes
 * to a frontier whose encoding is exactly the changed bytes (canonical). */
Test(wire, single_byte_mutations) {
  tf_storage_t s1, s2;
  tsr_frontier_t *f = K(&s1, 4, E(AX_A, 5), E(AX_B, 200), E(AX_C, 1), E(tf_axis(300), 70000));
  uint8_t buf[128], mut[128], re[128];
  size_t n = enc(f, buf, sizeof buf);
  int accepted = 0;
  for (size_t i = 0; i < n; i++) {
    for (int v = 0; v < 256; v++) {
      memcpy(mut, buf, n);
      mut[i] = (uint8_t)v;
      tsr_frontier_t *g = tsr_frontier_init(&s2, 16, TSR_FRONTIER_KNOWLEDGE);
      if (tsr_frontier_decode(mut, n, g) != TSR_WIRE_OK) continue;
      accepted++;
      cr_assert(tsr_frontier_is_valid(g));
      size_t m = tsr_frontier_encode(g, re, sizeof re);
      cr_assert_eq(m, n);
      cr_assert_eq(memcmp(re, mut, n), 0, "byte %zu = 0x%02x decoded non-canonically", i, v);
    }
  }
  cr_assert_gt(accepted, (int)n); /* the original at least, once per position */
}
