/* charge.c: charging a lease for both shims (see tenant/tenant.h). */
#include "tenant/tenant.h"

uint64_t tsr_tenant_round(uint64_t bytes, uint64_t granule) {
  if (granule <= 1) return bytes;
  if (bytes > UINT64_MAX - (granule - 1)) return UINT64_MAX;
  return (bytes + granule - 1) / granule * granule;
}

bool tsr_tenant_charge(const tsr_tenant_t *t, int lease, uint64_t bytes, void (*retry)(void), int *out_charged) {
  *out_charged = -1;
  if (lease == TSR_TENANT_UNGOVERNED) return true;
  if (lease < 0 || (size_t)lease >= t->nleases) return !t->deny;
  const tsr_tenant_lease_t *l = &t->leases[lease];
  if (!tsr_region_charge(l->region, l->slot, bytes)) {
    if (!retry) return false;
    retry();
    if (!tsr_region_charge(l->region, l->slot, bytes)) return false;
  }
  *out_charged = lease;
  return true;
}

void tsr_tenant_credit(const tsr_tenant_t *t, int charged, uint64_t bytes) {
  if (charged < 0 || (size_t)charged >= t->nleases) return;
  const tsr_tenant_lease_t *l = &t->leases[charged];
  tsr_region_credit(l->region, l->slot, bytes);
}
