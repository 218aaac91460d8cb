/* libtsr_getenv_wrap.so: a library that wraps getenv the way real ones do
 * (tracers, sandboxes, language runtimes): it finds libc's with
 * dlsym(RTLD_NEXT, "getenv") and calls it. glibc answers RTLD_NEXT relative
 * to the caller; if a preloaded shim's dlsym hid the caller, this library
 * would get its own getenv back and recurse: a depth guard turns that into
 * a clear failure (exit 86) instead of a stack overflow. getenv of
 * TSR_WRAPPED answers "yes" without asking libc: a test sees that the
 * wrapper, and not libc's getenv, answered the program. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static __thread int depth;

char *getenv(const char *name) {
  static char *(*next)(const char *);
  if (++depth > 8) {
    static const char msg[] = "getenv_wrap: dlsym(RTLD_NEXT) gave this library's own getenv back\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(86);
  }
  if (!next) {
    void *p = dlsym(RTLD_NEXT, "getenv");
    memcpy(&next, &p, sizeof(p));
  }
  static char yes[] = "yes";
  char *v = strcmp(name, "TSR_WRAPPED") == 0 ? yes : next ? next(name) : NULL;
  depth--;
  return v;
}
