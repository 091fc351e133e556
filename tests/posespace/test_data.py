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


def _held_out_poses_in_training(train: PoseSet, held: PoseSet) -> int:
    """How many held-out poses have an exact copy among the training poses of their skeleton."""
    count = 0
    for h in held.rigs:
        t = train.find(h.pose_rig.rig)
        if t is not None and len(h) and len(t):
            count += int((np.abs(h.poses[:, None] - t.poses[None]).max(axis=(2, 3)) == 0).any(axis=1).sum())
    return count


def test_built_in_alias_spellings_are_one_clip():
    # procedural:biped-walk is procedural:biped's walk and gaits:quadruped-walk is gaits:quadruped: loaded twice
    # under two names, holding out one spelling left an exact copy of its poses in training
    with pytest.warns(UserWarning, match=r"clip 'walk' was already loaded \(as 'procedural:biped#walk'\)"):
        ps = PoseSet.from_specs(["procedural:biped#walk,idle", "procedural:biped-walk"], fps=30.0)
    assert ps.clip_names() == ["procedural:biped#walk", "procedural:biped#idle"]
    for name in ("procedural:biped-walk#walk", "procedural:biped#walk"):
        train, held = ps.split_by_clip([name])
        assert train.clip_names() == ["procedural:biped#idle"] and held.clip_names() == ["procedural:biped#walk"]
    with pytest.warns(UserWarning, match=r"clip 'gait_0' was already loaded \(as 'gaits:quadruped#gait_0'\)"):
        gaits = PoseSet.from_specs(["gaits:quadruped*1", "gaits:quadruped-walk*2"], fps=30.0)
    assert gaits.clip_names() == ["gaits:quadruped#gait_0", "gaits:quadruped-walk#gait_1"]
    train, held = gaits.split_by_clip(["gaits:quadruped-walk#gait_0"])
    assert train.clip_names() == ["gaits:quadruped-walk#gait_1"] and held.clip_names() == ["gaits:quadruped#gait_0"]
    assert _held_out_poses_in_training(train, held) == 0
    # the idle of gaits: is another clip kind: never merged with the walks
    idle = PoseSet.from_specs(["gaits:quadruped*1", "gaits:quadruped-idle*1"], fps=30.0)
    assert idle.clip_names() == ["gaits:quadruped#gait_0", "gaits:quadruped-idle#idle_0"]


def test_a_clip_reached_through_two_spellings_of_its_file_is_loaded_once_and_held_out_in_either(
    tmp_path, monkeypatch, make_stick, make_walk
):
    # '../x#jog' and '/abs/x#jog' were two clips: holding out one spelling left an exact copy of it in training
    from usd_io import write_usdskel

    rig = make_stick()
    walk, jog = make_walk(rig, 30), make_walk(rig, 30, phase=1.0, amplitude=1.3)
    jog.name = "jog"
    (tmp_path / "data").mkdir()
    (tmp_path / "run").mkdir()
    path = tmp_path / "data" / "clips.usda"
    write_usdskel(path, rig, [walk, jog])
    monkeypatch.chdir(tmp_path / "run")
    rel, absolute, other = "../data/clips.usda", str(path.resolve()), "../run/../data/clips.usda"
    once = PoseSet.from_specs([f"{rel}#walk,jog"], fps=30.0)
    with pytest.warns(UserWarning, match=rf"clip 'jog' was already loaded \(as '{rel}#jog'\); using it once"):
        ps = PoseSet.from_specs([f"{rel}#walk,jog", f"{absolute}#jog"], fps=30.0)
    assert ps.clip_names() == [f"{rel}#walk", f"{rel}#jog"] and len(ps) == len(once) == 60
    for name in (f"{rel}#jog", f"{absolute}#jog", f"{other}#jog", "jog"):
        train, held = ps.split_by_clip([name])
        assert train.clip_names() == [f"{rel}#walk"] and held.clip_names() == [f"{rel}#jog"], name
        assert len(held) == 30 and _held_out_poses_in_training(train, held) == 0, name
    # a set holding both spellings (added by hand): holding out either takes both out of training
    both = PoseSet()
    for name, motion in ((f"{rel}#walk", walk), (f"{rel}#jog", jog), (f"{absolute}#jog", jog)):
        both.add(rig, motion, name, fps=None)
    for name in (f"{rel}#jog", f"{absolute}#jog"):
        train, held = both.split_by_clip([name])
        assert held.clip_names() == [f"{rel}#jog", f"{absolute}#jog"], name
        assert len(train) == 30 and _held_out_poses_in_training(train, held) == 0, name
    assert both.rigs[0].clip(f"{other}#jog").shape == (30, rig.joint_count, 6)  # any spelling names the clip


def test_held_out_names_may_come_from_an_iterator(make_stick, make_walk):
    # set(heldout) used up an iterator: the check for unknown names then saw none, and a typo trained on everything
    rig = make_stick()
    ps = PoseSet()
    for name, phase in (("walk", 0.0), ("stroll", 1.0)):
        ps.add(rig, make_walk(rig, 20, phase), name, fps=None)
    with pytest.raises(KeyError, match=r"held-out 'strol': no such clip; clips: walk, stroll"):
        ps.split_by_clip(n for n in ["strol"])
    train, held = ps.split_by_clip(iter(["stroll", "stroll"]))
    assert train.clip_names() == ["walk"] and held.clip_names() == ["stroll"] and len(held) == 20


def test_random_split_keeps_a_clip_of_every_skeleton_even_where_names_repeat(make_stick, make_walk):
    """The split picked clips per skeleton but held out by name: holding out the stick's 'walk' also took the
    quadruped's only clip, also called 'walk', out of training."""
    from usd_io import load_asset

    stick = make_stick()
    quad = load_asset("procedural:quadruped")
    ps = PoseSet()
    ps.add(stick, make_walk(stick, 20, 0.0), "walk", fps=None)
    ps.add(stick, make_walk(stick, 20, 1.0), "run", fps=None)
    ps.add(quad.rig, quad.clip().slice(0, 20), "walk", fps=None)
    for seed in range(6):
        train, held = ps.random_split(0.5, seed=seed)
        assert len(train.rigs) == 2, (seed, train, held)  # both skeletons train
        assert len(held.rigs) == 1 and len(held.rigs[0].clip_names) == 1 and len(held) == 20
        assert len(train) + len(held) == len(ps)
    with pytest.raises(ValueError, match=r"heldout_fraction: must be a number in \[0, 1\]"):
        ps.random_split(-0.4)
    with pytest.raises(ValueError, match=r"heldout: a list of clip names, got the string 'walk'"):
        ps.split_by_clip("walk")
