/* The Slurm plugin's decisions about a job's GPUs (contrib/slurm/slurm_gpus.h),
 * without Slurm's daemons: what counts as asking for a GPU at submission,
 * how gres.conf numbers a node's GPUs, which tesserad device is which, and
 * how long a lease may last. slurm.sh drives the same code through a real
 * Slurm. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slurm_gpus.h"

static void expect_code(tsr_status_t st, tsr_status_code_t code, const char *needle) {
  cr_assert_not_null(st, "accepted (wanted '%s')", needle);
  cr_assert_eq(tsr_status_code(st), code, "%s", tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), needle), "'%s' lacks '%s'", tsr_status_message(st), needle);
  tsr_status_free(st);
}

/* ---- at submission ------------------------------------------------------------ */

Test(slurm_submit, gres_values) {
  static const char *const yes[] = {"gpu",        "gpu:2",        "gpu:a100:2",          "shard:1",
                                    "gres:gpu:1", "gres/shard:2", "craynetwork:1,gpu:1", "gpu:1k",
                                    "gpu:a100"};
  static const char *const no[] = {"none",   "gpu:0", "gpu:a100:0", "craynetwork:1",
                                   "gpus:1", "",      "mps:100",    "shard:0,gpu:0"};
  for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) cr_assert(tsr_slurm_gres_spec_asks(yes[i]), "%s", yes[i]);
  for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) cr_assert(!tsr_slurm_gres_spec_asks(no[i]), "%s", no[i]);
  cr_assert(!tsr_slurm_gres_spec_asks(NULL));
  /* slurmctld's record of a request (tres_per_node, ...) */
  cr_assert(tsr_slurm_gres_spec_asks("gres:gpu:1"));
  cr_assert(tsr_slurm_gres_spec_asks("gres:craynetwork:1;gres:shard:2"), "';' separates too");
  cr_assert(!tsr_slurm_gres_spec_asks("gres:craynetwork:1;gres:gpu:0"));
}

/* Which of the two: --gpu-sm alone governs shards only. */
Test(slurm_submit, gres_kinds) {
  cr_assert_eq(tsr_slurm_gres_spec_asks("gpu:1"), TSR_SLURM_ASKS_GPU);
  cr_assert_eq(tsr_slurm_gres_spec_asks("gpu:a100"), TSR_SLURM_ASKS_GPU);
  cr_assert_eq(tsr_slurm_gres_spec_asks("shard:1"), TSR_SLURM_ASKS_SHARD);
  cr_assert_eq(tsr_slurm_gres_spec_asks("gres/shard:2"), TSR_SLURM_ASKS_SHARD);
  cr_assert_eq(tsr_slurm_gres_spec_asks("shard:0,gpu:1"), TSR_SLURM_ASKS_GPU);
  cr_assert_eq(tsr_slurm_gres_spec_asks("gpu:1,shard:2"), TSR_SLURM_ASKS_GPU | TSR_SLURM_ASKS_SHARD,
               "every element, not the first that asks");
  cr_assert_eq(tsr_slurm_gres_spec_asks("Shard:1"), 0, "GRES names are case-sensitive");
  cr_assert_eq(tsr_slurm_gpus_spec_asks("a100:2"), TSR_SLURM_ASKS_GPU);
  cr_assert_eq(tsr_slurm_tres_asks("cpu=1,gres/shard=2"), TSR_SLURM_ASKS_SHARD);
  cr_assert_eq(tsr_slurm_tres_asks("cpu=1,gres/gpu:a100=1"), TSR_SLURM_ASKS_GPU);
  cr_assert_eq(tsr_slurm_tres_asks("gres/gpu=1,gres/shard=1"), TSR_SLURM_ASKS_GPU | TSR_SLURM_ASKS_SHARD);
}

