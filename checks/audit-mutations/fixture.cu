// Fixture device code for the audit mutation suite: two kernels (one templated, so the cubin
// carries a mangled name), compiled for the pinned arch matrix into a shared library.
extern "C" __global__ void kfix_add(float *a, const float *b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += b[i];
}

template <typename T> __global__ void kfix_scale(T *a, T s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] *= s;
}
template __global__ void kfix_scale<float>(float *, float, int);

extern "C" int kfix_helper_threads(void);
extern "C" int kfix_entry(void) { return kfix_helper_threads(); }
