/* test_json.c: the strict scanner and the writer (base/json.h), and a
 * differential run against jansson over mutated protocol lines. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

static size_t scan(const char *text, tsr_json_member_t *m, size_t cap, tsr_json_error_t *err) {
  size_t n = 0;
  cr_assert(tsr_json_scan_object(text, strlen(text), m, cap, &n, err), "refused %s: %s", text, err->message);
  return n;
}

static void refuse(const char *text, const char *why) {
  tsr_json_member_t m[8];
  tsr_json_error_t err = {0};
  size_t n = 99;
  cr_assert_not(tsr_json_scan_object(text, strlen(text), m, 8, &n, &err), "accepted %s", text);
  cr_assert_eq(n, 0);
  cr_assert(strstr(err.message, why), "%s: expected '%s', got '%s'", text, why, err.message);
}

Test(json, scans_members_with_types_and_spans) {
  tsr_json_member_t m[8];
  tsr_json_error_t err;
  const char *t =
      " {\"op\":\"lease.create\", \"device\":0,\"x\":-1.5e3,\"all\":true,"
      "\"n\":null,\"req\":{\"a\":[1,{\"b\":\"c\"}]},\"f\":false,\"l\":[]}\r\n";
  size_t n = scan(t, m, 8, &err);
  cr_assert_eq(n, 8);
  cr_assert_str_eq(m[0].key, "op");
  cr_assert_eq(m[0].type, TSR_JSON_STRING);
  cr_assert_eq(m[0].value_len, strlen("\"lease.create\""));
  cr_assert_eq(m[1].type, TSR_JSON_NUMBER);
  cr_assert_eq(m[2].type, TSR_JSON_NUMBER);
  cr_assert_eq(m[3].type, TSR_JSON_TRUE);
  cr_assert_eq(m[4].type, TSR_JSON_NULL);
  cr_assert_eq(m[5].type, TSR_JSON_OBJECT);
  cr_assert_eq(strncmp(m[5].value, "{\"a\":[1,{\"b\":\"c\"}]}", m[5].value_len), 0);
  cr_assert_eq(m[5].value_len, strlen("{\"a\":[1,{\"b\":\"c\"}]}"));
  cr_assert_eq(m[6].type, TSR_JSON_FALSE);
  cr_assert_eq(m[7].type, TSR_JSON_ARRAY);
  cr_assert_eq(tsr_json_find(m, n, "all"), &m[3]);
  cr_assert_null(tsr_json_find(m, n, "missing"));
  char op[32];
  cr_assert(tsr_json_get_string(&m[0], op, sizeof(op)));
  cr_assert_str_eq(op, "lease.create");
  bool b = false;
  cr_assert(tsr_json_get_bool(&m[3], &b));
  cr_assert(b);
  cr_assert(tsr_json_get_bool(&m[6], &b));
  cr_assert_not(b);
  cr_assert_not(tsr_json_get_bool(&m[4], &b));
  /* a nested object scans again from its span */
  tsr_json_member_t inner[2];
  size_t k = 0;
  cr_assert(tsr_json_scan_object(m[5].value, m[5].value_len, inner, 2, &k, &err));
  cr_assert_eq(k, 1);
  cr_assert_str_eq(inner[0].key, "a");
}

Test(json, empty_object_and_whitespace) {
  tsr_json_member_t m[1];
  tsr_json_error_t err;
  cr_assert_eq(scan("{}", m, 1, &err), 0);
  cr_assert_eq(scan(" \t{ \n } ", m, 1, &err), 0);
}