Test(slurm_submit, gpus_values) {
  cr_assert(tsr_slurm_gpus_spec_asks("1"));
  cr_assert(tsr_slurm_gpus_spec_asks("a100:2"));
  cr_assert(tsr_slurm_gpus_spec_asks("a100:0,v100:1"));
  cr_assert(tsr_slurm_gpus_spec_asks("lots"), "Slurm refuses it, not this check");
  cr_assert(!tsr_slurm_gpus_spec_asks("0"));
  cr_assert(!tsr_slurm_gpus_spec_asks("a100:0"));
  cr_assert(!tsr_slurm_gpus_spec_asks(""));
}

static unsigned words(int n, ...) {
  char *w[16];
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) w[i] = va_arg(ap, char *);
  va_end(ap);
  return tsr_slurm_words_ask(n, w);
}

Test(slurm_submit, command_lines) {
  cr_assert(!words(4, "-t", "5", "--gpu-mem=25%", "sh"), "no GPU asked for");
  cr_assert(words(2, "--gres=gpu:1", "sh"));
  cr_assert(words(3, "--gres", "gpu:1", "sh"), "the value in the next word");
  cr_assert(!words(2, "--gres=none", "sh"));
  cr_assert(words(3, "-G", "1", "sh"));
  cr_assert(words(2, "-G1", "sh"));
  cr_assert(!words(2, "-G0", "sh"));
  cr_assert(words(2, "--gpus=2", "sh"));
  cr_assert(words(2, "--gpus-per-node=1", "sh"));
  cr_assert(words(3, "--gpus-per-task", "1", "sh"));
  cr_assert(words(2, "--gpus-per-socket=1", "sh"));
  cr_assert(words(2, "--gpus-per-n=1", "sh"), "getopt takes an abbreviation");
  cr_assert(!words(2, "--gres-flags=enforce-binding", "sh"), "not a GRES");
  cr_assert(!words(2, "--gpu-sm=30%", "sh"));
  cr_assert(!words(1, "--gres"), "no value");
  cr_assert(!words(3, "--", "sh", "--gres=gpu:1"), "past --: the command's");
  cr_assert(!words(2, "--gr=gpu:1", "sh"), "too short to be read as --gres");
  cr_assert(!tsr_slurm_words_ask(0, NULL));
  cr_assert_eq(words(2, "--gres=shard:1", "sh"), TSR_SLURM_ASKS_SHARD);
  cr_assert_eq(words(3, "-G1", "--gres=shard:2", "sh"), TSR_SLURM_ASKS_GPU | TSR_SLURM_ASKS_SHARD);
  cr_assert_eq(words(4, "--gres=shard:1", "--", "sh", "-G1"), TSR_SLURM_ASKS_SHARD, "what comes before --");
}

Test(slurm_submit, sbatch_scripts) {
  const char *s = "#!/bin/sh\n#SBATCH -t 5\n\n#SBATCH --gres=gpu:1\nsrun nvidia-smi\n";
  cr_assert(tsr_slurm_script_asks(s, strlen(s)));
  s = "#!/bin/sh\necho hello\n#SBATCH --gres=gpu:1\n";
  cr_assert(!tsr_slurm_script_asks(s, strlen(s)), "sbatch reads no #SBATCH after a command");
  s = "#!/bin/bash\n# a comment\n#SBATCH -G 2 # two\n";
  cr_assert(tsr_slurm_script_asks(s, strlen(s)));
  s = "#!/bin/sh\n#SBATCH --gres='shard:2'\n";
  cr_assert(tsr_slurm_script_asks(s, strlen(s)), "quoted");
  s = "#!/bin/sh\n#SBATCH --gpus=0\n#sbatch --gres=gpu:1\n";
  cr_assert(!tsr_slurm_script_asks(s, strlen(s)), "#sbatch is a comment");
  s = "#!/bin/sh\n#SBATCH --gres=gpu:1";
  cr_assert(!tsr_slurm_script_asks(s, 12), "only the bytes given");
  s = "#!/bin/sh\n#SBATCH --gres=shard:2\n";
  cr_assert_eq(tsr_slurm_script_asks(s, strlen(s)), TSR_SLURM_ASKS_SHARD);
  s = "#!/bin/sh\n#SBATCH -G 1\n#SBATCH --gres=shard:2\necho\n#SBATCH --gres=gpu:1\n";
  cr_assert_eq(tsr_slurm_script_asks(s, strlen(s)), TSR_SLURM_ASKS_GPU | TSR_SLURM_ASKS_SHARD,
               "every #SBATCH line before the first command");
}

