/* mig/json.c: doubles and output on base/json's writer (see json.h). */
#include "mig/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tsr_mig_json_double(tsr_json_writer_t *w, double value) {
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

void tsr_mig_json_key_double(tsr_json_writer_t *w, const char *key, double value) {
  tsr_json_key(w, key);
  tsr_mig_json_double(w, value);
}

void tsr_mig_json_key_int(tsr_json_writer_t *w, const char *key, int64_t value) {
  tsr_json_key(w, key);
  tsr_json_i64(w, value);
}

tsr_status_t tsr_mig_json_write(const tsr_json_writer_t *w, FILE *out) {
  if (w->failed || !w->buf) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory writing JSON");
  fputs(w->buf, out);
  fputc('\n', out);
  return ferror(out) ? tsr_status_make(TSR_IO_ERROR, "could not write the JSON") : NULL;
}