Test(json, refuses_malformed_text) {
  refuse("", "expected a JSON object");
  refuse("[1]", "expected a JSON object");
  refuse("\"s\"", "expected a JSON object");
  refuse("{", "expected a string key");
  refuse("{\"a\"}", "expected ':'");
  refuse("{\"a\":}", "expected a value");
  refuse("{\"a\":1,}", "expected a string key");
  refuse("{\"a\":1 \"b\":2}", "expected ',' or '}'");
  refuse("{\"a\":1}}", "text after the object");
  refuse("{\"a\":1} x", "text after the object");
  refuse("{a:1}", "expected a string key");
  refuse("{'a':1}", "expected a string key");
  refuse("{\"a\":tru}", "bad literal");
  refuse("{\"a\":nul}", "bad literal");
  refuse("{\"a\":True}", "expected a value");
  refuse("{\"a\":01}", "expected ',' or '}'");
  refuse("{\"a\":1.}", "digits must follow '.'");
  refuse("{\"a\":.5}", "expected a value");
  refuse("{\"a\":1e}", "digits must follow the exponent");
  refuse("{\"a\":-}", "bad number");
  refuse("{\"a\":+1}", "expected a value");
  refuse("{\"a\":[1,]}", "expected a value");
  refuse("{\"a\":[1 2]}", "expected ',' or ']'");
  refuse("{\"a\":[1}", "expected ',' or ']'");
  refuse("{\"a\":{\"b\"}}", "expected ':'");
  refuse("{\"a\":\"x}", "unterminated string");
  refuse("{\"a\":\"\\x\"}", "unknown escape");
  refuse("{\"a\":\"\\u12g4\"}", "bad hex digit");
  refuse("{\"a\":\"\\u12\"}", "bad hex digit");
  refuse("{\"a\":\"tab\there\"}", "control character");
  refuse("{\"a\":1,\"a\":2}", "duplicate key");
  refuse("{\"op\":1,\"\\u006fp\":2}", "duplicate key");
}

Test(json, refuses_bad_unicode) {
  refuse("{\"a\":\"\\ud800\"}", "high surrogate without its low half");
  refuse("{\"a\":\"\\ud800\\u0041\"}", "high surrogate without its low half");
  refuse("{\"a\":\"\\udc00\"}", "lone low surrogate");
  refuse("{\"a\":\"\xff\"}", "invalid UTF-8");
  refuse("{\"a\":\"\xc0\xaf\"}", "invalid UTF-8");         /* overlong '/' */
  refuse("{\"a\":\"\xe0\x80\xaf\"}", "invalid UTF-8");     /* overlong */
  refuse("{\"a\":\"\xed\xa0\x80\"}", "invalid UTF-8");     /* a surrogate in UTF-8 */
  refuse("{\"a\":\"\xf4\x90\x80\x80\"}", "invalid UTF-8"); /* above U+10FFFF */
  refuse("{\"a\":\"\xe2\x82\"}", "invalid UTF-8");         /* cut short */
  refuse("{\"\xff\":1}", "invalid UTF-8");
}

Test(json, decodes_escapes_and_utf8) {
  tsr_json_member_t m[4];
  tsr_json_error_t err;
  size_t n = scan("{\"s\":\"a\\\"b\\\\c\\/d\\n\\u00e9\\ud83d\\ude00\xc3\xa9\",\"z\":\"\\u0000\"}", m, 4, &err);
  cr_assert_eq(n, 2);
  char s[64];
  cr_assert(tsr_json_get_string(&m[0], s, sizeof(s)));
  cr_assert_str_eq(s, "a\"b\\c/d\n\xc3\xa9\xf0\x9f\x98\x80\xc3\xa9");
  cr_assert_not(tsr_json_get_string(&m[1], s, sizeof(s)), "U+0000 is refused by the getter");
  char tiny[4];
  cr_assert_not(tsr_json_get_string(&m[0], tiny, sizeof(tiny)), "too long for dst");
}

Test(json, integers) {
  tsr_json_member_t m[8];
  tsr_json_error_t err;
  size_t n = scan(
      "{\"a\":0,\"b\":18446744073709551615,\"c\":18446744073709551616,\"d\":-1,"
      "\"e\":1.0,\"f\":1e3,\"g\":\"1\"}",
      m, 8, &err);
  cr_assert_eq(n, 7);
  uint64_t v = 7;
  cr_assert(tsr_json_get_u64(&m[0], &v));
  cr_assert_eq(v, 0);
  cr_assert(tsr_json_get_u64(&m[1], &v));
  cr_assert_eq(v, UINT64_MAX);
  for (int i = 2; i < 7; i++) cr_assert_not(tsr_json_get_u64(&m[i], &v), "member %d", i);
}

Test(json, long_keys_are_cut_and_match_nothing) {
  char text[300];
  char key[200];
  memset(key, 'k', sizeof(key) - 1);
  key[sizeof(key) - 1] = '\0';
  snprintf(text, sizeof(text), "{\"%s\":1}", key);
  tsr_json_member_t m[1];
  tsr_json_error_t err;
  cr_assert_eq(scan(text, m, 1, &err), 1);
  cr_assert(m[0].key_cut);
  cr_assert_eq(strlen(m[0].key), TSR_JSON_KEY_MAX - 1);
  cr_assert_null(tsr_json_find(m, 1, m[0].key));
}