/* Leaves non-NUL bytes where the next call's stack frames will be, so that a
 * read of bytes nobody wrote there does not find a terminator by luck. */
__attribute__((noinline)) static void dirty_stack(void) {
  volatile char junk[32768];
  for (size_t i = 0; i < sizeof(junk); i++) junk[i] = 'x';
}

Test(slurm_submit, sbatch_line_longer_than_the_buffer) {
  /* one word of 6007 bytes: the first 4095 ("--gpus=" and 2044 "0,": no GPU)
   * are read, ended where the line's buffer ends, never past it */
  static char s[32 + 6007];
  size_t n = (size_t)snprintf(s, sizeof(s), "#!/bin/sh\n#SBATCH --gpus=");
  for (int k = 0; k < 3000; k++) {
    s[n++] = '0';
    s[n++] = ',';
  }
  s[n++] = '\n';
  s[n] = '\0';
  dirty_stack();
  cr_assert_eq(tsr_slurm_script_asks(s, n), 0);
}

static const char *fake_env[][2] = {{NULL, NULL}, {NULL, NULL}, {NULL, NULL}};
static const char *fake_getenv(const char *name) {
  for (size_t i = 0; i < 3; i++)
    if (fake_env[i][0] && strcmp(fake_env[i][0], name) == 0) return fake_env[i][1];
  return NULL;
}

Test(slurm_submit, input_variables) {
  fake_env[0][0] = "SLURM_GRES", fake_env[0][1] = "gpu:1";
  cr_assert(tsr_slurm_env_asks(TSR_SLURM_SRUN, fake_getenv));
  cr_assert(!tsr_slurm_env_asks(TSR_SLURM_SBATCH, fake_getenv), "srun's variable, not sbatch's");
  fake_env[0][0] = "SBATCH_GPUS", fake_env[0][1] = "1";
  cr_assert(tsr_slurm_env_asks(TSR_SLURM_SBATCH, fake_getenv));
  fake_env[0][0] = "SALLOC_GPUS_PER_NODE", fake_env[0][1] = "2";
  cr_assert(tsr_slurm_env_asks(TSR_SLURM_SALLOC, fake_getenv));
  fake_env[0][0] = "SLURM_GRES", fake_env[0][1] = "none";
  fake_env[1][0] = "SLURM_GPUS", fake_env[1][1] = "0";
  cr_assert(!tsr_slurm_env_asks(TSR_SLURM_SRUN, fake_getenv));
  fake_env[1][0] = "SLURM_GPUS_PER_TASK", fake_env[1][1] = "1";
  cr_assert_eq(tsr_slurm_env_asks(TSR_SLURM_SRUN, fake_getenv), TSR_SLURM_ASKS_GPU);
  fake_env[0][0] = "SLURM_GRES", fake_env[0][1] = "shard:2";
  cr_assert_eq(tsr_slurm_env_asks(TSR_SLURM_SRUN, fake_getenv), TSR_SLURM_ASKS_GPU | TSR_SLURM_ASKS_SHARD);
  fake_env[1][0] = NULL;
  cr_assert_eq(tsr_slurm_env_asks(TSR_SLURM_SRUN, fake_getenv), TSR_SLURM_ASKS_SHARD);
}

Test(slurm_submit, allocated_tres) {
  cr_assert(tsr_slurm_tres_asks("cpu=1,mem=1M,node=1,billing=1,gres/gpu=1"));
  cr_assert(tsr_slurm_tres_asks("cpu=1,mem=1M,node=1,billing=1,gres/shard=2"));
  cr_assert(tsr_slurm_tres_asks("cpu=1,gres/gpu:a100=1"));
  cr_assert(!tsr_slurm_tres_asks("cpu=1,mem=1M,node=1,billing=1"));
  cr_assert(!tsr_slurm_tres_asks("cpu=1,gres/gpu=0"));
  cr_assert(!tsr_slurm_tres_asks("gres/gpumem=1"));
  cr_assert(!tsr_slurm_tres_asks(NULL));
}

