"""kinedistill.usd_io: read rigs and motions (glTF, BVH, UsdSkel) and write UsdSkel / UsdPhysics stages.

``usd_io`` depends on ``sim`` (the data model) and never on torch or diffusers. pxr is imported on first use.
"""

from ._bvh import read_bvh
from ._gltf import GltfWarning, read_gltf
from ._usd_validation import ValidationIssue, validate_stage, validation_issues, validator_names
from ._usdskel_read import UsdSkelWarning, read_usdskel
from ._usdskel_write import write_usdskel
from .asset import PROCEDURAL_PREFIX, Asset, load_asset
from .atomic import atomic_output
from .errors import InputError

__all__ = [
    "PROCEDURAL_PREFIX",
    "Asset",
    "GltfWarning",
    "InputError",
    "UsdSkelWarning",
    "ValidationIssue",
    "atomic_output",
    "load_asset",
    "read_bvh",
    "read_gltf",
    "read_usdskel",
    "validate_stage",
    "validation_issues",
    "validator_names",
    "write_usdskel",
]
