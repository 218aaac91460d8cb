/* tsr_node_probe: an ordinary program, for what preloading the shims must
 * not do to it (harmless.sh) and what a set-user-ID copy of it must not be
 * made to do (secure.sh).
 *
 *   tsr_node_probe getenv NAME     prints NAME=<getenv(NAME)> (through a getenv
 *                                  wrapper, when one is preloaded)
 *   tsr_node_probe lookup NAME     dlsym(RTLD_DEFAULT, NAME); prints
 *                                  "found=0|1 euid=N cuda=0|1 evil=0|1": whether a
 *                                  library whose path holds "libcuda" or "evil" is
 *                                  mapped now
 *   tsr_node_probe cuda SECONDS    finds cuMemGetInfo_v2 with dlsym, calls it, prints
 *                                  "rc=N", holds SECONDS, prints "done"
 *
 * Exit status 0 unless the arguments are wrong (2). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether /proc/self/maps names a file whose path holds `part`. */
static int tsr__mapped(const char *part) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof(line), f)) {
    const char *path = strchr(line, '/');
    found = path && strstr(path, part) != NULL;
  }
  fclose(f);
  return found;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "getenv") == 0) {
    const char *v = getenv(argv[2]);
    printf("%s=%s\n", argv[2], v ? v : "(unset)");
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "lookup") == 0) {
    void *p = dlsym(RTLD_DEFAULT, argv[2]);
    printf("found=%d euid=%d cuda=%d evil=%d\n", p != NULL, (int)geteuid(), tsr__mapped("libcuda"),
           tsr__mapped("evil"));
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "cuda") == 0) {
    int (*info)(size_t *, size_t *) = NULL;
    void *p = dlsym(RTLD_DEFAULT, "cuMemGetInfo_v2");
    memcpy(&info, &p, sizeof(p));
    size_t free_b = 0, total = 0;
    printf("rc=%d\n", info ? info(&free_b, &total) : -1);
    fflush(stdout);
    sleep((unsigned)atoi(argv[2]));
    printf("done\n");
    return 0;
  }
  fprintf(stderr, "usage: tsr_node_probe getenv NAME | lookup NAME | cuda SECONDS\n");
  return 2;
}
