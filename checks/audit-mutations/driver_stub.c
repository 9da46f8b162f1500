/* Stands in for a copy of the NVIDIA driver library that a careless repair step bundled
 * (built with -soname libcuda.so.1). Only its presence in the wheel matters. */
int cuInit(unsigned int flags) { return (int)flags; }