/* ---- gres.conf --------------------------------------------------------------------- */

static tsr_slurm_gpus_t g;

static void gres_ok(const char *text, const char *node) {
  memset(&g, 0xab, sizeof(g));
  tsr_status_t st = tsr_slurm_gres_conf_parse(text, "gres.conf", node, &g);
  cr_assert_null(st, "%s", tsr_status_message(st));
}

static void gres_bad(const char *text, tsr_status_code_t code, const char *needle) {
  static tsr_slurm_gpus_t fill;
  memset(&fill, 0xab, sizeof(fill));
  memset(&g, 0xab, sizeof(g));
  expect_code(tsr_slurm_gres_conf_parse(text, "gres.conf", "n1", &g), code, needle);
  cr_assert(memcmp(&g, &fill, sizeof(g)) == 0, "*out changed on error (%s)", needle);
}

Test(slurm_gres, one_file_a_gpu_in_order) {
  gres_ok(
      "AutoDetect=off\nName=gpu File=/dev/nvidia3\nName=gpu File=/dev/nvidia1\n"
      "Name=shard Count=4 File=/dev/nvidia1\nName=shard Count=8 File=/dev/nvidia3\n",
      "n1");
  cr_assert_eq(g.count, 2);
  cr_assert_str_eq(g.gpu[0].file, "/dev/nvidia3", "Slurm's GPU 0 is the first listed, not nvidia0");
  cr_assert_eq(g.gpu[0].dev_num, 3);
  cr_assert_eq(g.gpu[0].shards, 8);
  cr_assert_eq(g.gpu[1].dev_num, 1);
  cr_assert_eq(g.gpu[1].shards, 4);
}

Test(slurm_gres, ranges_and_shards_split) {
  gres_ok("Name=gpu Type=a100 File=/dev/nvidia[0-3]\nName=shard Count=16 File=/dev/nvidia[0-3]\n", "n1");
  cr_assert_eq(g.count, 4);
  for (uint32_t i = 0; i < 4; i++) {
    cr_assert_eq(g.gpu[i].dev_num, i);
    cr_assert_eq(g.gpu[i].shards, 4);
  }
  gres_ok("Name=gpu File=/dev/nvidia[0,2,5]\nName=shard Count=10\n", "n1");
  cr_assert_eq(g.count, 3);
  cr_assert_eq(g.gpu[2].dev_num, 5);
  /* one record without File: Count spread over the GPUs as Slurm spreads it */
  cr_assert_eq(g.gpu[0].shards, 3);
  cr_assert_eq(g.gpu[1].shards, 3);
  cr_assert_eq(g.gpu[2].shards, 4);
  gres_ok("Name=gpu File=/dev/nvidia0,/dev/nvidia1\n", "n1");
  cr_assert_eq(g.count, 2);
  cr_assert_eq(g.gpu[1].shards, 0, "no shard record: none");
}

Test(slurm_gres, node_lines_after_the_others) {
  const char *conf =
      "NodeName=n[1-2] Name=gpu File=/dev/nvidia1\n"
      "Name=gpu File=/dev/nvidia0\n"
      "NodeName=n3 Name=gpu File=/dev/nvidia7\n";
  gres_ok(conf, "n2");
  cr_assert_eq(g.count, 2);
  cr_assert_eq(g.gpu[0].dev_num, 0, "slurmd lists the lines without NodeName first");
  cr_assert_eq(g.gpu[1].dev_num, 1);
  gres_ok(conf, "n3");
  cr_assert_eq(g.count, 2);
  cr_assert_eq(g.gpu[1].dev_num, 7);
  gres_ok(conf, "other");
  cr_assert_eq(g.count, 1);
}

