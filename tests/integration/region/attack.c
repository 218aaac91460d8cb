/* attack.c: what a hostile tenant writes into its own region (it owns the
 * file: 0600, hers), for the tests that check the daemon takes none of it
 * on trust (tenant_attacks.sh, tests/integration/backstop/hostile.sh).
 * Offsets come from the layout itself (region/layout.h).
 *
 *   tsr_region_attack slot FILE PID        claims a free slot naming process PID
 *                                          (its start time and PID namespace read
 *                                          from /proc, as any user can)
 *   tsr_region_attack set FILE FIELD VALUE writes one field: limit, state, peak,
 *                                          used, reserved, launches, gpu_ns
 *   tsr_region_attack hold FILE FIELD VALUE SECONDS
 *                                          writes it again every millisecond for
 *                                          SECONDS (racing the daemon's repairs)
 *   tsr_region_attack truncate FILE BYTES  ftruncate(2)s it
 *   tsr_region_attack shrink FILE SECONDS  truncates it to 0 every 10 ms for SECONDS
 *
 * Prints "done" (or "done N" with a count); exit 1 on failure, 2 on usage. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "region/layout.h"

static int tsr__open(const char *path) {
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fprintf(stderr, "open %s: %s\n", path, strerror(errno));
  return fd;
}

static int tsr__pwrite(int fd, const void *v, size_t n, size_t off) {
  if (pwrite(fd, v, n, (off_t)off) != (ssize_t)n) {
    fprintf(stderr, "pwrite at %zu: %s\n", off, strerror(errno));
    return 1;
  }
  return 0;
}

/* Field name -> offset and size. */
static int tsr__field(const char *name, size_t *off, size_t *size) {
  static const struct {
    const char *name;
    size_t off, size;
  } f[] = {{"limit", offsetof(tsr__region_file_t, header.limit_bytes), 8},
           {"state", offsetof(tsr__region_file_t, header.state), 4},
           {"peak", offsetof(tsr__region_file_t, peak), 8},
           {"used", offsetof(tsr__region_file_t, used), 8},
           {"reserved", offsetof(tsr__region_file_t, reserved), 8},
           {"launches", offsetof(tsr__region_file_t, launches), 8},
           {"gpu_ns", offsetof(tsr__region_file_t, gpu_ns), 8}};
  for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
    if (strcmp(name, f[i].name) == 0) {
      *off = f[i].off;
      *size = f[i].size;
      return 0;
    }
  fprintf(stderr, "no field '%s'\n", name);
  return 2;
}

/* Field 22 of /proc/PID/stat. */
static int tsr__start_of(long pid, uint64_t *out) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 1;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  if (!p) return 1;
  p++;
  for (int field = 3; field < 22; field++) {
    p = strchr(p + 1, ' ');
    if (!p) return 1;
  }
  *out = strtoull(p + 1, NULL, 10);
  return 0;
}

static void tsr__sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static double tsr__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: tsr_region_attack slot|set|hold|truncate|shrink FILE ...\n");
    return 2;
  }
  const char *cmd = argv[1], *path = argv[2];
  if (strcmp(cmd, "slot") == 0) {
    long pid = strtol(argv[3], NULL, 10);
    uint64_t start = 0;
    struct stat ns;
    char nspath[64];
    /* another user's namespace link is not hers to read: on a node, the
     * host processes share hers */
    snprintf(nspath, sizeof(nspath), "/proc/%ld/ns/pid", pid);
    if (stat(nspath, &ns) != 0) snprintf(nspath, sizeof(nspath), "/proc/self/ns/pid");
    if (tsr__start_of(pid, &start) || stat(nspath, &ns) != 0) {
      fprintf(stderr, "process %ld: cannot read its start time or namespace\n", pid);
      return 1;
    }
    int fd = tsr__open(path);
    if (fd < 0) return 1;
    for (uint32_t i = 0; i < TSR_REGION_SLOTS; i++) {
      size_t at = offsetof(tsr__region_file_t, slots) + i * sizeof(tsr__region_slot_t);
      uint32_t holder = 0;
      if (pread(fd, &holder, 4, (off_t)at) != 4) break;
      if (holder != TSR_SLOT_FREE) continue;
      uint64_t inode = (uint64_t)ns.st_ino;
      uint32_t p32 = (uint32_t)pid;
      if (tsr__pwrite(fd, &start, 8, at + offsetof(tsr__region_slot_t, start_ticks)) ||
          tsr__pwrite(fd, &inode, 8, at + offsetof(tsr__region_slot_t, pidns)) ||
          tsr__pwrite(fd, &p32, 4, at + offsetof(tsr__region_slot_t, pid)))
        return 1;
      printf("done %u\n", i);
      return 0;
    }
    fprintf(stderr, "no free slot\n");
    return 1;
  }
  if (strcmp(cmd, "truncate") == 0) {
    if (truncate(path, (off_t)strtoll(argv[3], NULL, 10)) != 0) {
      fprintf(stderr, "truncate: %s\n", strerror(errno));
      return 1;
    }
    printf("done\n");
    return 0;
  }
  if (strcmp(cmd, "shrink") == 0) {
    double end = tsr__now() + atof(argv[3]);
    long n = 0;
    while (tsr__now() < end) {
      if (truncate(path, 0) == 0) n++;
      tsr__sleep_ms(10);
    }
    printf("done %ld\n", n);
    return 0;
  }
  if ((strcmp(cmd, "set") == 0 && argc == 5) || (strcmp(cmd, "hold") == 0 && argc == 6)) {
    size_t off = 0, size = 0;
    int rc = tsr__field(argv[3], &off, &size);
    if (rc) return rc;
    uint64_t v = strtoull(argv[4], NULL, 10);
    uint32_t v32 = (uint32_t)v;
    int fd = tsr__open(path);
    if (fd < 0) return 1;
    const void *src = size == 4 ? (const void *)&v32 : (const void *)&v;
    double end = tsr__now() + (argc == 6 ? atof(argv[5]) : 0);
    long n = 0;
    do {
      if (tsr__pwrite(fd, src, size, off)) return 1;
      n++;
      if (argc == 6) tsr__sleep_ms(1);
    } while (tsr__now() < end);
    printf("done %ld\n", n);
    return 0;
  }
  fprintf(stderr, "usage: tsr_region_attack slot|set|hold|truncate|shrink FILE ...\n");
  return 2;
}
