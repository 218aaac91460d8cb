/* account.c: charging a lease's region and remembering what each
 * allocation was charged.
 *
 * Every hook follows one order: find the lease, charge the region (refuse
 * with out-of-memory before the driver is asked), call the driver, and on
 * failure give the charge back; on success record what was charged under
 * the allocation's key. Every free takes the key's record (whichever path
 * allocated it: a cuMemAlloc pointer freed by cuMemFreeAsync is credited
 * the same), calls the driver, and credits the lease only if the driver
 * freed it (a failed free changes nothing). Keys the shim never charged
 * (allocated before it attached, or on a device without a lease) pass
 * through uncredited.
 *
 * What a context holds ends with it (the driver frees a context's
 * allocations, arrays and modules when it is destroyed or reset): each
 * record names the context it was made in (context.c's id), and the
 * context's end takes every record that names it and credits it
 * (context.c); a free that comes after finds nothing to credit. VMM
 * handles and libraries are not a context's and are recorded with none.
 * A stream-ordered block is recorded with its pool (pools.c): its bytes
 * are its pool's account's, and its free credits the account only once
 * the pool has been destroyed.
 *
 * Pools and the graph memory cache hold memory that no allocation call
 * names (freed bytes kept for reuse), so they are charged what the driver
 * says they reserve (pools.c, graphs.c); that number shrinks on the
 * driver's schedule, so before the shim refuses anything it brings those
 * accounts up to date and tries once more. */
#include "shim/shim.h"

/* The protocol is the tenant module's (tenant/tenant.h), shared with the
 * OpenCL shim; these bind it to this shim's tenant and granule. */
uint64_t tsr_shim_round(uint64_t bytes) { return tsr_tenant_round(bytes, TSR_SHIM_GRANULE); }

bool tsr_shim_charge_exact(int charged, uint64_t bytes) {
  int got;
  return charged < 0 || tsr_tenant_charge(&tsr_shim.tenant, charged, bytes, NULL, &got);
}

void tsr_shim_credit_exact(int charged, uint64_t bytes) { tsr_tenant_credit(&tsr_shim.tenant, charged, bytes); }

bool tsr_shim_charge(int lease, uint64_t bytes, int *out_charged) {
  /* before a refusal the pools' and the graph cache's accounts are brought
   * to what the driver says they reserve, and the charge asked again */
  return tsr_tenant_charge(&tsr_shim.tenant, lease, tsr_shim_round(bytes), tsr_shim_reconcile, out_charged);
}

void tsr_shim_uncharge(int charged, uint64_t bytes) { tsr_shim_credit_exact(charged, tsr_shim_round(bytes)); }

uint64_t tsr_shim_left(int lease) {
  if (lease == TSR_TENANT_UNGOVERNED) return UINT64_MAX;
  if (lease == TSR_TENANT_NO_LEASE) return tsr_shim.tenant.deny ? 0 : UINT64_MAX;
  uint64_t total = UINT64_MAX, free_b = UINT64_MAX;
  tsr_shim_view(lease, &total, &free_b);
  return free_b;
}

void tsr_shim_view(int lease, uint64_t *total, uint64_t *free_b) {
  tsr_tenant_view(&tsr_shim.tenant.leases[lease], total, free_b);
}

CUresult tsr_shim_record(int charged, uint64_t key, uint64_t raw, uint64_t bytes, tsr_shim_life_t life,
                         CUresult (*undo)(uint64_t raw)) {
  if (charged < 0) return CUDA_SUCCESS;
  tsr_shim_ptrmap_val_t held = {tsr_shim_round(bytes), (uint32_t)charged, 0, 0};
  if (life == TSR_SHIM_LIFE_CONTEXT) held.ctx = tsr_shim_context_current();
  if (tsr_shim_ptrmap_put(&tsr_shim.map, key, &held)) return CUDA_SUCCESS;
  tsr_shim_warn_once(TSR_WARN_TOO_MANY_ALLOCATIONS, "too many live allocations to account for; refusing more");
  if (undo) undo(raw);
  tsr_shim_uncharge(charged, bytes);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

bool tsr_shim_forget(uint64_t key, tsr_shim_ptrmap_val_t *out_held) {
  if (!tsr_shim.tenant.governed) return false;
  return tsr_shim_ptrmap_take(&tsr_shim.map, key, out_held);
}

void tsr_shim_held_end(const tsr_shim_ptrmap_val_t *held) {
  if (held->pool)
    tsr_shim_pool_block_end(held);
  else
    tsr_shim_credit_exact((int)held->tag, held->bytes);
}

CUresult tsr_shim_settle(CUresult rc, uint64_t key, bool ours, const tsr_shim_ptrmap_val_t *held) {
  if (!ours) return rc;
  if (rc == CUDA_SUCCESS)
    tsr_shim_held_end(held);
  else
    tsr_shim_context_keep(key, held); /* recorded again, unless its context ended meanwhile */
  return rc;
}

CUresult tsr_shim_free(uint64_t key, CUresult (*real)(uint64_t raw), uint64_t raw) {
  tsr_shim_ptrmap_val_t held;
  bool ours = tsr_shim_forget(key, &held);
  return tsr_shim_settle(real(raw), key, ours, &held);
}
