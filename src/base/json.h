/* base/json.h: strict JSON for the socket protocol and the audit log, without
 * a document tree.
 *
 * The scanner checks a whole JSON text against RFC 8259 (UTF-8 only, every
 * escape, the number grammar, nesting at most TSR_JSON_DEPTH_MAX deep) and
 * reports the members of its top-level object: each key, decoded, and the
 * span of text of its value. A value that is itself an object can be scanned
 * again from its span. Duplicate keys are refused among the members it
 * reports; inside nested values they are only checked for syntax. Nothing is
 * allocated.
 *
 * The writer appends compact JSON to a buffer that it grows; commas are
 * placed for the caller. Strings are escaped, and bytes that are not UTF-8
 * are written as U+FFFD, so what it writes always scans.
 *
 * Why not jansson on this path: building, dumping and re-parsing a lease
 * reply through a tree cost the daemon and each client 8-10 us per request
 * (bench/results/lease-*.md); the protocol's objects are flat. */
#ifndef TESSERA_BASE_JSON_H
#define TESSERA_BASE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tessera/status.h"

#define TSR_JSON_DEPTH_MAX 64
#define TSR_JSON_KEY_MAX 64 /* longer keys are reported cut, with key_cut set */

typedef enum tsr_json_type_e {
  TSR_JSON_NULL = 0,
  TSR_JSON_FALSE,
  TSR_JSON_TRUE,
  TSR_JSON_NUMBER,
  TSR_JSON_STRING,
  TSR_JSON_ARRAY,
  TSR_JSON_OBJECT,
} tsr_json_type_t;

/* One member of a scanned object. `value` points into the scanned text and
 * lives as long as it does. */
typedef struct tsr_json_member_s {
  char key[TSR_JSON_KEY_MAX]; /* decoded, NUL-terminated; cut if key_cut */
  bool key_cut;               /* the key was longer than TSR_JSON_KEY_MAX - 1 bytes or held NUL */
  tsr_json_type_t type;
  const char *value; /* the value's text; strings with their quotes */
  size_t value_len;
} tsr_json_member_t;

/* Where and why a text was refused. */
typedef struct tsr_json_error_s {
  size_t offset; /* byte offset into the text */
  char message[96];
} tsr_json_error_t;

/* Scans `text` (len bytes), which must be one JSON object with optional
 * whitespace around it, and fills members[0..*out_count). False, with
 * *out_error filled, if the text is not JSON, is not an object, repeats a
 * top-level key, or has more than `cap` members. */
bool tsr_json_scan_object(const char *text, size_t len, tsr_json_member_t *members, size_t cap, size_t *out_count,
                          tsr_json_error_t *out_error);

/* Walks the elements of an array's span (a member's value of type
 * TSR_JSON_ARRAY, already checked by the scanner). *cursor starts at 0; each
 * call gives the next element and returns false after the last. */
bool tsr_json_array_next(const char *array, size_t len, size_t *cursor, tsr_json_member_t *out);

/* The member called `key`, or NULL. */
const tsr_json_member_t *tsr_json_find(const tsr_json_member_t *members, size_t count, const char *key);

/* A non-negative integer literal (no sign, fraction or exponent) that fits in
 * uint64_t. */
bool tsr_json_get_u64(const tsr_json_member_t *member, uint64_t *out_value);

/* A string, decoded into dst (cap bytes with the NUL). False if the value is
 * not a string, holds U+0000, or does not fit. */
bool tsr_json_get_string(const tsr_json_member_t *member, char *dst, size_t cap);

/* true or false. */
bool tsr_json_get_bool(const tsr_json_member_t *member, bool *out_value);

/* True if `text` (len bytes) is UTF-8 as the scanner accepts it in strings:
 * no overlong forms, no surrogates, nothing above U+10FFFF. */
bool tsr_json_utf8_valid(const char *text, size_t len);

/* The length (1 to 4) of the UTF-8 sequence at `p`, of the `n` (at least 1)
 * bytes left, as tsr_json_utf8_valid accepts it; 0 when it is not one. */
size_t tsr_json_utf8_len(const unsigned char *p, size_t n);

