/* tenant/dlsym.h: the dlsym and dlvsym each shim exports, as tail calls.
 *
 * Both shims interpose dlsym, so that a program that finds the driver's or
 * the ICD loader's entries itself (dlopen, then dlsym) gets the hooks. But
 * glibc answers dlsym by who called it: RTLD_NEXT means "the next object
 * after the caller", and RTLD_DEFAULT searches the caller's scope. A shim
 * whose dlsym calls libc's dlsym turns every caller into the shim: a library
 * that finds libc's getenv with dlsym(RTLD_NEXT, "getenv") got its own getenv
 * back and recursed until its stack overflowed.
 *
 * So the exported dlsym is a few instructions of assembly that ask the shim
 * (the `route` function, C, hidden) where the lookup should go, and then
 * jump there with the caller's own return address still on the stack:
 * glibc's dlsym, for every name the shim does not hook, sees the program's
 * caller, exactly as without the shim; the shim's C dlsym, for the few
 * names it hooks (which never load a driver for anything else). dlvsym is
 * exported the same way (its own route, `route`_v), and a lookup of
 * "dlsym" or "dlvsym" through either is answered with the shim's own
 * stub: a program that fetches libc's dlsym by name and calls it still
 * reaches the shim. Each stub is exported at every version glibc has had
 * (below): a library bound to the old one is held as one bound to the
 * new. The shims' own lookups of the next dlsym and dlvsym cannot use
 * either (they would come back to the shim): they use libc's dlvsym, read
 * from libc's symbol table (tsr_tenant_object_symbol). On an architecture
 * without the assembly (neither x86-64 nor AArch64) the dlsym stub is a
 * plain C call, exported at GLIBC_2.34 alone, RTLD_NEXT from another
 * object is answered relative to the shim, and dlvsym is not interposed.
 *
 * TSR_TENANT_DLSYM(route, hook_of) defines the routes and the stubs from
 * the shim's hook_of(symbol). */
#ifndef TESSERA_TENANT_DLSYM_H
#define TESSERA_TENANT_DLSYM_H

#include "tenant/tenant.h"

#define TSR__DLSYM_STR2(x) #x
#define TSR__DLSYM_STR(x) TSR__DLSYM_STR2(x)

/* The versions of dlsym glibc has exported: GLIBC_2.34 (where libdl
 * moved into libc) and, before it, the architecture's first version, which
 * every library linked against an older glibc binds (CUDA's own libraries
 * in the PyTorch wheels do: libcudart.so.13's dlsym is dlsym@GLIBC_2.2.5).
 * The stub is exported at both, so that a reference of either version finds
 * it; src/tenant/exports.map.in declares the same two versions. */
#if defined(__x86_64__)
#define TSR_TENANT_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define TSR_TENANT_GLIBC_BASE "GLIBC_2.17"
#endif

/* A stub's entry for `sym` (dlsym or dlvsym): two global labels at one
 * address, each renamed to a versioned `sym` by TSR__STUB_VERSIONS
 * (`remove`: the labels' own names leave the symbol table), and a hidden
 * one, tsr_<sym>_self, by which the shim names its own stub (an answer to
 * a lookup of "dlsym" or "dlvsym" itself). TSR_TENANT_DLSYM_ONE_VERSION
 * builds stubs exported at GLIBC_2.34 alone: a test's mutant, which the
 * old-version test must see fail (tests/integration/shim/dlsym-versions.sh). */
/* (assembly and macros laid out by hand) */
/* clang-format off */
#define TSR__STUB_SELF(sym, type)                                                           \
  ".globl tsr_" #sym "_self\n.hidden tsr_" #sym "_self\n.type tsr_" #sym "_self, " type "\n" \
  ".globl tsr_" #sym "_new\n.type tsr_" #sym "_new, " type "\n"
#ifdef TSR_TENANT_DLSYM_ONE_VERSION
#define TSR__STUB_LABELS(sym, type) TSR__STUB_SELF(sym, type) "tsr_" #sym "_self:\ntsr_" #sym "_new:\n"
#define TSR__STUB_VERSIONS(sym)                                                             \
  ".size tsr_" #sym "_self, .-tsr_" #sym "_self\n"                                        \
  ".size tsr_" #sym "_new, .-tsr_" #sym "_new\n"                                          \
  ".symver tsr_" #sym "_new, " #sym "@@GLIBC_2.34, remove\n"