Test(slurm_gres, syntax) {
  gres_ok("# a comment\n\nname=gpu file=/dev/nvidia2\nNAME=gpu \\\n  FILE=\"/dev/nvidia4\" # the second\n", "n1");
  cr_assert_eq(g.count, 2, "keys in any case, a continued line, a quoted value");
  cr_assert_eq(g.gpu[1].dev_num, 4);
  gres_ok("Name=gpu Count=2\n", "n1");
  cr_assert_eq(g.count, 0, "a count without files gives Slurm no device index");
  gres_ok("AutoDetect=nvml\nNodeName=n1 AutoDetect=off\nName=gpu File=/dev/nvidia0\n", "n1");
  cr_assert_eq(g.count, 1, "the node's AutoDetect=off wins over the file's");
  gres_ok("", "n1");
  cr_assert_eq(g.count, 0);
}

Test(slurm_gres, what_cannot_be_followed_is_refused) {
  gres_bad("AutoDetect=nvml\nName=gpu File=/dev/nvidia0\n", TSR_FAILED_PRECONDITION, "AutoDetect is on");
  gres_bad("NodeName=n1 AutoDetect=nvml\nName=gpu File=/dev/nvidia0\n", TSR_FAILED_PRECONDITION, "AutoDetect");
  gres_bad("Name=gpu MultipleFiles=/dev/nvidia0,/dev/nvidia1\n", TSR_FAILED_PRECONDITION,
           "gres.conf:1: a gpu with MultipleFiles=");
  gres_bad("Name=gpu Type=a100 File=/dev/nvidia0\nName=gpu Type=v100 File=/dev/nvidia1\n", TSR_FAILED_PRECONDITION,
           "gres.conf:2: GPUs of two types ('a100', 'v100')");
  gres_bad("Name=gpu File=/dev/gpu\n", TSR_FAILED_PRECONDITION, "File=/dev/gpu does not end in its device number");
  gres_bad("Name=gpu File=/dev/nvidia1\nName=gpu File=/dev/dri/card1\n", TSR_FAILED_PRECONDITION,
           "gres.conf:2: gpu File=/dev/dri/card1 has the number of /dev/nvidia1");
  gres_bad("Include /etc/slurm/gres.d/x.conf\n", TSR_FAILED_PRECONDITION, "gres.conf:1: Include is not followed");
  gres_bad("Include=/etc/slurm/x.conf\n", TSR_FAILED_PRECONDITION, "Include is not followed");
  gres_bad("Name=gpu File\n", TSR_INVALID_ARGUMENT, "gres.conf:1: 'File' is not key=value");
  gres_bad("Name=gpu File=/dev/nvidia[0-64]\n", TSR_FAILED_PRECONDITION, "more than 64 GPUs");
  gres_bad("Name=gpu File=/dev/nvidia0\nName=shard Count=lots File=/dev/nvidia0\n", TSR_INVALID_ARGUMENT,
           "gres.conf:2: shard Count=lots is not a count");
  gres_bad("Name=gpu File=/dev/nvidia0\nName=shard Count=4\nName=shard Count=4 File=/dev/nvidia0\n",
           TSR_INVALID_ARGUMENT, "both with and without File=");
  /* two without File= are not "with and without": their own reason */
  gres_bad("Name=gpu File=/dev/nvidia[0-1]\nName=shard Count=4\nName=shard Count=4\n", TSR_FAILED_PRECONDITION,
           "gres.conf: 2 shard records without File=: how Slurm spreads");
  /* a shard File= as long as a GPU's may be, and not one byte longer */
  char text[1024], file[TSR_SLURM_FILE_MAX + 1];
  memset(file, 'x', sizeof(file));
  memcpy(file, "/dev/", 5);
  file[TSR_SLURM_FILE_MAX - 2] = '0';
  file[TSR_SLURM_FILE_MAX - 1] = '\0'; /* 255 bytes */
  snprintf(text, sizeof(text), "Name=gpu File=%s\nName=shard Count=4 File=%s\n", file, file);
  gres_ok(text, "n1");
  cr_assert_eq(g.count, 1);
  cr_assert_eq(g.gpu[0].shards, 4, "a 255-byte shard File= matches its GPU");
  file[TSR_SLURM_FILE_MAX - 1] = '0';
  file[TSR_SLURM_FILE_MAX] = '\0'; /* 256 bytes */
  snprintf(text, sizeof(text), "Name=gpu File=/dev/nvidia0\nName=shard Count=4 File=%s\n", file);
  gres_bad(text, TSR_INVALID_ARGUMENT, "gres.conf:2: a File= path is over 255 bytes");
}

