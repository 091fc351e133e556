"""Stage validation with every validator registered in ``pxr.UsdValidation``.

``usdchecker`` and ``UsdUtils.ComplianceChecker`` are gone from usd-core 26.8+; their replacement is the
``UsdValidation`` framework: plugins register validators (core, UsdGeom, UsdSkel, UsdShade, UsdPhysics, UsdLux,
UsdMedia, UsdUtils/usdz ...) in a ``ValidationRegistry``, and a ``ValidationContext`` runs a set of them over a
stage (stage, layer and prim validators; prim validators filtered by the schema types they declare). We run all
of them over all prims (instance proxies included) and every time code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["ValidationIssue", "validate_stage", "validation_issues", "validator_names"]


@dataclass(frozen=True)
class ValidationIssue:
    """One finding of a validator.

    Attributes:
        severity: ``"error"``, ``"warning"`` or ``"info"``.
        validator: the validator's registered name (e.g. ``"usdSkelValidators:SkelBindingApiValidator"``).
        name: the error's name within the validator (may be empty).
        sites: where (prim/property paths or layer identifiers), possibly empty.
        message: what the validator says.
    """

    severity: str
    validator: str
    name: str
    sites: tuple[str, ...]
    message: str

    def __str__(self) -> str:
        where = f" at {', '.join(self.sites)}" if self.sites else ""
        return f"{self.severity}: {self.validator}{where}: {self.message}"


def validator_names() -> list[str]:
    """Names of every validator registered with ``pxr.UsdValidation`` (loads their plugins), sorted."""
    from pxr import UsdValidation

    registry = UsdValidation.ValidationRegistry()
    return sorted(v.GetMetadata().name for v in registry.GetOrLoadAllValidators())


def _site_text(site) -> str:
    if site.IsProperty():
        return str(site.GetProperty().GetPath())
    if site.IsPrim():
        return str(site.GetPrim().GetPath())
    layer = site.GetLayer()
    return layer.identifier if layer else ""


def validation_issues(path: str | Path) -> list[ValidationIssue]:
    """Runs every registered validator on the stage at ``path`` and returns all findings.

    Args:
        path: a USD file.

    Raises:
        pxr.Tf.ErrorException: the file cannot be opened as a USD stage.
    """
    from pxr import Usd, UsdValidation

    stage = Usd.Stage.Open(str(path), Usd.Stage.LoadAll)
    registry = UsdValidation.ValidationRegistry()
    context = UsdValidation.ValidationContext(registry.GetOrLoadAllValidators())
    severity = {
        UsdValidation.ValidationErrorType.Error: "error",
        UsdValidation.ValidationErrorType.Warn: "warning",
        UsdValidation.ValidationErrorType.Info: "info",
    }
    issues = []
    for err in context.Validate(stage, Usd.TraverseInstanceProxies(Usd.PrimAllPrimsPredicate)):
        if err.HasNoError():
            continue
        validator = err.GetValidator()
        issues.append(
            ValidationIssue(
                severity=severity.get(err.GetType(), "error"),
                validator=validator.GetMetadata().name if validator else "",
                name=str(err.GetName()),
                sites=tuple(s for s in (_site_text(site) for site in err.GetSites()) if s),
                message=err.GetMessage(),
            )
        )
    return issues


def validate_stage(path: str | Path, *, include_warnings: bool = False) -> list[str]:
    """Validates the stage at ``path`` with every validator registered in ``pxr.UsdValidation``.

    Args:
        path: a USD file (``.usd``, ``.usda``, ``.usdc``, ``.usdz``).
        include_warnings: also return warnings (prefixed ``"warning: "``).

    Returns:
        one line per error (``"error: <validator> at <sites>: <message>"``); empty when the stage is clean.

    Raises:
        pxr.Tf.ErrorException: the file cannot be opened as a USD stage.
    """
    keep = {"error", "warning"} if include_warnings else {"error"}
    return [str(issue) for issue in validation_issues(path) if issue.severity in keep]