/* True if `text` (len bytes) is one JSON value of any type, with optional
 * whitespace around it; false, with *out_error filled when it is not NULL,
 * if not. */
bool tsr_json_valid(const char *text, size_t len, tsr_json_error_t *out_error);

/* Writes one JSON value (`len` bytes of text, e.g. a member's span) to `out`
 * re-indented: `indent` spaces (0..16) per level, each member and element on
 * its own line, ": " after keys, {} and [] when empty, and a final newline.
 * Strings, numbers and literals are copied as written (a share 0.034925
 * prints as 0.034925). Token by token: no tree, nothing allocated. False,
 * writing nothing, if the text is not one valid JSON value; false too if
 * writing to `out` failed. */
bool tsr_json_pretty(FILE *out, const char *text, size_t len, int indent);

/* ---- writer ----------------------------------------------------------------- */

typedef struct tsr_json_writer_s {
  char *buf; /* owned; NUL-terminated after every call */
  size_t len, cap;
  bool failed;         /* out of memory: the text is incomplete */
  uint32_t depth;      /* open objects and arrays */
  uint64_t need_comma; /* bit d: the container at depth d has an element */
  bool after_key;      /* a key was written; its value comes next */
} tsr_json_writer_t;

/* Empties the text, keeping the buffer. */
void tsr_json_writer_reset(tsr_json_writer_t *w);
void tsr_json_writer_free(tsr_json_writer_t *w);

void tsr_json_object_begin(tsr_json_writer_t *w);
void tsr_json_object_end(tsr_json_writer_t *w);
void tsr_json_array_begin(tsr_json_writer_t *w);
void tsr_json_array_end(tsr_json_writer_t *w);
/* A member's key inside an object; the value follows. */
void tsr_json_key(tsr_json_writer_t *w, const char *key);
void tsr_json_string(tsr_json_writer_t *w, const char *value);
void tsr_json_u64(tsr_json_writer_t *w, uint64_t value);
void tsr_json_i64(tsr_json_writer_t *w, int64_t value);
void tsr_json_bool(tsr_json_writer_t *w, bool value);
void tsr_json_null(tsr_json_writer_t *w);
/* millionths as an exact decimal: 250000 -> 0.25, 1 -> 0.000001 */
void tsr_json_ppm(tsr_json_writer_t *w, uint32_t ppm);
/* A value that is already JSON text (checked by the caller). */
void tsr_json_raw(tsr_json_writer_t *w, const char *text, size_t len);
/* A key and its value, the common members in one call. */
void tsr_json_key_u64(tsr_json_writer_t *w, const char *key, uint64_t value);
void tsr_json_key_string(tsr_json_writer_t *w, const char *key, const char *value);
void tsr_json_key_bool(tsr_json_writer_t *w, const char *key, bool value);
void tsr_json_key_i64(tsr_json_writer_t *w, const char *key, int64_t value);
/* The string, or null when it is NULL or empty. */
void tsr_json_key_string_or_null(tsr_json_writer_t *w, const char *key, const char *value);
/* The value when `known`, else null. */
void tsr_json_key_u64_or_null(tsr_json_writer_t *w, const char *key, bool known, uint64_t value);
/* A share in millionths as tsr_json_ppm writes it, or null when it is 0 (no
 * share set). */
void tsr_json_key_ppm_or_null(tsr_json_writer_t *w, const char *key, uint32_t ppm);
/* A finite double as the shortest of %.15g, %.16g, %.17g that reads back as
 * the same double ("0.25", "12.61", "1e+20"); null when not finite (JSON
 * has no infinity). For measured values such as seconds; shares are ppm. */
void tsr_json_double(tsr_json_writer_t *w, double value);
void tsr_json_key_double(tsr_json_writer_t *w, const char *key, double value);
/* Writes the writer's text and a newline to `out`: TSR_OUT_OF_MEMORY when
 * the writer ran out of memory (the text is incomplete: nothing is
 * written), TSR_IO_ERROR when the stream reports an error. */
TSR_MUST_USE tsr_status_t tsr_json_writer_print(const tsr_json_writer_t *w, FILE *out);

#endif