/* ---- the step's GPUs ---------------------------------------------------------------- */

Test(slurm_step, index_lists) {
  uint32_t idx[4];
  size_t n = 99;
  cr_assert_null(tsr_slurm_index_list_parse("0", idx, 4, &n));
  cr_assert_eq(n, 1);
  cr_assert_eq(idx[0], 0);
  cr_assert_null(tsr_slurm_index_list_parse("3,1", idx, 4, &n));
  cr_assert_eq(n, 2);
  cr_assert_eq(idx[0], 3);
  cr_assert_eq(idx[1], 1);
  static const char *const bad[] = {"", "0,", ",0", "a", "-1", "1,1", "64", "GPU-1234", "0 1", "1,2,3,0,5"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    n = 99;
    tsr_status_t st = tsr_slurm_index_list_parse(bad[i], idx, 4, &n);
    cr_assert_not_null(st, "accepted '%s'", bad[i]);
    cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
    cr_assert_eq(n, 0);
    tsr_status_free(st);
  }
  n = 99;
  expect_code(tsr_slurm_index_list_parse(NULL, idx, 4, &n), TSR_INVALID_ARGUMENT, "'' is not a list of GPU indices");
  cr_assert_eq(n, 0);
}

Test(slurm_step, shards_on_node) {
  uint32_t n = 77;
  cr_assert_null(tsr_slurm_shards_parse("2", &n));
  cr_assert_eq(n, 2);
  cr_assert_null(tsr_slurm_shards_parse("4294967295", &n));
  cr_assert_eq(n, UINT32_MAX);
  cr_assert_null(tsr_slurm_shards_parse(NULL, &n));
  cr_assert_eq(n, 0, "unset: not a shard step");
  n = 77;
  cr_assert_null(tsr_slurm_shards_parse("", &n));
  cr_assert_eq(n, 0);
  static const char *const bad[] = {
      "lots", "-1", "2 ", " 2", "2x", "0x2", "1.5", "4294967296", "99999999999999999999999"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    n = 77;
    char needle[64];
    snprintf(needle, sizeof(needle), "SLURM_SHARDS_ON_NODE='%s' is not a count of shards", bad[i]);
    expect_code(tsr_slurm_shards_parse(bad[i], &n), TSR_INVALID_ARGUMENT, needle);
    cr_assert_eq(n, 77, "untouched on error");
  }
}

Test(slurm_step, device_by_minor) {
  const tsr_slurm_device_t devs[] = {{0, true, 1, 80}, {1, true, 0, 40}, {2, false, 0, 80}};
  const tsr_slurm_device_t *d = NULL, *untouched = &devs[2];
  cr_assert_null(tsr_slurm_device_find(devs, 3, 0, "/dev/nvidia0", &d));
  cr_assert_eq(d, &devs[1], "by minor, not by position");
  cr_assert_eq(d->index, 1);
  cr_assert_eq(d->memory_bytes, 40, "the device itself: its memory with it");
  cr_assert_null(tsr_slurm_device_find(devs, 3, 1, "/dev/nvidia1", &d));
  cr_assert_eq(d, &devs[0]);
  d = untouched;
  expect_code(tsr_slurm_device_find(devs, 3, 5, "/dev/nvidia5", &d), TSR_NOT_FOUND,
              "no tesserad device has minor 5 (/dev/nvidia5");
  cr_assert_eq(d, untouched);
  const tsr_slurm_device_t twice[] = {{0, true, 2, 80}, {3, true, 2, 80}};
  expect_code(tsr_slurm_device_find(twice, 2, 2, "/dev/nvidia2", &d), TSR_FAILED_PRECONDITION,
              "devices 0 and 3 both have minor 2");
  cr_assert_eq(d, untouched);
  expect_code(tsr_slurm_device_find(NULL, 0, 0, "/dev/nvidia0", &d), TSR_NOT_FOUND, "minor 0");
}