Test(json, member_cap_and_depth_limit) {
  refuse("{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9}", "too many members");
  char deep[400] = "{\"a\":";
  for (int i = 0; i < TSR_JSON_DEPTH_MAX; i++) strcat(deep, "[");
  for (int i = 0; i < TSR_JSON_DEPTH_MAX; i++) strcat(deep, "]");
  strcat(deep, "}");
  refuse(deep, "nested too deep");
  char ok[400] = "{\"a\":";
  for (int i = 0; i < TSR_JSON_DEPTH_MAX - 2; i++) strcat(ok, "[");
  for (int i = 0; i < TSR_JSON_DEPTH_MAX - 2; i++) strcat(ok, "]");
  strcat(ok, "}");
  tsr_json_member_t m[1];
  tsr_json_error_t err;
  cr_assert_eq(scan(ok, m, 1, &err), 1);
}

Test(json, error_offset_points_at_the_fault) {
  tsr_json_member_t m[4];
  tsr_json_error_t err;
  size_t n;
  const char *t = "{\"a\":1,\"b\":x}";
  cr_assert_not(tsr_json_scan_object(t, strlen(t), m, 4, &n, &err));
  cr_assert_eq(err.offset, strlen("{\"a\":1,\"b\":"));
}

Test(json, walks_arrays) {
  tsr_json_member_t m[2];
  tsr_json_error_t err;
  size_t n = scan("{\"l\":[ {\"id\":1} , 2,\"x\" ,[3]],\"e\":[ ]}", m, 2, &err);
  cr_assert_eq(n, 2);
  size_t cur = 0;
  tsr_json_member_t el;
  tsr_json_type_t want[] = {TSR_JSON_OBJECT, TSR_JSON_NUMBER, TSR_JSON_STRING, TSR_JSON_ARRAY};
  int k = 0;
  while (tsr_json_array_next(m[0].value, m[0].value_len, &cur, &el)) {
    cr_assert_lt(k, 4);
    cr_assert_eq(el.type, want[k]);
    k++;
  }
  cr_assert_eq(k, 4);
  cur = 0;
  cr_assert_not(tsr_json_array_next(m[1].value, m[1].value_len, &cur, &el));
}

/* ---- writer ------------------------------------------------------------------ */

Test(json, writer_places_commas_and_nests) {
  tsr_json_writer_t w = {0};
  tsr_json_object_begin(&w);
  tsr_json_key(&w, "ok");
  tsr_json_bool(&w, true);
  tsr_json_key(&w, "n");
  tsr_json_i64(&w, -42);
  tsr_json_key(&w, "u");
  tsr_json_u64(&w, UINT64_MAX);
  tsr_json_key(&w, "l");
  tsr_json_array_begin(&w);
  tsr_json_object_begin(&w);
  tsr_json_object_end(&w);
  tsr_json_null(&w);
  tsr_json_i64(&w, INT64_MIN);
  tsr_json_array_begin(&w);
  tsr_json_array_end(&w);
  tsr_json_array_end(&w);
  tsr_json_key(&w, "f");
  tsr_json_ppm(&w, 250000);
  tsr_json_key(&w, "r");
  tsr_json_raw(&w, "{\"x\":[1]}", 9);
  tsr_json_object_end(&w);
  cr_assert_not(w.failed);
  cr_assert_str_eq(w.buf,
                   "{\"ok\":true,\"n\":-42,\"u\":18446744073709551615,\"l\":[{},null,"
                   "-9223372036854775808,[]],\"f\":0.25,\"r\":{\"x\":[1]}}");
  tsr_json_writer_reset(&w);
  cr_assert_eq(w.len, 0);
  tsr_json_array_begin(&w);
  tsr_json_u64(&w, 1);
  tsr_json_u64(&w, 2);
  tsr_json_array_end(&w);
  cr_assert_str_eq(w.buf, "[1,2]");
  tsr_json_writer_free(&w);
}

Test(json, writer_ppm_is_exact) {
  struct {
    uint32_t ppm;
    const char *text;
  } cases[] = {{0, "0.0"}, {1, "0.000001"}, {10, "0.00001"}, {250000, "0.25"}, {333333, "0.333333"}, {1000000, "1.0"}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tsr_json_writer_t w = {0};
    tsr_json_ppm(&w, cases[i].ppm);
    cr_assert_str_eq(w.buf, cases[i].text);
    tsr_json_writer_free(&w);
  }
}

