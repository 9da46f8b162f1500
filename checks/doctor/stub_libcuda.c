/* A stand-in for the CUDA toolkit's link-time stub (lib64/stubs/libcuda.so): the same SONAME
 * (libcuda.so.1), the driver-API symbols a build links against, and cuInit returning
 * CUDA_ERROR_STUB_LIBRARY (34) like the real stub. kiln-doctor's tests build it with
 *   cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o libcuda.so stub_libcuda.c
 * Nothing here comes from NVIDIA's stub; only the behaviour is reproduced. */
#define STUB(name) int name(void) { return 34; }
STUB(cuInit)
STUB(cuDriverGetVersion)
STUB(cuDeviceGet)
STUB(cuDeviceGetCount)
STUB(cuMemAlloc_v2)
STUB(cuMemFree_v2)
STUB(cuMemcpyHtoD_v2)
STUB(cuMemcpyDtoH_v2)
STUB(cuMemGetInfo_v2)
STUB(cuMemAddressReserve)
STUB(cuMemAddressFree)
STUB(cuMemCreate)
STUB(cuMemRelease)
STUB(cuMemMap)
STUB(cuMemUnmap)
STUB(cuMemSetAccess)
STUB(cuMemGetAllocationGranularity)
