/* `tessera top`'s pure pieces: the memory bar and text, the throttled
 * rate, fitting names into columns, and a whole frame rendered from a
 * reply as the daemon writes it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "cli/cli.h"

#define GIB (UINT64_C(1) << 30)
#define MIB (UINT64_C(1) << 20)

static char buf[256];

/* ---- the bar ------------------------------------------------------------------ */

static const char *bar(uint64_t used, uint64_t limit) {
  tsr_cli_top_bar(used, limit, buf, sizeof(buf));
  return buf;
}

Test(cli_top, bar_rounds_to_the_nearest_cell) {
  cr_assert_str_eq(bar(0, 8 * GIB), "[..........]");
  cr_assert_str_eq(bar(4 * GIB, 8 * GIB), "[#####.....]");
  cr_assert_str_eq(bar(31 * GIB / 10, 8 * GIB), "[####......]"); /* 3.875 cells */
  cr_assert_str_eq(bar(3 * GIB, 8 * GIB), "[####......]");       /* 3.75 */
  cr_assert_str_eq(bar(GIB, 8 * GIB), "[#.........]");           /* 1.25 */
}

Test(cli_top, bar_shows_any_use_and_keeps_full_for_the_limit) {
  cr_assert_str_eq(bar(1, 8 * GIB), "[#.........]");
  cr_assert_str_eq(bar(8 * GIB - 1, 8 * GIB), "[#########.]");
  cr_assert_str_eq(bar(8 * GIB, 8 * GIB), "[##########]");
  cr_assert_str_eq(bar(9 * GIB, 8 * GIB), "[##########]"); /* over (NVML's word): full */
  cr_assert_str_eq(bar(5, 0), "[..........]");
}

Test(cli_top, bar_does_not_overflow) {
  cr_assert_str_eq(bar(UINT64_MAX / 2, UINT64_MAX), "[#####.....]");
  cr_assert_str_eq(bar(UINT64_MAX - 1, UINT64_MAX), "[#########.]");
  cr_assert_str_eq(bar(UINT64_MAX, UINT64_MAX), "[##########]");
  tsr_cli_top_bar(1, 2, buf, 5); /* a short buffer is cut, never overrun */
  cr_assert_str_eq(buf, "[###");
}

/* ---- memory ------------------------------------------------------------------- */

static const char *mem(bool has, uint64_t used, uint64_t limit) {
  tsr_cli_top_mem(has, used, limit, buf, sizeof(buf));
  return buf;
}

Test(cli_top, mem_in_the_unit_of_the_limit) {
  cr_assert_str_eq(mem(true, 31 * GIB / 10 + 1, 8 * GIB), "3.1/8.0 GiB");
  cr_assert_str_eq(mem(true, 0, 858993459), "0.0/819.1 MiB"); /* 10% of 8 GiB */
  cr_assert_str_eq(mem(true, 824 * MIB, 2 * GIB), "0.8/2.0 GiB");
  cr_assert_str_eq(mem(true, 100, 512), "100/512 B");
  cr_assert_str_eq(mem(false, 0, 8 * GIB), "-/8.0 GiB");
}

Test(cli_top, mem_keeps_the_limit_under_1000_of_its_unit) {
  cr_assert_str_eq(mem(true, 999 * MIB, 999 * MIB), "999.0/999.0 MiB");
  cr_assert_str_eq(mem(true, 500 * MIB, 1000 * MIB), "0.4/0.9 GiB"); /* truncated, never up */
  cr_assert_str_eq(mem(true, UINT64_MAX, UINT64_MAX), "15.9/15.9 EiB");
  cr_assert_str_eq(mem(true, 0, 0), "0/0 B");
}

/* ---- the throttled rate and durations ------------------------------------------ */

static const char *rate(uint64_t delta, uint64_t elapsed) {
  tsr_cli_top_rate(delta, elapsed, buf, sizeof(buf));
  return buf;
}

Test(cli_top, rate_per_second) {
  cr_assert_str_eq(rate(0, 0), "-/s"); /* no earlier sample */
  cr_assert_str_eq(rate(5, 0), "-/s");
  cr_assert_str_eq(rate(0, TSR_NS_PER_S), "0/s");
  cr_assert_str_eq(rate(120 * TSR_NS_PER_MS, TSR_NS_PER_S), "120ms/s");
  cr_assert_str_eq(rate(60 * TSR_NS_PER_MS, TSR_NS_PER_S / 2), "120ms/s");
  cr_assert_str_eq(rate(3 * TSR_NS_PER_S, 2 * TSR_NS_PER_S), "1.5s/s"); /* threads wait at once */
  cr_assert_str_eq(rate(500 * TSR_NS_PER_US, TSR_NS_PER_S), "<1ms/s");
}

