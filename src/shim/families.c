/* families.c: the API families that keep state of their own, for the
 * shim's core (shim.h, tsr_shim_family_t). A new family adds its entry
 * here and nowhere else in the core. */
#include "shim/shim.h"

const tsr_shim_family_t *const tsr_shim_families[] = {
    &tsr_shim_family_contexts, &tsr_shim_family_pools, &tsr_shim_family_graphs, &tsr_shim_family_launch, NULL,
};

void tsr_shim_reconcile(void) {
  if (!tsr_shim.tenant.governed) return;
  for (const tsr_shim_family_t *const *f = tsr_shim_families; *f; f++)
    if ((*f)->reconcile) (*f)->reconcile();
}
