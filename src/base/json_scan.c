/* json_scan.c: the strict scanner and its accessors (see json.h). */
#include "base/json.h"

#include <stdio.h>
#include <string.h>

/* ---- scanner ------------------------------------------------------------------ */

typedef struct {
  const char *s;
  size_t len, pos;
  tsr_json_error_t *err;
} tsr__scan_t;

static bool tsr__fail(tsr__scan_t *sc, const char *why) {
  if (sc->err) {
    sc->err->offset = sc->pos;
    snprintf(sc->err->message, sizeof(sc->err->message), "%s", why);
  }
  return false;
}

static void tsr__ws(tsr__scan_t *sc) {
  while (sc->pos < sc->len) {
    char c = sc->s[sc->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    sc->pos++;
  }
}

static int tsr__hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Length of the UTF-8 sequence at p (at most n bytes), 0 if it is not one:
 * no overlong forms, no surrogates, nothing above U+10FFFF. */
size_t tsr_json_utf8_len(const unsigned char *p, size_t n) {
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  size_t need;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF)
    need = 2, cp = c & 0x1Fu;
  else if (c >= 0xE0 && c <= 0xEF)
    need = 3, cp = c & 0x0Fu;
  else if (c >= 0xF0 && c <= 0xF4)
    need = 4, cp = c & 0x07u;
  else
    return 0;
  if (n < need) return 0;
  for (size_t i = 1; i < need; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3Fu);
  }
  if ((need == 3 && cp < 0x800) || (need == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
  return need;
}

/* Appends code point cp as UTF-8 to dst if it fits; *n counts what was
 * needed, so an overflow shows as *n >= cap. */
static void tsr__put_cp(char *dst, size_t cap, size_t *n, uint32_t cp) {
  char b[4];
  size_t k;
  if (cp < 0x80)
    b[0] = (char)cp, k = 1;
  else if (cp < 0x800)
    b[0] = (char)(0xC0 | (cp >> 6)), b[1] = (char)(0x80 | (cp & 0x3F)), k = 2;
  else if (cp < 0x10000)
    b[0] = (char)(0xE0 | (cp >> 12)), b[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[2] = (char)(0x80 | (cp & 0x3F)),
    k = 3;
  else
    b[0] = (char)(0xF0 | (cp >> 18)), b[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), k = 4;
  for (size_t i = 0; i < k; i++, (*n)++)
    if (dst && *n + 1 < cap) dst[*n] = b[i];
}

static bool tsr__read_u4(tsr__scan_t *sc, uint32_t *out) {
  if (sc->len - sc->pos < 4) return tsr__fail(sc, "short \\u escape");
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    int h = tsr__hex(sc->s[sc->pos + (size_t)i]);
    if (h < 0) return tsr__fail(sc, "bad hex digit in \\u escape");
    v = (v << 4) | (uint32_t)h;
  }
  sc->pos += 4;
  *out = v;
  return true;
}

/* Scans a string at sc->pos (on its opening quote). With dst, decodes into
 * it: *out_n is the decoded length (>= cap if it did not fit) and *out_nul
 * tells whether it held U+0000. */
static bool tsr__string(tsr__scan_t *sc, char *dst, size_t cap, size_t *out_n, bool *out_nul) {
  size_t n = 0;
  bool nul = false;
  sc->pos++; /* the quote */
  for (;;) {
    if (sc->pos >= sc->len) return tsr__fail(sc, "unterminated string");
    unsigned char c = (unsigned char)sc->s[sc->pos];
    if (c == '"') {
      sc->pos++;
      break;
    }
    if (c < 0x20) return tsr__fail(sc, "control character in string");
    if (c == '\\') {
      sc->pos++;
      if (sc->pos >= sc->len) return tsr__fail(sc, "unterminated string");
      char e = sc->s[sc->pos++];
      uint32_t cp = 0;
      switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
          if (!tsr__read_u4(sc, &cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return tsr__fail(sc, "lone low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (sc->len - sc->pos < 2 || sc->s[sc->pos] != '\\' || sc->s[sc->pos + 1] != 'u')
              return tsr__fail(sc, "high surrogate without its low half");
            sc->pos += 2;
            if (!tsr__read_u4(sc, &lo)) return false;
            if (lo < 0xDC00 || lo > 0xDFFF) return tsr__fail(sc, "high surrogate without its low half");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          break;
        default: sc->pos--; return tsr__fail(sc, "unknown escape in string");
      }
      if (cp == 0) nul = true;
      tsr__put_cp(dst, cap, &n, cp);
      continue;
    }
    size_t k = tsr_json_utf8_len((const unsigned char *)sc->s + sc->pos, sc->len - sc->pos);
    if (k == 0) return tsr__fail(sc, "invalid UTF-8 in string");
    for (size_t i = 0; i < k; i++, n++)
      if (dst && n + 1 < cap) dst[n] = sc->s[sc->pos + i];
    sc->pos += k;
  }
  if (dst && cap) dst[n < cap ? n : cap - 1] = '\0';
  if (out_n) *out_n = n;
  if (out_nul) *out_nul = nul;
  return true;
}

static bool tsr__digits(tsr__scan_t *sc) {
  size_t start = sc->pos;
  while (sc->pos < sc->len && sc->s[sc->pos] >= '0' && sc->s[sc->pos] <= '9') sc->pos++;
  return sc->pos > start;
}

static bool tsr__number(tsr__scan_t *sc) {
  if (sc->s[sc->pos] == '-') sc->pos++;
  if (sc->pos >= sc->len) return tsr__fail(sc, "bad number");
  if (sc->s[sc->pos] == '0') {
    sc->pos++;
  } else if (!tsr__digits(sc)) {
    return tsr__fail(sc, "bad number");
  }
  if (sc->pos < sc->len && sc->s[sc->pos] == '.') {
    sc->pos++;
    if (!tsr__digits(sc)) return tsr__fail(sc, "bad number: digits must follow '.'");
  }
  if (sc->pos < sc->len && (sc->s[sc->pos] == 'e' || sc->s[sc->pos] == 'E')) {
    sc->pos++;
    if (sc->pos < sc->len && (sc->s[sc->pos] == '+' || sc->s[sc->pos] == '-')) sc->pos++;
    if (!tsr__digits(sc)) return tsr__fail(sc, "bad number: digits must follow the exponent");
  }
  return true;
}

static bool tsr__literal(tsr__scan_t *sc, const char *word) {
  size_t n = strlen(word);
  if (sc->len - sc->pos < n || memcmp(sc->s + sc->pos, word, n) != 0)
    return tsr__fail(sc, "bad literal (true, false or null)");
  sc->pos += n;
  return true;
}

static bool tsr__value(tsr__scan_t *sc, int depth, tsr_json_type_t *out_type);

/* An object or array at sc->pos (on its opening bracket), checked for syntax. */
static bool tsr__container(tsr__scan_t *sc, int depth, bool object) {
  if (depth >= TSR_JSON_DEPTH_MAX) return tsr__fail(sc, "nested too deep");
  char close = object ? '}' : ']';
  sc->pos++;
  tsr__ws(sc);
  if (sc->pos < sc->len && sc->s[sc->pos] == close) {
    sc->pos++;
    return true;
  }
  for (;;) {
    tsr_json_type_t t;
    if (object) {
      if (sc->pos >= sc->len || sc->s[sc->pos] != '"') return tsr__fail(sc, "expected a string key");
      if (!tsr__string(sc, NULL, 0, NULL, NULL)) return false;
      tsr__ws(sc);
      if (sc->pos >= sc->len || sc->s[sc->pos] != ':') return tsr__fail(sc, "expected ':' after a key");
      sc->pos++;
      tsr__ws(sc);
    }
    if (!tsr__value(sc, depth + 1, &t)) return false;
    tsr__ws(sc);
    if (sc->pos >= sc->len) return tsr__fail(sc, object ? "unterminated object" : "unterminated array");
    char c = sc->s[sc->pos++];
    if (c == close) return true;
    if (c != ',') {
      sc->pos--;
      return tsr__fail(sc, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    tsr__ws(sc);
  }
}

static bool tsr__value(tsr__scan_t *sc, int depth, tsr_json_type_t *out_type) {
  if (sc->pos >= sc->len) return tsr__fail(sc, "expected a value");
  char c = sc->s[sc->pos];
  switch (c) {
    case '{': *out_type = TSR_JSON_OBJECT; return tsr__container(sc, depth, true);
    case '[': *out_type = TSR_JSON_ARRAY; return tsr__container(sc, depth, false);
    case '"': *out_type = TSR_JSON_STRING; return tsr__string(sc, NULL, 0, NULL, NULL);
    case 't': *out_type = TSR_JSON_TRUE; return tsr__literal(sc, "true");
    case 'f': *out_type = TSR_JSON_FALSE; return tsr__literal(sc, "false");
    case 'n': *out_type = TSR_JSON_NULL; return tsr__literal(sc, "null");
    default:
      if (c == '-' || (c >= '0' && c <= '9')) {
        *out_type = TSR_JSON_NUMBER;
        return tsr__number(sc);
      }
      return tsr__fail(sc, "expected a value");
  }
}

bool tsr_json_scan_object(const char *text, size_t len, tsr_json_member_t *members, size_t cap, size_t *out_count,
                          tsr_json_error_t *out_error) {
  tsr__scan_t sc = {.s = text, .len = len, .err = out_error};
  size_t count = 0;
  *out_count = 0;
  tsr__ws(&sc);
  if (sc.pos >= len || text[sc.pos] != '{') return tsr__fail(&sc, "expected a JSON object");
  sc.pos++;
  tsr__ws(&sc);
  bool empty = sc.pos < len && text[sc.pos] == '}';
  if (empty) sc.pos++;
  while (!empty) {
    if (sc.pos >= len || text[sc.pos] != '"') return tsr__fail(&sc, "expected a string key");
    if (count == cap) return tsr__fail(&sc, "too many members");
    tsr_json_member_t *m = &members[count];
    size_t key_at = sc.pos, n;
    bool nul;
    if (!tsr__string(&sc, m->key, sizeof(m->key), &n, &nul)) return false;
    m->key_cut = nul || n >= sizeof(m->key);
    for (size_t i = 0; i < count; i++)
      if (strcmp(members[i].key, m->key) == 0) {
        sc.pos = key_at;
        return tsr__fail(&sc, "duplicate key");
      }
    tsr__ws(&sc);
    if (sc.pos >= len || text[sc.pos] != ':') return tsr__fail(&sc, "expected ':' after a key");
    sc.pos++;
    tsr__ws(&sc);
    m->value = text + sc.pos;
    if (!tsr__value(&sc, 1, &m->type)) return false;
    m->value_len = (size_t)(text + sc.pos - m->value);
    count++;
    tsr__ws(&sc);
    if (sc.pos >= len) return tsr__fail(&sc, "unterminated object");
    char c = text[sc.pos++];
    if (c == '}') break;
    if (c != ',') {
      sc.pos--;
      return tsr__fail(&sc, "expected ',' or '}'");
    }
    tsr__ws(&sc);
  }
  tsr__ws(&sc);
  if (sc.pos != len) return tsr__fail(&sc, "text after the object");
  *out_count = count;
  return true;
}

bool tsr_json_array_next(const char *array, size_t len, size_t *cursor, tsr_json_member_t *out) {
  tsr__scan_t sc = {.s = array, .len = len, .pos = *cursor};
  tsr__ws(&sc);
  if (*cursor == 0) {
    if (sc.pos >= len || array[sc.pos] != '[') return false;
    sc.pos++;
    tsr__ws(&sc);
  } else {
    if (sc.pos >= len || array[sc.pos] != ',') return false;
    sc.pos++;
    tsr__ws(&sc);
  }
  if (sc.pos >= len || array[sc.pos] == ']') return false;
  memset(out, 0, sizeof(*out));
  out->value = array + sc.pos;
  if (!tsr__value(&sc, 1, &out->type)) return false;
  out->value_len = (size_t)(array + sc.pos - out->value);
  *cursor = sc.pos;
  return true;
}

const tsr_json_member_t *tsr_json_find(const tsr_json_member_t *m, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++)
    if (!m[i].key_cut && strcmp(m[i].key, key) == 0) return &m[i];
  return NULL;
}

bool tsr_json_get_u64(const tsr_json_member_t *m, uint64_t *out) {
  if (!m || m->type != TSR_JSON_NUMBER || m->value_len == 0) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < m->value_len; i++) {
    char c = m->value[i];
    if (c < '0' || c > '9') return false; /* sign, fraction or exponent */
    unsigned d = (unsigned)(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool tsr_json_get_string(const tsr_json_member_t *m, char *dst, size_t cap) {
  if (!m || m->type != TSR_JSON_STRING || cap == 0) return false;
  tsr__scan_t sc = {.s = m->value, .len = m->value_len};
  size_t n;
  bool nul;
  if (!tsr__string(&sc, dst, cap, &n, &nul)) return false;
  return !nul && n < cap;
}

bool tsr_json_get_bool(const tsr_json_member_t *m, bool *out) {
  if (!m || (m->type != TSR_JSON_TRUE && m->type != TSR_JSON_FALSE)) return false;
  *out = m->type == TSR_JSON_TRUE;
  return true;
}

bool tsr_json_utf8_valid(const char *text, size_t len) {
  const unsigned char *p = (const unsigned char *)text;
  for (size_t i = 0; i < len;) {
    size_t k = tsr_json_utf8_len(p + i, len - i);
    if (k == 0) return false;
    i += k;
  }
  return true;
}

bool tsr_json_valid(const char *text, size_t len, tsr_json_error_t *out_error) {
  tsr__scan_t sc = {.s = text, .len = len, .err = out_error};
  tsr_json_type_t type;
  tsr__ws(&sc);
  if (!tsr__value(&sc, 0, &type)) return false;
  tsr__ws(&sc);
  if (sc.pos != len) return tsr__fail(&sc, "text after the value");
  return true;
}