/* ---- the lease's deadline, and following the job's end ------------------------------- */

#define S 1000000000ull /* a second in ns */

Test(slurm_lease, duration) {
  const uint64_t max = 30ull * 86400 * S;
  const uint64_t now = 1000 * S;
  uint64_t ns = 42;
  tsr_slurm_job_time_t silent = {.answered = false};
  expect_code(tsr_slurm_lease_duration(&silent, now, max, &ns), TSR_UNAVAILABLE, "slurmctld did not answer");
  cr_assert_eq(ns, 42, "no answer, no duration: never the longest lease");
  tsr_slurm_job_time_t unlimited = {.answered = true, .unlimited = true};
  cr_assert_null(tsr_slurm_lease_duration(&unlimited, now, max, &ns));
  cr_assert_eq(ns, max, "no time limit: the longest lease");
  tsr_slurm_job_time_t five = {.answered = true, .end = 1300};
  cr_assert_null(tsr_slurm_lease_duration(&five, now, max, &ns));
  cr_assert_eq(ns, 300 * S);
  /* to the ns: a lease made a quarter second into a second ends at the job's end, not after it */
  cr_assert_null(tsr_slurm_lease_duration(&five, now + S / 4, max, &ns));
  cr_assert_eq(ns, 300 * S - S / 4);
  tsr_slurm_job_time_t year = {.answered = true, .end = 1000 + 365 * 86400};
  cr_assert_null(tsr_slurm_lease_duration(&year, now, max, &ns));
  cr_assert_eq(ns, max);
  ns = 42;
  tsr_slurm_job_time_t over = {.answered = true, .end = 1000};
  expect_code(tsr_slurm_lease_duration(&over, now, max, &ns), TSR_FAILED_PRECONDITION, "has passed");
  expect_code(tsr_slurm_lease_duration(&over, now + 1, max, &ns), TSR_FAILED_PRECONDITION, "has passed");
  cr_assert_eq(ns, 42);
}

/* The deadline a lease is made with and renewed to: the job's end, at
 * most max from now. */
Test(slurm_lease, deadline) {
  const uint64_t max = 3600 * S;
  const uint64_t now = 1000 * S + 7;
  uint64_t ns = 42;
  tsr_slurm_job_time_t five = {.answered = true, .end = 1300};
  cr_assert_null(tsr_slurm_lease_deadline(&five, now, max, &ns));
  cr_assert_eq(ns, 1300 * S, "the job's end exactly, whatever now is");
  tsr_slurm_job_time_t two_hours = {.answered = true, .end = 1000 + 7200};
  cr_assert_null(tsr_slurm_lease_deadline(&two_hours, now, max, &ns));
  cr_assert_eq(ns, now + max, "past max: max from now");
  tsr_slurm_job_time_t unlimited = {.answered = true, .unlimited = true, .end = 1000 + 365 * 86400};
  cr_assert_null(tsr_slurm_lease_deadline(&unlimited, now, max, &ns));
  cr_assert_eq(ns, now + max, "no time limit: max from now, whatever end slurmctld writes");
  tsr_slurm_job_time_t far = {.answered = true, .end = INT64_MAX};
  cr_assert_null(tsr_slurm_lease_deadline(&far, now, UINT64_MAX, &ns));
  cr_assert_eq(ns, UINT64_MAX, "an end past what ns hold, and no max: saturated, not wrapped");
  ns = 42;
  tsr_slurm_job_time_t silent = {.answered = false, .end = 1300};
  expect_code(tsr_slurm_lease_deadline(&silent, now, max, &ns), TSR_UNAVAILABLE, "slurmctld did not answer");
  tsr_slurm_job_time_t passed = {.answered = true, .end = 1000};
  expect_code(tsr_slurm_lease_deadline(&passed, now, max, &ns), TSR_FAILED_PRECONDITION, "has passed");
  tsr_slurm_job_time_t zero = {.answered = true, .end = 0};
  expect_code(tsr_slurm_lease_deadline(&zero, now, max, &ns), TSR_FAILED_PRECONDITION, "has passed");
  cr_assert_eq(ns, 42);
}