Test(cli_top, rate_does_not_overflow) {
  rate(UINT64_MAX, 1);
  cr_assert(strstr(buf, "/s") && strlen(buf) <= 12, "%s", buf);
  cr_assert_str_eq(rate(UINT64_MAX, UINT64_MAX), "1s/s");
}

/* ---- fitting ------------------------------------------------------------------- */

static const char *fit(const char *text, size_t width) {
  tsr_cli_top_fit(text, width, buf, sizeof(buf));
  return buf;
}

Test(cli_top, fit_cuts_with_a_mark) {
  cr_assert_str_eq(fit("alice", 8), "alice");
  cr_assert_str_eq(fit("abcdefgh", 8), "abcdefgh");
  cr_assert_str_eq(fit("abcdefghi", 8), "abcdefg~");
  cr_assert_str_eq(fit("x", 0), "");
  cr_assert_str_eq(fit("", 8), "");
  tsr_cli_top_fit("abcdefgh", 8, buf, 4); /* the buffer is the limit too */
  cr_assert_str_eq(buf, "ab~");
}

Test(cli_top, fit_shows_no_control_bytes) {
  /* a process may name itself anything: nothing of it reaches the terminal raw */
  cr_assert_str_eq(fit("a\033[2Jb", 16), "a?[2Jb");
  cr_assert_str_eq(fit("tab\there\n", 16), "tab?here?");
  cr_assert_str_eq(fit("caf\xc3\xa9", 16), "caf??");
  cr_assert_str_eq(fit("\x7f", 16), "?");
}

/* ---- a frame ------------------------------------------------------------------- */

/* A reply's "top" object, as the daemon writes it: a GPU with a lease
 * holding one process and an idle lease, and a process of no lease. */
#define PROC(pid, user, command, used, gpu, sm)                                 \
  "{\"pid\":" #pid ",\"uid\":1000,\"user\":\"" user "\",\"command\":\"" command \
  "\","                                                                         \
  "\"slot\":true,\"used_bytes\":" #used ",\"gpu_bytes\":" #gpu ",\"sm_util\":" #sm "}"
#define LEASE(id, owner, limit, used, sm_ppm, measured, throttled, left, revoked, procs)                        \
  "{\"id\":" #id ",\"owner\":\"" owner "\",\"owner_uid\":1000,\"limit_bytes\":" #limit ",\"used_bytes\":" #used \
  ",\"peak_bytes\":0,\"attached\":1,\"gpu_bytes\":null,"                                                        \
  "\"sm_share\":null,\"sm_ppm\":" #sm_ppm ",\"sm_measured\":" #measured                                         \
  ",\"gpu_ns\":0,"                                                                                              \
  "\"throttled_ns\":" #throttled                                                                                \
  ",\"launches\":0,\"bypassed\":0,\"deadline\":\"x\","                                                          \
  "\"deadline_ns\":0,\"remaining_ns\":" #left ",\"revoked\":" #revoked ",\"processes\":[" procs "]}"
#define TOP(leases, unleased)                                                           \
  "{\"now\":\"2026-11-23T15:40:01.000Z\",\"now_ns\":1,\"devices\":[{\"index\":0,"       \
  "\"uuid\":\"GPU-1\",\"name\":\"NVIDIA H100 80GB HBM3\",\"memory_bytes\":85520809984," \
  "\"sm_count\":132,\"sm_committed\":0.3,\"sm_committed_ppm\":300000,\"nvml\":true,"    \
  "\"sm_util_known\":true,\"leases\":[" leases "],\"unleased\":[" unleased "]}]}"

static const char frame_json[] =
    TOP(LEASE(12, "alice", 8589934592, 3328599654, 300000, 28, 4200000000, 7140000000000, false,
              PROC(4242, "alice", "python3", 3328599654, 3400000000,
                   28)) "," LEASE(15, "a-very-long-user-name", 4294967296, 0, 0, null, null, 1740000000000, true, ""),
        PROC(5151, "bob", "stress\\u001b[2J", null, 1073741824, 40));

static char *render(const char *json, size_t width, tsr_cli_top_history_t *h, uint64_t now) {
  char *text = NULL;
  tsr_status_t st = tsr_cli_top_render(json, strlen(json), "tessera top", width, h, now, &text);
  cr_assert_null(st, "%s", tsr_status_message(st));
  return text;
}

