#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "tessera/status.h"

Test(status, ok_is_null_and_free) {
  tsr_status_t st = NULL;
  cr_assert(tsr_status_is_ok(st));
  cr_assert_eq(tsr_status_code(st), TSR_OK);
  cr_assert_str_eq(tsr_status_message(st), "ok");
  tsr_status_free(st);
}

Test(status, make_formats_message) {
  tsr_status_t st = tsr_status_make(TSR_NOT_FOUND, "lease %d on %s", 7, "gpu0");
  cr_assert_not(tsr_status_is_ok(st));
  cr_assert_eq(tsr_status_code(st), TSR_NOT_FOUND);
  cr_assert_str_eq(tsr_status_message(st), "lease 7 on gpu0");
  tsr_status_free(st);
}

Test(status, make_with_ok_code_is_internal) {
  tsr_status_t st = tsr_status_make(TSR_OK, "oops");
  cr_assert_eq(tsr_status_code(st), TSR_INTERNAL);
  tsr_status_free(st);
}

Test(status, annotate_prefixes_and_keeps_code) {
  tsr_status_t st = tsr_status_annotate(tsr_status_make(TSR_DATA_LOSS, "bad line 3"), "%s", "f.lock");
  cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS);
  cr_assert_str_eq(tsr_status_message(st), "f.lock: bad line 3");
  tsr_status_free(st);
  cr_assert_null(tsr_status_annotate(NULL, "x"));
}

Test(status, from_errno_maps_codes) {
  tsr_status_t st = tsr_status_from_errno(ENOENT, "open %s", "/x");
  cr_assert_eq(tsr_status_code(st), TSR_NOT_FOUND);
  cr_assert(strstr(tsr_status_message(st), "open /x: ") == tsr_status_message(st));
  tsr_status_free(st);
  st = tsr_status_from_errno(EACCES, "x");
  cr_assert_eq(tsr_status_code(st), TSR_PERMISSION_DENIED);
  tsr_status_free(st);
  st = tsr_status_from_errno(EIO, "x");
  cr_assert_eq(tsr_status_code(st), TSR_IO_ERROR);
  tsr_status_free(st);
}

Test(status, code_names_round_trip) {
  for (int c = 0; c < TSR_STATUS_CODE_COUNT; c++) {
    tsr_status_code_t back;
    cr_assert(tsr_status_code_from_name(tsr_status_code_name((tsr_status_code_t)c), &back));
    cr_assert_eq((int)back, c);
  }
  tsr_status_code_t dummy;
  cr_assert_not(tsr_status_code_from_name("no_such_code", &dummy));
  cr_assert_not(tsr_status_code_from_name(NULL, &dummy));
  cr_assert_str_eq(tsr_status_code_name((tsr_status_code_t)999), "unknown");
}

Test(status, long_message_is_kept_whole) {
  char big[5000];
  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  tsr_status_t st = tsr_status_make(TSR_INTERNAL, "%s", big);
  cr_assert_eq(strlen(tsr_status_message(st)), sizeof(big) - 1);
  tsr_status_free(st);
}