#else
#define TSR__STUB_LABELS(sym, type)                                                         \
  TSR__STUB_SELF(sym, type)                                                                 \
  ".globl tsr_" #sym "_base\n.type tsr_" #sym "_base, " type "\n"                         \
  "tsr_" #sym "_self:\ntsr_" #sym "_new:\ntsr_" #sym "_base:\n"
#define TSR__STUB_VERSIONS(sym)                                                             \
  ".size tsr_" #sym "_self, .-tsr_" #sym "_self\n"                                        \
  ".size tsr_" #sym "_new, .-tsr_" #sym "_new\n"                                          \
  ".size tsr_" #sym "_base, .-tsr_" #sym "_base\n"                                        \
  ".symver tsr_" #sym "_new, " #sym "@@GLIBC_2.34, remove\n"                               \
  ".symver tsr_" #sym "_base, " #sym "@" TSR_TENANT_GLIBC_BASE ", remove\n"
#endif

#if defined(__x86_64__)
/* rdi, rsi, rdx (dlvsym's three arguments; dlsym's two) are kept across
 * the call; three pushes leave the stack 16-byte aligned at the call;
 * endbr64 is a no-op where IBT is off */
#define TSR_TENANT_STUB(sym, route)                                                         \
  __asm__(".text\n"                                                                         \
          ".p2align 4\n"                                                                    \
          TSR__STUB_LABELS(sym, "@function")                                                \
          ".cfi_startproc\n"                                                                \
          "endbr64\n"                                                                       \
          "pushq %rdi\n"                                                                    \
          ".cfi_adjust_cfa_offset 8\n"                                                      \
          "pushq %rsi\n"                                                                    \
          ".cfi_adjust_cfa_offset 8\n"                                                      \
          "pushq %rdx\n"                                                                    \
          ".cfi_adjust_cfa_offset 8\n"                                                      \
          "call " TSR__DLSYM_STR(route) "\n"                                                \
          "popq %rdx\n"                                                                     \
          ".cfi_adjust_cfa_offset -8\n"                                                     \
          "popq %rsi\n"                                                                     \
          ".cfi_adjust_cfa_offset -8\n"                                                     \
          "popq %rdi\n"                                                                     \
          ".cfi_adjust_cfa_offset -8\n"                                                     \
          "jmp *%rax\n"                                                                     \
          ".cfi_endproc\n"                                                                  \
          TSR__STUB_VERSIONS(sym));
#elif defined(__aarch64__)
/* x0, x1, x2 kept in the frame; the frame is gone before the jump, so the
 * target returns straight to the caller (x30 as the caller left it) */
#define TSR_TENANT_STUB(sym, route)                                                         \
  __asm__(".text\n"                                                                         \
          ".p2align 3\n"                                                                    \
          TSR__STUB_LABELS(sym, "%function")                                                \
          ".cfi_startproc\n"                                                                \
          "hint #34\n" /* bti c */                                                          \
          "stp x29, x30, [sp, #-48]!\n"                                                     \
          ".cfi_def_cfa_offset 48\n"                                                        \
          ".cfi_offset 29, -48\n"                                                           \
          ".cfi_offset 30, -40\n"                                                           \
          "mov x29, sp\n"                                                                   \
          "stp x0, x1, [sp, #16]\n"                                                         \
          "str x2, [sp, #32]\n"                                                             \
          "bl " TSR__DLSYM_STR(route) "\n"                                                  \
          "mov x16, x0\n"                                                                   \
          "ldp x0, x1, [sp, #16]\n"                                                         \
          "ldr x2, [sp, #32]\n"                                                             \
          "ldp x29, x30, [sp], #48\n"                                                       \
          ".cfi_restore 29\n"                                                               \
          ".cfi_restore 30\n"                                                               \
          ".cfi_def_cfa_offset 0\n"                                                         \
          "br x16\n"                                                                        \
          ".cfi_endproc\n"                                                                  \
          TSR__STUB_VERSIONS(sym));
#endif

/* Where a dlsym of `symbol` goes: `hook` (the shim's C dlsym) when the shim
 * hooks that name, else the next dlsym (libc's, or the other shim's), else
 * one that finds nothing. */
