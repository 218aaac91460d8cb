# env.sh: what every shim test here shares. Source it from a test script;
# it sources ../lease/lib.sh (a private tesserad, `t`, checks) and points
# the shim and its tenants at the fake driver:
#   SHIM FAKE TENANT CHECK  libtessera-cuda.so, the fake libcuda.so.1, and
#                           the two programs of this folder (set by ctest)
# The fake's contexts take its default 512 MiB (the shim charges each one
# 524 MiB, as the H100 took). Options of every script: --no-arrays-graphs leaves the array,
# mipmapped-array and graph-memory paths out of the mix.
source "$(dirname "$0")/../lease/lib.sh"
: "${SHIM:?SHIM must name libtessera-cuda.so}" "${FAKE:?FAKE must name the fake libcuda.so.1}"
: "${TENANT:?TENANT must name tsr_shim_tenant}" "${CHECK:?CHECK must name tsr_shim_check}"
EXTRA=1
for a in "$@"; do
  case $a in
    --no-arrays-graphs) EXTRA=0 ;;
    *) echo "usage: $0 [--no-arrays-graphs]"; exit 2 ;;
  esac
done
export TESSERA_REAL_LIBCUDA=$FAKE
export LD_LIBRARY_PATH="$(dirname "$FAKE")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FAKE_CUDA_STATE=$T_DIR/fake-cuda.state
unset FAKE_CUDA_CTX_BYTES FAKE_CUDA_DEVICES FAKE_CUDA_TOTAL_MEM FAKE_CUDA_ALLOC_GRANULE
REGIONS=$T_STATE/regions
export TESSERA_REGION_DIR=$REGIONS
unset TESSERA_LEASE TESSERA_POLICY CUDA_VISIBLE_DEVICES

# lease_create ARGS...: creates a lease; sets ID and LIMIT (its bytes)
lease_create() {
  t lease create "$@" --for 10m --json
  [ "$RC" -eq 0 ] || { echo "FAIL: lease create $*: $ERR"; exit 1; }
  ID=$(json_field id)
  LIMIT=$(json_field bytes)
}
