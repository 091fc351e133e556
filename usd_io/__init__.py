"""kinedistill.usd_io: read rigs and motions (glTF, BVH, UsdSkel) and write UsdSkel / UsdPhysics stages.

``usd_io`` depends on ``sim`` (the data model) and never on torch or diffusers. pxr is imported on first use.
"""

from .asset import PROCEDURAL_PREFIX, Asset, load_asset
from .atomic import atomic_output
from .errors import InputError

__all__ = ["PROCEDURAL_PREFIX", "Asset", "InputError", "atomic_output", "load_asset"]
