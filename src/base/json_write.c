/* json_write.c: the compact writer and the pretty-printer (see json.h). */
#include "base/json.h"

#include "base/array.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writer ------------------------------------------------------------------ */

static bool tsr__reserve(tsr_json_writer_t *w, size_t more) {
  if (w->failed) return false;
  if (more > SIZE_MAX - 1 - w->len) {
    w->failed = true;
    return false;
  }
  char *b = tsr_array_grow(w->buf, &w->cap, w->len + more + 1, 1, 1024);
  if (!b) {
    w->failed = true;
    return false;
  }
  w->buf = b;
  return true;
}

static void tsr__put(tsr_json_writer_t *w, const char *s, size_t n) {
  if (!tsr__reserve(w, n)) return;
  memcpy(w->buf + w->len, s, n);
  w->len += n;
  w->buf[w->len] = '\0';
}

/* Before a key, or a value that does not follow its key: a comma if the
 * open container already has an element. */
static void tsr__element(tsr_json_writer_t *w) {
  if (w->after_key) {
    w->after_key = false;
    return;
  }
  if (w->depth == 0) return;
  uint64_t bit = UINT64_C(1) << (w->depth & 63);
  if (w->need_comma & bit) tsr__put(w, ",", 1);
  w->need_comma |= bit;
}

static void tsr__open(tsr_json_writer_t *w, const char *bracket) {
  tsr__element(w);
  tsr__put(w, bracket, 1);
  w->depth++;
  w->need_comma &= ~(UINT64_C(1) << (w->depth & 63));
}

static void tsr__close(tsr_json_writer_t *w, const char *bracket) {
  tsr__put(w, bracket, 1);
  if (w->depth) w->depth--;
}

void tsr_json_object_begin(tsr_json_writer_t *w) { tsr__open(w, "{"); }
void tsr_json_object_end(tsr_json_writer_t *w) { tsr__close(w, "}"); }
void tsr_json_array_begin(tsr_json_writer_t *w) { tsr__open(w, "["); }
void tsr_json_array_end(tsr_json_writer_t *w) { tsr__close(w, "]"); }

/* A quoted, escaped string; bytes that are not UTF-8 become U+FFFD. */
static void tsr__quoted(tsr_json_writer_t *w, const char *s) {
  static const char hex[] = "0123456789abcdef";
  size_t n = strlen(s);
  /* the worst case: every byte escaped */
  if (n > (SIZE_MAX - 2) / 6 || !tsr__reserve(w, n * 6 + 2)) {
    w->failed = true;
    return;
  }
  char *o = w->buf + w->len;
  *o++ = '"';
  const unsigned char *p = (const unsigned char *)s, *end = p + n;
  while (p < end) {
    unsigned char c = *p;
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      *o++ = (char)c;
      p++;
    } else if (c == '"' || c == '\\') {
      *o++ = '\\';
      *o++ = (char)c;
      p++;
    } else if (c < 0x20) {
      *o++ = '\\';
      switch (c) {
        case '\n': *o++ = 'n'; break;
        case '\t': *o++ = 't'; break;
        case '\r': *o++ = 'r'; break;
        default: *o++ = 'u', *o++ = '0', *o++ = '0', *o++ = hex[c >> 4], *o++ = hex[c & 15];
      }
      p++;
    } else {
      size_t k = tsr_json_utf8_len(p, (size_t)(end - p));
      if (k == 0) {
        memcpy(o, "\\ufffd", 6);
        o += 6;
        p++;
      } else {
        memcpy(o, p, k);
        o += k;
        p += k;
      }
    }
  }
  *o++ = '"';
  w->len = (size_t)(o - w->buf);
  w->buf[w->len] = '\0';
}

void tsr_json_key(tsr_json_writer_t *w, const char *key) {
  tsr__element(w);
  tsr__quoted(w, key);
  tsr__put(w, ":", 1);
  w->after_key = true;
}

void tsr_json_string(tsr_json_writer_t *w, const char *value) {
  tsr__element(w);
  tsr__quoted(w, value);
}