Test(cli_top, frame_lines) {
  char *text = render(frame_json, 80, NULL, 0);
  const char *want =
      "tessera top\n"
      "GPU 0  NVIDIA H100 80GB HBM3  79.6 GiB  2 leases  SM committed 30%\n"
      "LEASE OWNER    MEMORY (REPORTED)            SM SET / USED THROTTLED     LEFT\n"
      "12    alice    [####......] 3.0/8.0 GiB     sm 30% / 28%  -/s 4.2s      1h59m\n"
      "      4242    alice    python3                                    3 GiB sm 28%\n"
      "15    a-very-~ [..........] 0.0/4.0 GiB     sm - / -      -             revoked\n"
      "no lease:\n"
      "      5151    bob      stress?[2J                                 1 GiB sm 40%\n";
  cr_assert_str_eq(text, want);
  free(text);
}

Test(cli_top, frame_fits_the_width) {
  size_t widths[] = {20, 40, 60, 80, 200};
  for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
    char *text = render(frame_json, widths[w], NULL, 0);
    for (char *line = text; *line;) {
      char *nl = strchr(line, '\n');
      cr_assert_not_null(nl);
      cr_assert_leq((size_t)(nl - line), widths[w] - 1, "width %zu: '%.*s'", widths[w], (int)(nl - line), line);
      line = nl + 1;
    }
    free(text);
  }
}

Test(cli_top, frame_rates_from_the_frame_before) {
  static const char before[] = TOP(LEASE(12, "alice", 100, 0, 300000, 28, 1000000000, 1, false, ""), "");
  static const char after[] = TOP(LEASE(12, "alice", 100, 0, 300000, 28, 1250000000, 1, false, ""), "");
  tsr_cli_top_history_t h = {0};
  char *text = render(before, 80, &h, 10 * TSR_NS_PER_S);
  cr_assert(strstr(text, " -/s 1s "), "%s", text);
  cr_assert_eq(h.count, 1);
  cr_assert_eq(h.at_ns, 10 * TSR_NS_PER_S);
  free(text);
  text = render(after, 80, &h, 10 * TSR_NS_PER_S + TSR_NS_PER_S / 2); /* 250 ms in 500 ms */
  cr_assert(strstr(text, " 500ms/s 1.2s "), "%s", text);
  free(text);
  /* a region made anew starts from 0: no negative rate */
  text = render(before, 80, &h, 11 * TSR_NS_PER_S);
  cr_assert(strstr(text, " 0/s 1s "), "%s", text);
  free(text);
  tsr_cli_top_history_free(&h);
}

Test(cli_top, frame_of_no_device_and_of_no_lease) {
  char *text = render("{\"now\":\"x\",\"devices\":[]}", 80, NULL, 0);
  cr_assert_str_eq(text, "tessera top\nno devices\n");
  free(text);
  text = render(TOP("", ""), 80, NULL, 0);
  cr_assert_str_eq(text, "tessera top\nGPU 0  NVIDIA H100 80GB HBM3  79.6 GiB  0 leases  SM committed 30%\n");
  free(text);
}

Test(cli_top, a_device_with_creates_waiting_says_how_many) {
  /* the same frame with "queued" added after "nvml" */
  const char *plain = TOP("", "");
  const char *at = strstr(plain, "\"nvml\":true,");
  cr_assert_not_null(at);
  char *frame = NULL;
  cr_assert_gt(asprintf(&frame, "%.*s\"queued\":3,%s", (int)(at - plain), plain, at), 0);
  char *text = render(frame, 80, NULL, 0);
  cr_assert_str_eq(text,
                   "tessera top\nGPU 0  NVIDIA H100 80GB HBM3  79.6 GiB  0 leases  SM committed 30%  3 waiting\n");
  free(text);
  free(frame);
}

Test(cli_top, malformed_replies_are_refused_whole) {
  static const char *const bad[] = {
      "",
      "[]",
      "{\"devices\":{}}",
      "{\"devices\":[1]}",
      "{\"devices\":[{\"index\":0}]}",
      TOP("{\"id\":1}", ""),
      TOP(LEASE(1, "a", 1, 0, 2000000, null, null, 1, false, ""), ""), /* a share over 100% */
      TOP(LEASE(1, "a", 1, 0, 0, null, null, 1, false, "{\"pid\":-1}"), ""),
      TOP("", "{\"pid\":1,\"user\":\"a\",\"command\":\"c\",\"used_bytes\":\"x\"}"),
  };
  tsr_cli_top_history_t h = {0};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char *text = (char *)"untouched";
    tsr_status_t st = tsr_cli_top_render(bad[i], strlen(bad[i]), "t", 80, &h, 5, &text);
    cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS, "case %zu", i);
    cr_assert_null(text, "case %zu", i);
    cr_assert_eq(h.at_ns, 0, "case %zu: the history moved", i);
    tsr_status_free(st);
  }
}
