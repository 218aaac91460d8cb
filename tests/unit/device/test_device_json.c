/* A device's JSON both ways (src/proto): what tsr_proto_device_write writes,
 * tsr_proto_device_parse reads back, as the CLI and the Slurm plugin read
 * the daemon's "devices" reply. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "proto/proto.h"

static tsr_proto_device_t out;

static void parse_ok(const char *text) {
  memset(&out, 0xab, sizeof(out));
  tsr_status_t st = tsr_proto_device_parse(text, strlen(text), &out);
  cr_assert_null(st, "%s: %s", text, tsr_status_message(st));
}

static void parse_bad(const char *text) {
  static tsr_proto_device_t fill;
  memset(&fill, 0xab, sizeof(fill));
  memset(&out, 0xab, sizeof(out));
  tsr_status_t st = tsr_proto_device_parse(text, strlen(text), &out);
  cr_assert_not_null(st, "accepted: %s", text);
  cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS);
  cr_assert(strstr(tsr_status_message(st), "malformed device object"), "%s", tsr_status_message(st));
  cr_assert(memcmp(&out, &fill, sizeof(out)) == 0, "*out changed on error: %s", text);
  tsr_status_free(st);
}

Test(device_json, what_is_written_reads_back) {
  tsr_device_t d = {.index = 3,
                    .name = "NVIDIA H100 80GB HBM3",
                    .uuid = "GPU-1",
                    .total_bytes = 85520809984ULL,
                    .sm_count = 132,
                    .mig = TSR_DEVICE_MIG_DISABLED,
                    .source = TSR_DEVICE_FROM_NVML,
                    .kind = TSR_DEVICE_KIND_CUDA,
                    .pci = "0000:01:00.0",
                    .has_minor = true,
                    .minor = TSR_DEVICE_MINOR_MAX};
  tsr_json_writer_t w = {0};
  tsr_proto_device_write(&w, &d, 1024, 250000, 2);
  cr_assert(!w.failed);
  memset(&out, 0xab, sizeof(out));
  cr_assert_null(tsr_proto_device_parse(w.buf, w.len, &out));
  cr_assert_eq(out.index, 3);
  cr_assert_str_eq(out.name, "NVIDIA H100 80GB HBM3");
  cr_assert_eq(out.memory_bytes, 85520809984ULL);
  cr_assert_eq(out.available_bytes, 1024);
  cr_assert_eq(out.sm_count, 132);
  cr_assert_eq(out.sm_committed_ppm, 250000);
  cr_assert_eq(out.leases, 2);
  cr_assert_str_eq(out.mig, "disabled");
  cr_assert_str_eq(out.source, "nvml");
  cr_assert_str_eq(out.kind, "cuda");
  cr_assert(out.has_minor);
  cr_assert_eq(out.minor, TSR_DEVICE_MINOR_MAX);
  /* a declared device: no minor (null), no SM count (null), OpenCL */
  tsr_device_t o = {.index = 0,
                    .name = "OpenCL pthread-*",
                    .total_bytes = 4ull << 30,
                    .source = TSR_DEVICE_FROM_CONFIG,
                    .kind = TSR_DEVICE_KIND_OPENCL,
                    .opencl = "pthread-*"};
  tsr_json_writer_reset(&w);
  tsr_proto_device_write(&w, &o, 4ull << 30, 0, 0);
  cr_assert_null(tsr_proto_device_parse(w.buf, w.len, &out));
  cr_assert(!out.has_minor, "null: unknown, never minor 0");
  cr_assert_eq(out.minor, 0);
  cr_assert_eq(out.sm_count, 0);
  cr_assert_str_eq(out.kind, "opencl");
  cr_assert_str_eq(out.source, "config");
  cr_assert_str_eq(out.mig, "unknown");
  tsr_json_writer_free(&w);
}

#define BASE                                                                                      \
  "\"index\":1,\"name\":\"GPU 1\",\"memory_bytes\":100,\"available_bytes\":50,\"sm_count\":null," \
  "\"sm_committed_ppm\":0,\"leases\":0,\"mig\":\"unknown\",\"source\":\"config\""

/* Daemons before "kind" and "minor" wrote neither: cuda, and no minor. */
Test(device_json, older_daemons) {
  parse_ok("{" BASE "}");
  cr_assert_str_eq(out.kind, "cuda");
  cr_assert(!out.has_minor);
  cr_assert_eq(out.index, 1);
  parse_ok("{" BASE ",\"minor\":0}");
  cr_assert(out.has_minor, "minor 0 is a minor");
  cr_assert_eq(out.minor, 0);
  parse_ok("{" BASE ",\"minor\":4294967295,\"kind\":\"opencl\",\"future\":[1,2]}");
  cr_assert_eq(out.minor, UINT32_MAX);
  cr_assert_str_eq(out.kind, "opencl");
}

Test(device_json, malformed_objects_are_refused_whole) {
  parse_bad("[]");
  parse_bad("{" BASE ",\"minor\":\"0\"}");
  parse_bad("{" BASE ",\"minor\":4294967296}");
  parse_bad("{" BASE ",\"minor\":-1}");
  parse_bad("{" BASE ",\"kind\":7}");
  parse_bad(
      "{\"index\":4294967296,\"name\":\"GPU 1\",\"memory_bytes\":100,\"available_bytes\":50,"
      "\"sm_count\":null,\"sm_committed_ppm\":0,\"leases\":0,\"mig\":\"unknown\",\"source\":\"config\"}");
  parse_bad(
      "{\"index\":1,\"memory_bytes\":100,\"available_bytes\":50,\"sm_count\":null,"
      "\"sm_committed_ppm\":0,\"leases\":0,\"mig\":\"unknown\",\"source\":\"config\"}");
  parse_bad(
      "{\"index\":1,\"name\":\"GPU 1\",\"memory_bytes\":100,\"available_bytes\":50,"
      "\"sm_committed_ppm\":0,\"leases\":0,\"mig\":\"unknown\",\"source\":\"config\"}");
  memset(&out, 0, sizeof(out));
  tsr_status_t st = tsr_proto_device_parse(NULL, 0, &out);
  cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS);
  tsr_status_free(st);
}