/* Decimal digits of v, with a leading '-' if `negative`. */
static void tsr__integer(tsr_json_writer_t *w, uint64_t v, bool negative) {
  char b[24];
  size_t i = sizeof(b);
  do {
    b[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  if (negative) b[--i] = '-';
  tsr__element(w);
  tsr__put(w, b + i, sizeof(b) - i);
}

void tsr_json_u64(tsr_json_writer_t *w, uint64_t v) { tsr__integer(w, v, false); }

void tsr_json_i64(tsr_json_writer_t *w, int64_t v) {
  tsr__integer(w, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, v < 0);
}

void tsr_json_bool(tsr_json_writer_t *w, bool v) {
  tsr__element(w);
  if (v)
    tsr__put(w, "true", 4);
  else
    tsr__put(w, "false", 5);
}

void tsr_json_null(tsr_json_writer_t *w) {
  tsr__element(w);
  tsr__put(w, "null", 4);
}

void tsr_json_ppm(tsr_json_writer_t *w, uint32_t ppm) {
  char b[32];
  unsigned whole = ppm / 1000000u, frac = ppm % 1000000u;
  int n = snprintf(b, sizeof(b), "%u.%06u", whole, frac);
  while (n > 2 && b[n - 1] == '0' && b[n - 2] != '.') n--; /* 0.250000 -> 0.25, 1.000000 -> 1.0 */
  tsr__element(w);
  tsr__put(w, b, (size_t)n);
}

void tsr_json_raw(tsr_json_writer_t *w, const char *text, size_t len) {
  tsr__element(w);
  tsr__put(w, text, len);
}

void tsr_json_key_u64(tsr_json_writer_t *w, const char *key, uint64_t value) {
  tsr_json_key(w, key);
  tsr_json_u64(w, value);
}

void tsr_json_key_string(tsr_json_writer_t *w, const char *key, const char *value) {
  tsr_json_key(w, key);
  tsr_json_string(w, value);
}

void tsr_json_key_bool(tsr_json_writer_t *w, const char *key, bool value) {
  tsr_json_key(w, key);
  tsr_json_bool(w, value);
}

void tsr_json_writer_reset(tsr_json_writer_t *w) {
  w->len = 0;
  w->failed = false;
  w->depth = 0;
  w->need_comma = 0;
  w->after_key = false;
  if (w->buf) w->buf[0] = '\0';
}

void tsr_json_writer_free(tsr_json_writer_t *w) {
  free(w->buf);
  memset(w, 0, sizeof(*w));
}

void tsr_json_key_i64(tsr_json_writer_t *w, const char *key, int64_t value) {
  tsr_json_key(w, key);
  tsr_json_i64(w, value);
}

void tsr_json_key_string_or_null(tsr_json_writer_t *w, const char *key, const char *value) {
  tsr_json_key(w, key);
  if (value && value[0])
    tsr_json_string(w, value);
  else
    tsr_json_null(w);
}

void tsr_json_key_u64_or_null(tsr_json_writer_t *w, const char *key, bool known, uint64_t value) {
  tsr_json_key(w, key);
  if (known)
    tsr_json_u64(w, value);
  else
    tsr_json_null(w);
}

void tsr_json_key_ppm_or_null(tsr_json_writer_t *w, const char *key, uint32_t ppm) {
  tsr_json_key(w, key);
  if (ppm)
    tsr_json_ppm(w, ppm);
  else
    tsr_json_null(w);
}

void tsr_json_double(tsr_json_writer_t *w, double value) {
  if (!isfinite(value)) {
    tsr_json_null(w);
    return;
  }
  /* %g never writes what JSON refuses for a finite value (no "inf", no
   * leading "." or "+"); 17 significant digits always read back exactly */
  char buf[32];
  int len = 0;
  for (int digits = 15; digits <= 17; digits++) {
    len = snprintf(buf, sizeof(buf), "%.*g", digits, value);
    if (strtod(buf, NULL) == value) break;
  }
  tsr_json_raw(w, buf, (size_t)len);
}

void tsr_json_key_double(tsr_json_writer_t *w, const char *key, double value) {
  tsr_json_key(w, key);
  tsr_json_double(w, value);
}

tsr_status_t tsr_json_writer_print(const tsr_json_writer_t *w, FILE *out) {
  if (w->failed || !w->buf) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory writing JSON");
  fputs(w->buf, out);
  fputc('\n', out);
  return ferror(out) ? tsr_status_make(TSR_IO_ERROR, "could not write the JSON") : NULL;
}

/* ---- pretty-printer ----------------------------------------------------------- */

static void tsr__newline(FILE *out, int indent, int depth) {
  fputc('\n', out);
  for (int i = 0; i < indent * depth; i++) fputc(' ', out);
}

bool tsr_json_pretty(FILE *out, const char *text, size_t len, int indent) {
  /* Checked first, so that a text that is not JSON prints nothing; the loop
   * below can then trust the brackets and quotes it meets. */
  if (!tsr_json_valid(text, len, NULL)) return false;
  if (indent < 0) indent = 0;
  if (indent > 16) indent = 16;
  int depth = 0;
  for (size_t i = 0; i < len;) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      i++;
    } else if (c == '"') { /* a string, copied as written, escapes and all */
      size_t j = i + 1;
      while (text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      fwrite(text + i, 1, j + 1 - i, out);
      i = j + 1;
    } else if (c == '{' || c == '[') {
      size_t j = i + 1;
      while (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r') j++;
      if (text[j] == (c == '{' ? '}' : ']')) { /* empty: {} and [] stay on one line */
        fputc(c, out);
        fputc(text[j], out);
        i = j + 1;
      } else {
        fputc(c, out);
        tsr__newline(out, indent, ++depth);
        i++;
      }
    } else if (c == '}' || c == ']') {
      tsr__newline(out, indent, --depth);
      fputc(c, out);
      i++;
    } else if (c == ',') {
      fputc(',', out);
      tsr__newline(out, indent, depth);
      i++;
    } else if (c == ':') {
      fputs(": ", out);
      i++;
    } else { /* a number or a literal: as written, so 0.034925 stays 0.034925 */
      size_t j = i;
      while (j < len && !strchr(" \t\n\r,:]}", text[j])) j++;
      fwrite(text + i, 1, j - i, out);
      i = j;
    }
  }
  fputc('\n', out);
  return !ferror(out);
}
