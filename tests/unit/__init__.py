"""Unit tier: each op's shapes, FLOPs and bytes, kernels against naive references, each
loader's errors, single device-model functions."""
