"""Clip specs and loading: what makes two clips the same, and the names held-out lists refer to."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from posespace import ClipSpec, PoseSet, load_clips


def _already_loaded(record) -> list[str]:
    return [str(w.message) for w in record if "already loaded" in str(w.message)]


def test_gait_specs_differing_only_in_seed_are_both_loaded():
    # the seed was left out of what identified a spec's clips: the seed-1 variation was dropped as "already loaded"
    specs = [ClipSpec("gaits:quadruped", count=1, seed=0), ClipSpec("gaits:quadruped", count=1, seed=1)]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ps = PoseSet.from_specs(specs, fps=30.0)
    assert not _already_loaded(record)
    assert ps.clip_names() == ["gaits:quadruped#gait_0", "gaits:quadruped+seed=1#gait_0"]  # seed 0: the old name
    a, b = (ps.rigs[0].clip(n) for n in ps.clip_names())
    assert len(a) != len(b) or np.abs(a - b).max() > 1e-3  # two different walks
    train, held = ps.split_by_clip(["gaits:quadruped+seed=1#gait_0"])
    assert train.clip_names() == ["gaits:quadruped#gait_0"] and held.clip_names() == ["gaits:quadruped+seed=1#gait_0"]


def test_retargeted_gaits_are_named_by_their_target():
    # gaits:biped and gaits:biped@TARGET were both named gaits:biped#gait_0: holding out one held out both
    ps = PoseSet.from_specs(["gaits:biped*1", "gaits:biped*1@procedural:biped"], fps=30.0)
    assert ps.clip_names() == ["gaits:biped#gait_0", "gaits:biped@procedural:biped#gait_0"]
    train, held = ps.split_by_clip(["gaits:biped@procedural:biped#gait_0"])
    assert train.clip_names() == ["gaits:biped#gait_0"]
    assert held.clip_names() == ["gaits:biped@procedural:biped#gait_0"]
    _, held = ps.split_by_clip(["gait_0"])  # a bare clip name still names every such clip
    assert len(held.clip_names()) == 2


def test_gait_counts_share_their_first_variations():
    # variation k is the same draw whatever the count: gaits:NAME*1 beside gaits:NAME*2 used to load gait_0 twice
    # (two clips of one name, its poses counted twice)
    _, one = load_clips("gaits:quadruped*1")
    _, two = load_clips("gaits:quadruped*2")
    np.testing.assert_array_equal(one["gait_0"].rotations, two["gait_0"].rotations)
    with pytest.warns(UserWarning, match=r"gaits:quadruped\*2: clip 'gait_0' was already loaded; using it once"):
        ps = PoseSet.from_specs(["gaits:quadruped*1", "gaits:quadruped*2"], fps=30.0)
    assert ps.clip_names() == ["gaits:quadruped#gait_0", "gaits:quadruped#gait_1"]
    assert len(ps) == len(PoseSet.from_specs(["gaits:quadruped*2"], fps=30.0))