/* When the follower renews: the end moved (an admin's TimeLimit=), or a
 * limit came or went. */
Test(slurm_follow, end_moved) {
  const tsr_slurm_job_time_t unknown = {0};
  const tsr_slurm_job_time_t at10 = {.answered = true, .end = 1600};
  const tsr_slurm_job_time_t at20 = {.answered = true, .end = 2200};
  const tsr_slurm_job_time_t unlimited = {.answered = true, .unlimited = true, .end = 5000};
  const tsr_slurm_job_time_t unlimited_other = {.answered = true, .unlimited = true, .end = 6000};
  cr_assert(!tsr_slurm_job_end_moved(&at10, &at10));
  cr_assert(tsr_slurm_job_end_moved(&at10, &at20), "extended");
  cr_assert(tsr_slurm_job_end_moved(&at20, &at10), "shortened");
  cr_assert(tsr_slurm_job_end_moved(&at10, &unlimited), "its limit lifted");
  cr_assert(tsr_slurm_job_end_moved(&unlimited, &at10), "a limit given");
  cr_assert(!tsr_slurm_job_end_moved(&unlimited, &unlimited_other), "no limit: slurmctld's end means nothing");
  cr_assert(tsr_slurm_job_end_moved(&unknown, &at10), "nobody knew the end: any answer moves it");
  cr_assert(!tsr_slurm_job_end_moved(&at10, &unknown), "no answer moves nothing");
  cr_assert(!tsr_slurm_job_end_moved(&unknown, &unknown));
}

Test(slurm_follow, deadline_off) {
  cr_assert(!tsr_slurm_deadline_off(100 * S, 100 * S));
  cr_assert(!tsr_slurm_deadline_off(101 * S, 100 * S), "a second after: a new lease's, kept");
  cr_assert(!tsr_slurm_deadline_off(99 * S, 100 * S));
  cr_assert(tsr_slurm_deadline_off(101 * S + 1, 100 * S), "later than the end");
  cr_assert(tsr_slurm_deadline_off(100 * S, 101 * S + 1), "earlier than the end");
  cr_assert(tsr_slurm_deadline_off(0, UINT64_MAX), "no wrap");
  cr_assert(tsr_slurm_deadline_off(UINT64_MAX, 0), "no wrap");
}

Test(slurm_follow, parse) {
  uint64_t ns = 42;
  cr_assert_null(tsr_slurm_follow_parse("30s", &ns));
  cr_assert_eq(ns, 30 * S);
  cr_assert_null(tsr_slurm_follow_parse("2m", &ns));
  cr_assert_eq(ns, 120 * S);
  cr_assert_null(tsr_slurm_follow_parse("1s", &ns));
  cr_assert_eq(ns, S);
  cr_assert_null(tsr_slurm_follow_parse("0", &ns));
  cr_assert_eq(ns, 0, "0: following off");
  ns = 42;
  cr_assert_null(tsr_slurm_follow_parse("0s", &ns));
  cr_assert_eq(ns, 0);
  ns = 42;
  expect_code(tsr_slurm_follow_parse("500ms", &ns), TSR_INVALID_ARGUMENT, "0 (off) or 1s or more");
  expect_code(tsr_slurm_follow_parse("999999999ns", &ns), TSR_INVALID_ARGUMENT, "1s or more");
  static const char *const bad[] = {"soon", "30", "", "-1s", "1s ", "00"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    tsr_status_t st = tsr_slurm_follow_parse(bad[i], &ns);
    cr_assert_not_null(st, "follow=%s accepted", bad[i]);
    cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT, "follow=%s: %s", bad[i], tsr_status_message(st));
    tsr_status_free(st);
  }
  expect_code(tsr_slurm_follow_parse(NULL, &ns), TSR_INVALID_ARGUMENT, "empty");
  cr_assert_eq(ns, 42, "untouched on error");
}