tsr_tenant_dlsym_fn tsr_tenant_dlsym_route(tsr_tenant_dlsym_fn hook);
/* The same for dlvsym: the next dlvsym, else one that finds nothing. */
tsr_tenant_dlvsym_fn tsr_tenant_dlvsym_next_route(void);
/* What a shim answers to dlvsym(handle, symbol, version) of a name it
 * hooks: the next dlvsym's answer, or, where that is what the next dlsym
 * answers for the name (the default version), hook(handle, symbol). */
void *tsr_tenant_dlvsym_hooked(tsr_tenant_dlsym_fn hook, void *handle, const char *symbol, const char *version);
/* Whether `symbol` is "dlsym" or "dlvsym": a lookup of either is answered
 * with the shim's own stub, wherever the next lookup finds one, so that a
 * program that fetches libc's dlsym by name (dlsym(RTLD_NEXT, "dlsym"),
 * dlvsym(libc, "dlsym", "GLIBC_2.2.5")) still reaches the shim. */
bool tsr_tenant_is_dl_lookup(const char *symbol);

#if defined(__x86_64__) || defined(__aarch64__)
/* A shim's exported dlsym and dlvsym: the routes `route` and `route`_v
 * (hidden) that send a name to `hook_of(symbol)` (the shim's own dlsym for
 * the names it hooks, else NULL), to the shim's own stubs for "dlsym" and
 * "dlvsym", or on to the next dlsym or dlvsym, and the stubs that jump
 * there. */
#define TSR_TENANT_DLSYM(route, hook_of)                                                    \
  __attribute__((visibility("hidden"))) void tsr_dlsym_self(void);                         \
  __attribute__((visibility("hidden"))) void tsr_dlvsym_self(void);                        \
  static void *route##_self(void *handle, const char *symbol) {                             \
    tsr_tenant_dlsym_fn next = tsr_tenant_next_dlsym();                                     \
    if (!next || !next(handle, symbol)) return NULL;                                        \
    return symbol[2] == 'v' ? (void *)tsr_dlvsym_self : (void *)tsr_dlsym_self;           \
  }                                                                                         \
  static void *route##_vself(void *handle, const char *symbol, const char *version) {       \
    tsr_tenant_dlvsym_fn next = tsr_tenant_dlvsym_next_route();                             \
    if (!next(handle, symbol, version)) return NULL;                                        \
    return symbol[2] == 'v' ? (void *)tsr_dlvsym_self : (void *)tsr_dlsym_self;           \
  }                                                                                         \
  static void *route##_vhooked(void *handle, const char *symbol, const char *version) {     \
    return tsr_tenant_dlvsym_hooked(hook_of(symbol), handle, symbol, version);              \
  }                                                                                         \
  __attribute__((visibility("hidden"))) tsr_tenant_dlsym_fn route(void *handle,             \
                                                                  const char *symbol);      \
  tsr_tenant_dlsym_fn route(void *handle, const char *symbol) {                             \
    (void)handle;                                                                           \
    if (tsr_tenant_is_dl_lookup(symbol)) return route##_self;                               \
    return tsr_tenant_dlsym_route(hook_of(symbol));                                         \
  }                                                                                         \
  __attribute__((visibility("hidden"))) tsr_tenant_dlvsym_fn route##_v(void *handle,        \
                                                                       const char *symbol); \
  tsr_tenant_dlvsym_fn route##_v(void *handle, const char *symbol) {                        \
    (void)handle;                                                                           \
    if (tsr_tenant_is_dl_lookup(symbol)) return route##_vself;                              \
    return hook_of(symbol) ? route##_vhooked : tsr_tenant_dlvsym_next_route();              \
  }                                                                                         \
  TSR_TENANT_STUB(dlsym, route)                                                             \
  TSR_TENANT_STUB(dlvsym, route##_v)
#else
/* elsewhere: a plain C dlsym at GLIBC_2.34 alone (the old version differs
 * by architecture), without dlvsym; RTLD_NEXT from another object is
 * answered relative to the shim */
#define TSR_TENANT_DLSYM(route, hook_of)                                                    \
  __attribute__((visibility("default"))) void *tsr_dlsym_new(void *handle, const char *symbol); \
  void *tsr_dlsym_new(void *handle, const char *symbol) {                                  \
    return tsr_tenant_dlsym_route(hook_of(symbol))(handle, symbol);                         \
  }                                                                                         \
  __asm__(".symver tsr_dlsym_new, dlsym@@GLIBC_2.34, remove\n");
#endif

/* clang-format on */
#endif