Test(json, writer_escapes_and_repairs_strings) {
  tsr_json_writer_t w = {0};
  tsr_json_object_begin(&w);
  tsr_json_key(&w, "k\"ey");
  tsr_json_string(&w, "q\"b\\n\n\t\r\x01\x1f \xc3\xa9 \xff end \xe2\x82");
  tsr_json_object_end(&w);
  cr_assert_str_eq(w.buf,
                   "{\"k\\\"ey\":\"q\\\"b\\\\n\\n\\t\\r\\u0001\\u001f \xc3\xa9 \\ufffd end "
                   "\\ufffd\\ufffd\"}");
  /* and what it wrote scans back to the same string, repaired */
  tsr_json_member_t m[1];
  tsr_json_error_t err;
  cr_assert_eq(scan(w.buf, m, 1, &err), 1);
  cr_assert_str_eq(m[0].key, "k\"ey");
  char s[64];
  cr_assert(tsr_json_get_string(&m[0], s, sizeof(s)));
  cr_assert_str_eq(s, "q\"b\\n\n\t\r\x01\x1f \xc3\xa9 \xef\xbf\xbd end \xef\xbf\xbd\xef\xbf\xbd");
  tsr_json_writer_free(&w);
}

/* ---- against jansson ------------------------------------------------------------ */

/* Random edits of real protocol lines: the scanner must accept exactly the
 * texts that jansson reads as an object, apart from the documented
 * differences (jansson refuses integers beyond int64 and reals that
 * overflow; the scanner leaves those to the getters). */
Test(json, agrees_with_jansson_on_mutated_lines) {
  static const char *seeds[] = {
      "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":250000,\"duration_ns\":7200000000000}",
      "{\"op\":\"lease.release\",\"id\":17,\"req\":[1,\"two\",{\"three\":3.5e-1},null,true,false]}",
      "{\"op\":\"hello\",\"req\":{\"nested\":{\"deep\":[[]]}},\"user\":\"al\\u00e9 \\ud83d\\ude00\"}",
      "{\"ok\":true,\"lease\":{\"id\":1,\"owner\":\"x\\\"y\",\"fraction\":0.25,\"sm_share\":null}}",
  };
  static const char alphabet[] = "{}[]:,\"\\ 0123456789.eE+-tfnrulasx\t\n\xc3\xa9\xff";
  uint64_t rng = 0x243F6A8885A308D3u;
  int agreed = 0, accepted = 0;
  for (int iter = 0; iter < 40000; iter++) {
    char text[512];
    const char *seed = seeds[iter % 4];
    size_t len = strlen(seed);
    memcpy(text, seed, len);
    int edits = 1 + (int)(iter % 3);
    for (int e = 0; e < edits; e++) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      size_t at = (size_t)(rng >> 8) % (len + 1);
      char c = alphabet[(rng >> 40) % (sizeof(alphabet) - 1)];
      switch (rng % 3) {
        case 0: /* replace */
          if (at < len) text[at] = c;
          break;
        case 1: /* insert */
          if (len + 1 < sizeof(text)) {
            memmove(text + at + 1, text + at, len - at);
            text[at] = c;
            len++;
          }
          break;
        default: /* delete */
          if (at < len) {
            memmove(text + at, text + at + 1, len - at - 1);
            len--;
          }
      }
    }
    tsr_json_member_t m[16];
    tsr_json_error_t err;
    size_t n;
    bool mine = tsr_json_scan_object(text, len, m, 16, &n, &err);
    json_error_t jerr;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    bool theirs = j && json_is_object(j);
    json_decref(j);
    if (mine != theirs && mine && (strstr(jerr.text, "too big") || strstr(jerr.text, "overflow"))) continue;
    if (mine != theirs && !mine && strstr(err.message, "too many members")) continue;
    cr_assert_eq(mine, theirs, "disagree on '%.*s': scanner %s (%s), jansson %s (%s)", (int)len, text,
                 mine ? "accepts" : "refuses", mine ? "" : err.message, theirs ? "accepts" : "refuses",
                 theirs ? "" : jerr.text);
    agreed++;
    accepted += mine;
  }
  cr_assert_gt(agreed, 39000);
  cr_assert_gt(accepted, 1000, "the mutations must leave some texts valid (%d)", accepted);
  cr_assert_lt(accepted, 39000, "and break most (%d)", accepted);
}

