/* tenant/dlsym.h: the dlsym each shim exports, as a tail call.
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
 * names it hooks (which never load a driver for anything else). The stub
 * is exported at every version of dlsym glibc has had (below): a library
 * bound to the old one is held as one bound to the new. On an
 * architecture without the assembly (neither x86-64 nor AArch64) the stub
 * is a plain C call, exported at GLIBC_2.34 alone, and RTLD_NEXT from
 * another object is answered relative to the shim.
 *
 * route: tsr_tenant_dlsym_fn route(void *handle, const char *symbol),
 * hidden (the assembly calls it by name); TSR_TENANT_DLSYM below defines it
 * and the stub together from the shim's hook_of(symbol). */
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

/* The stub's entry: two global labels at one address, each renamed to a
 * versioned dlsym by TSR__DLSYM_VERSIONS (`remove`: the labels' own names
 * leave the symbol table). TSR_TENANT_DLSYM_ONE_VERSION builds a stub
 * exported at GLIBC_2.34 alone: a test's mutant, which the old-version
 * test must see fail (tests/integration/shim/dlsym-versions.sh). */
#ifdef TSR_TENANT_DLSYM_ONE_VERSION
#define TSR__DLSYM_LABELS(type) ".globl tsr__dlsym_new\n.type tsr__dlsym_new, " type "\ntsr__dlsym_new:\n"
#define TSR__DLSYM_VERSIONS                                                                 \
  ".size tsr__dlsym_new, .-tsr__dlsym_new\n"                                                \
  ".symver tsr__dlsym_new, dlsym@@GLIBC_2.34, remove\n"
#else
#define TSR__DLSYM_LABELS(type)                                                             \
  ".globl tsr__dlsym_new\n.type tsr__dlsym_new, " type "\n"                                 \
  ".globl tsr__dlsym_base\n.type tsr__dlsym_base, " type "\n"                               \
  "tsr__dlsym_new:\n"                                                                       \
  "tsr__dlsym_base:\n"
#define TSR__DLSYM_VERSIONS                                                                 \
  ".size tsr__dlsym_new, .-tsr__dlsym_new\n"                                                \
  ".size tsr__dlsym_base, .-tsr__dlsym_base\n"                                              \
  ".symver tsr__dlsym_new, dlsym@@GLIBC_2.34, remove\n"                                     \
  ".symver tsr__dlsym_base, dlsym@" TSR_TENANT_GLIBC_BASE ", remove\n"
#endif

#if defined(__x86_64__)
/* rdi, rsi (the arguments) are kept across the call; the stack stays
 * 16-byte aligned at the call; endbr64 is a no-op where IBT is off */
#define TSR_TENANT_DLSYM_STUB(route)                                                        \
  __asm__(".text\n"                                                                         \
          ".p2align 4\n"                                                                    \
          TSR__DLSYM_LABELS("@function")                                                    \
          ".cfi_startproc\n"                                                                \
          "endbr64\n"                                                                       \
          "pushq %rdi\n"                                                                    \
          ".cfi_adjust_cfa_offset 8\n"                                                      \
          "pushq %rsi\n"                                                                    \
          ".cfi_adjust_cfa_offset 8\n"                                                      \
          "subq $8, %rsp\n"                                                                 \
          ".cfi_adjust_cfa_offset 8\n"                                                      \
          "call " TSR__DLSYM_STR(route) "\n"                                                \
          "addq $8, %rsp\n"                                                                 \
          ".cfi_adjust_cfa_offset -8\n"                                                     \
          "popq %rsi\n"                                                                     \
          ".cfi_adjust_cfa_offset -8\n"                                                     \
          "popq %rdi\n"                                                                     \
          ".cfi_adjust_cfa_offset -8\n"                                                     \
          "jmp *%rax\n"                                                                     \
          ".cfi_endproc\n"                                                                  \
          TSR__DLSYM_VERSIONS);
#elif defined(__aarch64__)
/* x0, x1 kept in the frame; the frame is gone before the jump, so the
 * target returns straight to the caller (x30 as the caller left it) */
#define TSR_TENANT_DLSYM_STUB(route)                                                        \
  __asm__(".text\n"                                                                         \
          ".p2align 3\n"                                                                    \
          TSR__DLSYM_LABELS("%function")                                                    \
          ".cfi_startproc\n"                                                                \
          "hint #34\n" /* bti c */                                                          \
          "stp x29, x30, [sp, #-32]!\n"                                                     \
          ".cfi_def_cfa_offset 32\n"                                                        \
          ".cfi_offset 29, -32\n"                                                           \
          ".cfi_offset 30, -24\n"                                                           \
          "mov x29, sp\n"                                                                   \
          "stp x0, x1, [sp, #16]\n"                                                         \
          "bl " TSR__DLSYM_STR(route) "\n"                                                  \
          "mov x16, x0\n"                                                                   \
          "ldp x0, x1, [sp, #16]\n"                                                         \
          "ldp x29, x30, [sp], #32\n"                                                       \
          ".cfi_restore 29\n"                                                               \
          ".cfi_restore 30\n"                                                               \
          ".cfi_def_cfa_offset 0\n"                                                         \
          "br x16\n"                                                                        \
          ".cfi_endproc\n"                                                                  \
          TSR__DLSYM_VERSIONS);
#else
/* exported at GLIBC_2.34 only: the old version differs by architecture */
#define TSR_TENANT_DLSYM_STUB(route)                                                        \
  __attribute__((visibility("default"))) void *tsr__dlsym_new(void *handle, const char *symbol); \
  void *tsr__dlsym_new(void *handle, const char *symbol) {                                  \
    return route(handle, symbol)(handle, symbol);                                           \
  }                                                                                         \
  __asm__(".symver tsr__dlsym_new, dlsym@@GLIBC_2.34, remove\n");
#endif

/* Where a dlsym of `symbol` goes: `hook` (the shim's C dlsym) when the shim
 * hooks that name, else the next dlsym (libc's, or the other shim's), else
 * one that finds nothing. */
tsr_tenant_dlsym_fn tsr_tenant_dlsym_route(tsr_tenant_dlsym_fn hook);

/* A shim's exported dlsym: the route `route` (hidden) that sends a name to
 * `hook_of(symbol)` (the shim's own dlsym for the names it hooks, else
 * NULL) or on to the next dlsym, and the stub that jumps there. */
#define TSR_TENANT_DLSYM(route, hook_of)                                                    \
  __attribute__((visibility("hidden"))) tsr_tenant_dlsym_fn route(void *handle,             \
                                                                  const char *symbol);      \
  tsr_tenant_dlsym_fn route(void *handle, const char *symbol) {                             \
    (void)handle;                                                                           \
    return tsr_tenant_dlsym_route(hook_of(symbol));                                         \
  }                                                                                         \
  TSR_TENANT_DLSYM_STUB(route)

#endif
