/* dso_handle.c: __dso_handle, for a shim linked without the C start files.
 *
 * The shims are linked with -nostartfiles (CMakeLists.txt: a library the
 * node-wide mode loads into every process pays for each page it touches at
 * start, and the start files' constructor and destructor touch code pages
 * in every process; the shims have no constructor of their own). atexit()
 * from libc_nonshared refers to __dso_handle, which the start files
 * (crtbeginS.o) would have defined: this defines it, in each shim's own
 * link (TSR_PRELOAD_SOURCES), never in a program's. */
void *__dso_handle __attribute__((visibility("hidden"))) = &__dso_handle;