Test(json, writer_key_helpers_match_key_then_value) {
  tsr_json_writer_t a = {0}, b = {0};
  tsr_json_object_begin(&a);
  tsr_json_key_u64(&a, "n", 7);
  tsr_json_key_string(&a, "s", "x\"y");
  tsr_json_key_bool(&a, "b", false);
  tsr_json_object_end(&a);
  tsr_json_object_begin(&b);
  tsr_json_key(&b, "n");
  tsr_json_u64(&b, 7);
  tsr_json_key(&b, "s");
  tsr_json_string(&b, "x\"y");
  tsr_json_key(&b, "b");
  tsr_json_bool(&b, false);
  tsr_json_object_end(&b);
  cr_assert_str_eq(a.buf, "{\"n\":7,\"s\":\"x\\\"y\",\"b\":false}");
  cr_assert_str_eq(a.buf, b.buf);
  tsr_json_writer_free(&a);
  tsr_json_writer_free(&b);
}

Test(json, writer_or_null_helpers) {
  tsr_json_writer_t w = {0};
  tsr_json_object_begin(&w);
  tsr_json_key_string_or_null(&w, "s", "v");
  tsr_json_key_string_or_null(&w, "e", "");
  tsr_json_key_string_or_null(&w, "n", NULL);
  tsr_json_key_u64_or_null(&w, "k", true, 0);
  tsr_json_key_u64_or_null(&w, "u", false, 5);
  tsr_json_key_ppm_or_null(&w, "p", 250000);
  tsr_json_key_ppm_or_null(&w, "z", 0);
  tsr_json_object_end(&w);
  cr_assert_str_eq(w.buf, "{\"s\":\"v\",\"e\":null,\"n\":null,\"k\":0,\"u\":null,\"p\":0.25,\"z\":null}");
  tsr_json_writer_free(&w);
}

/* ---- pretty-printer ----------------------------------------------------------- */

/* What tsr_json_pretty writes for `text`, or NULL if it refused. */
static char *pretty(const char *text, int indent) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  cr_assert_not_null(f);
  bool ok = tsr_json_pretty(f, text, strlen(text), indent);
  fclose(f);
  if (!ok) {
    cr_assert_eq(n, 0, "a refused text must print nothing, printed '%s'", buf);
    free(buf);
    return NULL;
  }
  return buf;
}

static void expect_pretty(const char *text, int indent, const char *want) {
  char *got = pretty(text, indent);
  cr_assert_not_null(got, "refused %s", text);
  cr_assert_str_eq(got, want, "pretty(%s):\n%s\nwanted:\n%s", text, got, want);
  free(got);
}

Test(json, pretty_indents_nested_values) {
  expect_pretty("{\"id\":2,\"l\":[1,{\"a\":null},[true,false]],\"o\":{\"b\":\"c\"}}", 2,
                "{\n"
                "  \"id\": 2,\n"
                "  \"l\": [\n"
                "    1,\n"
                "    {\n"
                "      \"a\": null\n"
                "    },\n"
                "    [\n"
                "      true,\n"
                "      false\n"
                "    ]\n"
                "  ],\n"
                "  \"o\": {\n"
                "    \"b\": \"c\"\n"
                "  }\n"
                "}\n");
  expect_pretty("[1,[2]]", 4, "[\n    1,\n    [\n        2\n    ]\n]\n");
  expect_pretty("[1,2]", 0, "[\n1,\n2\n]\n");
}

Test(json, pretty_keeps_empty_containers_on_one_line) {
  expect_pretty("{}", 2, "{}\n");
  expect_pretty("[]", 2, "[]\n");
  expect_pretty(" { \n\t} ", 2, "{}\n");
  expect_pretty("[ ]", 2, "[]\n");
  expect_pretty("{\"a\":{},\"b\":[],\"c\":[{}]}", 2, "{\n  \"a\": {},\n  \"b\": [],\n  \"c\": [\n    {}\n  ]\n}\n");
}

