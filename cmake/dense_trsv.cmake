# Dense triangular-solve kernels (issue 3): filled in by that component.
