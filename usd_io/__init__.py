"""kinedistill.usd_io: read rigs and motions (glTF, BVH, UsdSkel) and write UsdSkel / UsdPhysics stages.

``usd_io`` depends on ``sim`` (the data model) and never on torch or diffusers. pxr is imported on first use.
"""

from ._bvh import read_bvh
from ._gltf import GltfWarning, read_gltf
from ._usd_validation import ValidationIssue, validate_stage, validation_issues, validator_names
from ._usdskel_read import UsdSkelWarning, read_usdskel
from ._usdskel_write import write_usdskel
from .asset import PROCEDURAL_PREFIX, Asset, load_asset
from .atomic import Terminated, atomic_output, check_folder, interrupt_exit_status, make_folder, stop_on_sigterm
from .audit_io import (
    AUDIT_FILES,
    assert_ground_contact,
    assert_no_foot_skate,
    assert_no_self_intersection,
    audit_asset,
    audit_file,
    audit_folder_names,
    write_audit,
)
from .errors import InputError

__all__ = [
    "AUDIT_FILES",
    "PROCEDURAL_PREFIX",
    "Asset",
    "GltfWarning",
    "InputError",
    "Terminated",
    "UsdSkelWarning",
    "ValidationIssue",
    "assert_ground_contact",
    "assert_no_foot_skate",
    "assert_no_self_intersection",
    "atomic_output",
    "audit_asset",
    "audit_file",
    "audit_folder_names",
    "check_folder",
    "interrupt_exit_status",
    "load_asset",
    "make_folder",
    "read_bvh",
    "read_gltf",
    "read_usdskel",
    "stop_on_sigterm",
    "validate_stage",
    "validation_issues",
    "validator_names",
    "write_audit",
    "write_usdskel",
]
