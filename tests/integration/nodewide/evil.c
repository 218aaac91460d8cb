/* libtsr_evil.so: what a user would like a set-user-ID program to load. Its
 * constructor writes "euid=N" to $TSR_EVIL_MARKER: a test that finds the
 * file knows the library ran, and with which privileges. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void tsr_evil_ran(void) {
  const char *path = getenv("TSR_EVIL_MARKER");
  FILE *f = path ? fopen(path, "w") : NULL;
  if (f) {
    fprintf(f, "euid=%d\n", (int)geteuid());
    fclose(f);
  }
}
