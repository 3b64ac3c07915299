# Sparse triangular-solve kernels (issue 4): filled in by that component.
