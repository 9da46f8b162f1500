// One kernel of checks/reach-dispatch (README.md), built for its own targets only.
extern "C" __global__ void sm80_xmma_gemm(float *a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += 1.0f;
}

extern "C" void launch_sm80_xmma_gemm(float *a, int n) { sm80_xmma_gemm<<<(n + 255) / 256, 256>>>(a, n); }