Test(json, pretty_copies_strings_and_numbers_as_written) {
  /* escapes stay escapes; brackets, commas, colons and spaces inside strings
   * are not structure; numbers keep their digits (no 0.034924999999999998) */
  expect_pretty(
      "{\"k\\\"ey\":\"a, b: {c} [d] \\\\\\\" \\u00e9 \\ud83d\\ude00 \xc3\xa9\","
      "\"share\":0.034925,\"big\":18446744073709551615,\"neg\":-1.5e-3}",
      2,
      "{\n"
      "  \"k\\\"ey\": \"a, b: {c} [d] \\\\\\\" \\u00e9 \\ud83d\\ude00 \xc3\xa9\",\n"
      "  \"share\": 0.034925,\n"
      "  \"big\": 18446744073709551615,\n"
      "  \"neg\": -1.5e-3\n"
      "}\n");
  expect_pretty("\"\\\\\"", 2, "\"\\\\\"\n"); /* a string ending in an escaped backslash */
  expect_pretty("0.034925", 2, "0.034925\n");
  expect_pretty("null", 2, "null\n");
}

Test(json, pretty_refuses_what_is_not_json) {
  static const char *const bad[] = {"",         "{",          "[1,]", "{\"a\" 1}", "[1] [2]",
                                    "\"\xff\"", "{\"a\":01}", "tru",  "[\"\\x\"]", "{\"a\":1,\"a\":}"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) cr_assert_null(pretty(bad[i], 2), "printed '%s'", bad[i]);
  /* nesting past the scanner's limit */
  char deep[2 * TSR_JSON_DEPTH_MAX + 8];
  size_t n = 0;
  for (int i = 0; i < TSR_JSON_DEPTH_MAX + 1; i++) deep[n++] = '[';
  for (int i = 0; i < TSR_JSON_DEPTH_MAX + 1; i++) deep[n++] = ']';
  deep[n] = '\0';
  cr_assert_null(pretty(deep, 2));
}

/* `text` without the whitespace outside strings. */
static void squeeze(const char *text, char *out) {
  bool in_string = false;
  for (const char *p = text; *p; p++) {
    if (in_string) {
      *out++ = *p;
      if (*p == '\\')
        *out++ = *++p;
      else if (*p == '"')
        in_string = false;
    } else if (!strchr(" \t\r\n", *p)) {
      *out++ = *p;
      in_string = *p == '"';
    }
  }
  *out = '\0';
}

Test(json, pretty_changes_only_whitespace) {
  static const char *const texts[] = {
      "{\"op\":\"lease.release\",\"id\":17,\"req\":[1,\"two\",{\"three\":3.5e-1},null,true,false]}",
      "{\"op\":\"hello\",\"req\":{\"nested\":{\"deep\":[[]]}},\"user\":\"al\\u00e9 \\ud83d\\ude00\"}",
      "{\"ok\":true,\"lease\":{\"id\":1,\"owner\":\"x\\\"y\",\"fraction\":0.25,\"sm_share\":null}}",
      " [ {\"a\" : [ 1 , 2 ] } , \"s p a c e\" , { } ] ",
  };
  for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
    char *got = pretty(texts[i], 3);
    cr_assert_not_null(got);
    char a[512], b[512];
    squeeze(texts[i], a);
    squeeze(got, b);
    cr_assert_str_eq(a, b);
    free(got);
  }
}

Test(json, utf8_validation) {
  cr_assert(tsr_json_utf8_valid("", 0));
  cr_assert(tsr_json_utf8_valid("alice", 5));
  cr_assert(tsr_json_utf8_valid("al\xc3\xa9", 4));
  cr_assert(tsr_json_utf8_valid("\xf0\x9f\x98\x80", 4));
  cr_assert_not(tsr_json_utf8_valid("\xff", 1));
  cr_assert_not(tsr_json_utf8_valid("al\xc3", 3));           /* cut short */
  cr_assert_not(tsr_json_utf8_valid("\xc0\xaf", 2));         /* overlong '/' */
  cr_assert_not(tsr_json_utf8_valid("\xed\xa0\x80", 3));     /* a surrogate */
  cr_assert_not(tsr_json_utf8_valid("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
}

Test(json, valid_takes_any_one_value) {
  static const char *good[] = {"{}", " [1, 2] ", "\"s\"", "0", "-1.5e3", "true", "null", "{\"a\":[{}]}"};
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
    cr_assert(tsr_json_valid(good[i], strlen(good[i]), NULL), "%s", good[i]);
  static const char *bad[] = {"", " ", "{} {}", "[1,]", "01", "\"\\x\"", "tru", "{\"a\" 1}", "1 2"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    tsr_json_error_t err = {0};
    cr_assert_not(tsr_json_valid(bad[i], strlen(bad[i]), &err), "%s", bad[i]);
    cr_assert_neq(err.message[0], '\0', "no reason given for %s", bad[i]);
  }
}
