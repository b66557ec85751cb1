"""hilbertgeom.gpu: CuPy-backed equivalents of the core kernels.

Installed from the top-level ``gpu/`` folder as ``hilbertgeom.gpu``.  The core
never imports it.  Importing it never requires CUDA.

Status: the device kernels are not implemented yet (they are tracked as their
own work item); nothing is exported.  The core's Euclidean pair kernel
(``hilbertgeom._pairs.extreme_pair_l2``) is already written against the array
API and is tested in a strict array-API namespace, so that this package can
bind it to CuPy.
"""

__all__: list[str] = []
