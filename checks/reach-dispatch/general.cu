// Portable kernel and the run-time dispatcher (checks/reach-dispatch/README.md).
#include <cuda_runtime.h>

extern "C" void launch_sm80_xmma_gemm(float *a, int n);
extern "C" void launch_sm90_xmma_gemm(float *a, int n);
extern "C" void launch_multicast_allreduce(float *a, int n);
extern "C" void launch_scale(float *a, int n);

extern "C" __global__ void gemm(float *a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = a[i] * 2.0f + 1.0f;
}

// Picks the kernel built for this GPU, as cuDNN, cuSPARSELt and NCCL do; 0 on success.
extern "C" int kiln_reach_run(float *a, int n) {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return -1;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (major == 8) launch_sm80_xmma_gemm(a, n);
    else if (major == 9 && minor == 0) launch_sm90_xmma_gemm(a, n);
    else if (major == 10) launch_multicast_allreduce(a, n);
    else gemm<<<(n + 255) / 256, 256>>>(a, n);
    launch_scale(a, n);
    return cudaGetLastError() == cudaSuccess ? 0 : -2;
}
