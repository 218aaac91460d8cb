/* base/units.h: parsing and printing of human units at the edges.
 *
 * Inside tessera sizes are bytes (uint64_t), durations nanoseconds (uint64_t)
 * and fractions parts per million (uint32_t, 1000000 = 100%). These functions
 * convert from and to what people type. Parsers are strict: the whole string
 * must be consumed, no sign, no exponent, no empty number, results that do not
 * fit are errors (never wrapped). They return a status naming what was wrong.
 * Thread-safe, no global state. */
#ifndef TESSERA_BASE_UNITS_H
#define TESSERA_BASE_UNITS_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

#define TSR_PPM_ONE UINT32_C(1000000)

/* "10GiB", "512 MiB", "1.5G", "80GB", "4096" (bytes). Binary units
 * K/Ki/KiB, M/Mi/MiB, G/Gi/GiB, T/Ti/TiB, P/Pi/PiB are powers of 1024; kB/KB,
 * MB, GB, TB, PB are powers of 1000; B or no unit is bytes. Unit letters are
 * case-insensitive. A fractional value is rounded down to whole bytes. */
TSR_MUST_USE tsr_status_t tsr_parse_size(const char *text, uint64_t *out_bytes);

/* "90s", "15m", "2h", "1d", "500ms", "250us", "100ns", "1.5h", "1h30m".
 * A unit is required (a bare number is ambiguous). Rounded down to whole ns. */
TSR_MUST_USE tsr_status_t tsr_parse_duration(const char *text, uint64_t *out_ns);

/* "0.25", "25%", "1", "100%", "12.5%", as lock files and configuration
 * write them. Must lie in [0, 1] and be exact in parts per million: a value
 * finer than that ("0.1234567", "12.34567891%") is refused, never rounded. */
TSR_MUST_USE tsr_status_t tsr_parse_fraction(const char *text, uint32_t *out_ppm);

/* A share people type: "25%", "12.5%", or a decimal fraction with a point,
 * "0.25", "1.0". As tsr_parse_fraction, exact and at most 100%, but a bare
 * integer ("1", "30") is refused: it is as likely meant as 1% as 100%. */
TSR_MUST_USE tsr_status_t tsr_parse_share(const char *text, uint32_t *out_ppm);

/* A share as tsr_parse_share reads it, or a size with a unit ("40GiB",
 * "512MiB", "1024B"; as tsr_parse_size, but a unit is required). Sets one of
 * *out_ppm and *out_bytes and zeroes the other; a bare integer is refused. */
TSR_MUST_USE tsr_status_t tsr_parse_share_or_size(const char *text, uint32_t *out_ppm, uint64_t *out_bytes);

/* Parses a non-negative decimal integer that fits in uint64_t ("0", "42"). */
TSR_MUST_USE tsr_status_t tsr_parse_u64(const char *text, uint64_t *out_value);

/* "40 GiB", "512 MiB", "1.5 KiB", "17 B": the largest binary unit that leaves
 * a value >= 1, with up to one decimal (truncated). */
void tsr_format_size(uint64_t bytes, char *buf, size_t cap);

/* "50%", "33.3333%", "0.0001%": shortest exact percentage of `ppm`. */
void tsr_format_percent(uint32_t ppm, char *buf, size_t cap);

/* "0.5", "0.333333", "1": shortest exact decimal fraction of `ppm`. */
void tsr_format_fraction(uint32_t ppm, char *buf, size_t cap);

/* bytes x ppm / 1e6, rounded down, without overflow. */
uint64_t tsr_units_scale_ppm(uint64_t bytes, uint32_t ppm);

#endif
