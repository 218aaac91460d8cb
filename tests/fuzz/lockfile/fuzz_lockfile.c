/* fuzz_lockfile.c: libFuzzer target for the lock-file parser.
 *
 * The daemon reads every lock file in its state directory at start, and a
 * file it cannot read is quarantined, never a crash. For every input: parsing
 * must not crash or read out of bounds (ASan, UBSan); a refusal is DATA_LOSS
 * with a message and leaves the lease untouched; an accepted lease holds
 * values in the ranges the parser promises, formats, and parses back to the
 * same lease, whose formatted text is then a fixed point. Built and run by
 * run.sh (registered with ctest as fuzz.lockfile). */
#include <stdlib.h>
#include <string.h>

#include "lease/lease.h"

#include "../check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool tsr__name_ok(const char *name) {
  size_t n = strnlen(name, TSR_LEASE_NAME_MAX);
  if (n == 0 || n == TSR_LEASE_NAME_MAX) return false;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)name[i] <= 0x20 || name[i] == 0x7f) return false;
  return true;
}

static bool tsr__same(const tsr_lease_t *a, const tsr_lease_t *b) {
  return a->id == b->id && a->device == b->device && a->fraction_ppm == b->fraction_ppm && a->bytes == b->bytes &&
         a->sm_ppm == b->sm_ppm && a->owner_uid == b->owner_uid && a->creator_uid == b->creator_uid &&
         a->pid == b->pid && strcmp(a->owner, b->owner) == 0 && strcmp(a->creator, b->creator) == 0 &&
         strcmp(a->host, b->host) == 0 && a->start_wall_ns == b->start_wall_ns &&
         a->deadline_wall_ns == b->deadline_wall_ns && a->state == b->state;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A copy without a terminator: the parser must respect `len`. */
  char *text = malloc(size ? size : 1);
  FUZZ_CHECK(text);
  if (size) memcpy(text, data, size);

  tsr_lease_t lease, sentinel;
  memset(&sentinel, 0xa5, sizeof(sentinel));
  memcpy(&lease, &sentinel, sizeof(lease));
  tsr_status_t st = tsr_lease_lockfile_parse(text, size, &lease);
  if (st) {
    FUZZ_CHECK(tsr_status_code(st) == TSR_DATA_LOSS);
    FUZZ_CHECK(tsr_status_message(st)[0] != '\0');
    FUZZ_CHECK(memcmp(&lease, &sentinel, sizeof(lease)) == 0);
    tsr_status_free(st);
    free(text);
    return 0;
  }

  FUZZ_CHECK(lease.state == TSR_LEASE_ACTIVE);
  FUZZ_CHECK(lease.id > 0 && lease.id <= TSR_LEASE_ID_MAX && lease.bytes > 0);
  FUZZ_CHECK(lease.device <= 1023 && lease.pid >= 0);
  FUZZ_CHECK(lease.fraction_ppm > 0 && lease.fraction_ppm <= 1000000);
  FUZZ_CHECK(lease.sm_ppm <= 1000000);
  FUZZ_CHECK(lease.owner_uid != UINT32_MAX && lease.creator_uid != UINT32_MAX);
  FUZZ_CHECK(tsr__name_ok(lease.owner) && tsr__name_ok(lease.creator) && tsr__name_ok(lease.host));
  FUZZ_CHECK(lease.deadline_wall_ns > lease.start_wall_ns);

  /* Whatever was accepted can be written back (the limit is the parser's),
   * and what is written reads back as the same lease. */
  char out[4096], again[4096];
  size_t n = tsr_lease_lockfile_format(&lease, out, sizeof(out));
  FUZZ_CHECK(n > 0 && n <= 4096);
  tsr_lease_t back;
  st = tsr_lease_lockfile_parse(out, n, &back);
  FUZZ_CHECK(st == NULL);
  FUZZ_CHECK(tsr__same(&lease, &back));
  size_t m = tsr_lease_lockfile_format(&back, again, sizeof(again));
  FUZZ_CHECK(m == n && memcmp(out, again, n) == 0);

  /* The file name carries device, lock key and id, as the store expects. */
  char name[128];
  tsr_lease_lockfile_name(&lease, name, sizeof(name));
  FUZZ_CHECK(strncmp(name, "gpu_", 4) == 0 && strstr(name, ".lock") != NULL);
  free(text);
  return 0;
}
