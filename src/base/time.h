/* base/time.h: clocks and time formatting.
 *
 * All times are uint64_t nanoseconds: monotonic (CLOCK_MONOTONIC, for
 * deadlines and intervals; meaningless across reboots) or wall (CLOCK_REALTIME,
 * nanoseconds since the Unix epoch, for what is stored and shown). Arithmetic
 * helpers saturate instead of wrapping. Thread-safe, no allocation. */
#ifndef TESSERA_BASE_TIME_H
#define TESSERA_BASE_TIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TSR_NS_PER_US UINT64_C(1000)
#define TSR_NS_PER_MS UINT64_C(1000000)
#define TSR_NS_PER_S UINT64_C(1000000000)

uint64_t tsr_time_mono_ns(void);
uint64_t tsr_time_wall_ns(void);

/* a + b, clamped at UINT64_MAX. */
static inline uint64_t tsr_time_add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
/* a - b, clamped at 0. */
static inline uint64_t tsr_time_sub_sat(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/* Writes wall time `wall_ns` as UTC RFC 3339 with `digits` (0-9) fractional
 * digits, e.g. "2026-11-22T10:00:00.123Z". Returns false if `cap` is too small
 * (then `buf` holds an empty string). */
bool tsr_time_format_rfc3339(uint64_t wall_ns, int digits, char *buf, size_t cap);

/* Parses "YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z" (UTC only) exactly. */
bool tsr_time_parse_rfc3339(const char *text, uint64_t *out_wall_ns);

/* Writes a duration for people: "2h", "1h30m", "15m0s", "1.5s", "250ms",
 * "12us", "0s". At most two units, truncated (never rounded up). */
void tsr_time_format_duration(uint64_t ns, char *buf, size_t cap);

#endif
