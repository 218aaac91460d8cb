/* tsr_tenant_object_symbol (src/tenant/symbols.c): a loaded object's own
 * definitions, read from its symbol table, agree with what glibc's dlsym
 * and dlvsym answer in a process no shim is loaded into. */
#include <criterion/criterion.h>
#include <dlfcn.h>

#include "tenant/tenant.h"

#if defined(__aarch64__)
#define FIRST "GLIBC_2.17"
#else
#define FIRST "GLIBC_2.2.5"
#endif

static void *libc(void) {
  void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  cr_assert_not_null(h);
  return h;
}

Test(tenant_symbols, each_version_of_a_function) {
  void *h = libc();
  const char *names[] = {"dlsym", "dlvsym", "getenv"};
  for (int i = 0; i < 3; i++) {
    void *want = dlvsym(h, names[i], FIRST);
    cr_assert_not_null(want, "%s@%s", names[i], FIRST);
    cr_assert_eq(tsr_tenant_object_symbol("libc.so.6", names[i], FIRST), want, "%s@%s", names[i], FIRST);
  }
  void *new_dlsym = dlvsym(h, "dlsym", "GLIBC_2.34");
  if (new_dlsym) /* glibc 2.34 and later */
    cr_assert_eq(tsr_tenant_object_symbol("libc.so.6", "dlsym", "GLIBC_2.34"), new_dlsym);
}

Test(tenant_symbols, the_default_version_without_one) {
  void *h = libc();
  cr_assert_eq(tsr_tenant_object_symbol("libc.so.6", "dlsym", NULL), dlsym(h, "dlsym"));
  cr_assert_eq(tsr_tenant_object_symbol("libc.so.6", "malloc", NULL), dlsym(h, "malloc"));
}

Test(tenant_symbols, nothing_for_what_is_not_there) {
  cr_assert_null(tsr_tenant_object_symbol("libc.so.6", "dlsym", "GLIBC_9.99"), "no such version");
  cr_assert_null(tsr_tenant_object_symbol("libc.so.6", "tsr_no_such_function", NULL));
  cr_assert_null(tsr_tenant_object_symbol("libc.so.6", "environ", NULL), "a variable, not a function");
  cr_assert_null(tsr_tenant_object_symbol("libtsr-not-loaded.so.1", "dlsym", NULL), "no such object");
  cr_assert_null(tsr_tenant_object_symbol("libc.so", "dlsym", NULL), "the file name, whole");
  cr_assert_null(tsr_tenant_object_symbol(NULL, "dlsym", NULL));
  cr_assert_null(tsr_tenant_object_symbol("libc.so.6", NULL, NULL));
}
