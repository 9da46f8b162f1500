// The C ABI shared by the kernels and Rust (kiln-build runs bindgen over this directory).
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// Arguments of consumer_scale_f32: y[i] = alpha * x[i] for i < n.
typedef struct ConsumerScaleArgs {
    float alpha;
    unsigned int n;
} ConsumerScaleArgs;

#ifdef __cplusplus
}
#endif
