/* libFuzzer target for base/json: any bytes through the scanner, then every
 * getter and the array walk on whatever it accepts, then the writer on the
 * decoded strings. Checks, beyond the sanitizers: spans stay inside the
 * input, and what the writer writes always scans back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

static void check_span(const uint8_t *data, size_t size, const tsr_json_member_t *m) {
  const char *lo = (const char *)data, *hi = lo + size;
  if (m->value < lo || m->value + m->value_len > hi || m->value_len == 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tsr_json_member_t m[16];
  size_t n = 0;
  tsr_json_error_t err;
  if (!tsr_json_scan_object((const char *)data, size, m, 16, &n, &err)) {
    if (err.offset > size || n != 0) abort();
    return 0;
  }
  tsr_json_writer_t w = {0};
  tsr_json_object_begin(&w);
  for (size_t i = 0; i < n; i++) {
    check_span(data, size, &m[i]);
    uint64_t u;
    bool b;
    char s[128];
    (void)tsr_json_get_u64(&m[i], &u);
    (void)tsr_json_get_bool(&m[i], &b);
    tsr_json_key(&w, m[i].key);
    if (tsr_json_get_string(&m[i], s, sizeof(s)))
      tsr_json_string(&w, s);
    else
      tsr_json_raw(&w, m[i].value, m[i].value_len);
    if (m[i].type == TSR_JSON_ARRAY) {
      size_t cur = 0, k = 0;
      tsr_json_member_t el;
      while (tsr_json_array_next(m[i].value, m[i].value_len, &cur, &el)) {
        if (el.value < m[i].value || el.value + el.value_len > m[i].value + m[i].value_len) abort();
        if (++k > m[i].value_len) abort(); /* the walk must end */
      }
    }
    if (m[i].type == TSR_JSON_OBJECT) {
      tsr_json_member_t inner[4];
      size_t k;
      (void)tsr_json_scan_object(m[i].value, m[i].value_len, inner, 4, &k, &err);
    }
  }
  tsr_json_object_end(&w);
  /* the writer's text scans, with the same number of members (the keys
   * came from one object, so they are distinct unless cut or holding NUL) */
  size_t k = 0;
  bool distinct = true;
  for (size_t i = 0; i < n; i++) distinct &= !m[i].key_cut;
  if (!w.failed && distinct) {
    if (!tsr_json_scan_object(w.buf, w.len, m, 16, &k, &err) || k != n) abort();
  }
  tsr_json_writer_free(&w);
  return 0;
}
