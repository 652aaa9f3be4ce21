"""Wire codecs: bit packing, sparse formats, and the fused (numba) kernels of TernGrad and the threshold methods."""
