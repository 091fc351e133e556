"""Projection checkpoints: an interrupted run resumes to exactly the unbroken result; other jobs' checkpoints are
refused by name."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from physics_rigs import table_quadruped, walkish

from sim.physics import (
    CharacterConfig,
    CheckpointError,
    ProjectionCheckpoint,
    ProjectionConfig,
    TrackingConfig,
    build_character,
    project,
    reference_trajectory,
)

CFG = ProjectionConfig(
    samples=6, iterations=2, window_frames=8, commit_frames=4, ilc_passes=1, passes=2, rollout_batches=2, threads=2
)


@pytest.fixture(scope="module")
def case():
    rig = table_quadruped()
    motion = walkish(rig, frames=24)
    ch = build_character(rig, motion, CharacterConfig(stiffness_hz=4.0))
    return ch, reference_trajectory(ch, motion)


@pytest.fixture(scope="module")
def unbroken(case):
    ch, ref = case
    calls = []
    res = project(ch, ref, TrackingConfig(), CFG, progress=lambda done, total, cost: calls.append(done))
    assert res.ok
    return res, calls


class Interrupt(Exception):
    pass


def _interrupt_after(n: int):
    calls = []

    def progress(done, total, cost):
        calls.append(done)
        if len(calls) == n:
            raise Interrupt

    return progress


# 24 frames, 8-frame windows committing 4: five windows per sweep (frames 4, 8, 12, 16, 23)
# with a long save interval only the ILC plan and finished sweeps are saved: the resumed run starts with the
# first sweep (without redoing the ILC passes)
@pytest.mark.parametrize(
    ("windows_before_kill", "interval_s", "resumed"),
    [(2, 0.0, {"pass": 0, "frame": 8, "finished": False}), (7, 0.0, {"pass": 1, "frame": 8, "finished": False}),
     (2, 1e9, None)],
)  # fmt: skip
def test_interrupted_projection_resumes_to_the_unbroken_result(
    case, unbroken, tmp_path, windows_before_kill, interval_s, resumed
):
    ch, ref = case
    full, full_calls = unbroken
    path = tmp_path / "ckpt.npz"
    progress = _interrupt_after(windows_before_kill)
    with pytest.raises(Interrupt):
        project(ch, ref, TrackingConfig(), CFG, progress=progress, checkpoint=ProjectionCheckpoint(path, interval_s))
    assert path.is_file()
    resumed_calls = []
    other_threads = dataclasses.replace(CFG, threads=1 if CFG.threads != 1 else 2)  # speed only: still resumable
    res = project(
        ch, ref, TrackingConfig(), other_threads, progress=lambda d, t, c: resumed_calls.append(d),
        checkpoint=ProjectionCheckpoint(path, interval_s, resume=True),
    )  # fmt: skip
    # it continued where the checkpoint was (the window whose progress raised had been saved), not from the start
    assert resumed_calls == full_calls[windows_before_kill if resumed else 0 :]
    assert res.info["resumed"] == resumed
    np.testing.assert_array_equal(res.body_pos, full.body_pos)
    np.testing.assert_array_equal(res.body_rot, full.body_rot)
    np.testing.assert_array_equal(res.target_coords, full.target_coords)
    assert res.info["pass_errors"] == full.info["pass_errors"]
    assert res.info["rollout_world_frames"] == full.info["rollout_world_frames"]
    assert full.info["resumed"] is None
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.npz"]  # written atomically: no temporary files left
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()  # the usual permissions, not mkstemp's 0600


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_killed_saves_temporary_file_is_removed(case, tmp_path):
    ch, ref = case
    stale = tmp_path / ".job.npz.123.456.tmp"
    stale.write_bytes(b"half a checkpoint")
    short = ProjectionConfig(samples=2, iterations=1, window_frames=8, commit_frames=4, ilc_passes=0, passes=1)
    project(ch, ref, TrackingConfig(), short, checkpoint=ProjectionCheckpoint(tmp_path / "job.npz"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.npz"]


def test_stale_temporaries_are_matched_by_name_not_as_a_pattern(tmp_path):
    """ "run[1].npz" was a glob pattern: it removed another job's ".run1.npz" temporary and kept its own."""
    from sim.physics._checkpoint import remove_stale_temporaries

    (tmp_path / ".run[1].npz.123.456.tmp").write_text("stale")
    (tmp_path / ".run1.npz.999.888.tmp").write_text("another job's, in flight")
    remove_stale_temporaries(tmp_path / "run[1].npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".run1.npz.999.888.tmp"]


def test_finished_checkpoint_returns_without_simulating(case, unbroken, tmp_path):
    ch, ref = case
    full, _ = unbroken
    path = tmp_path / "done.npz"
    project(ch, ref, TrackingConfig(), CFG, checkpoint=ProjectionCheckpoint(path))
    calls = []
    res = project(
        ch, ref, TrackingConfig(), CFG, progress=lambda d, t, c: calls.append(d),
        checkpoint=ProjectionCheckpoint(path, resume=True),
    )  # fmt: skip
    assert calls == [] and res.info["resumed"]["finished"]
    np.testing.assert_array_equal(res.body_pos, full.body_pos)
    # without resume the checkpoint is overwritten by a new run
    res = project(ch, ref, TrackingConfig(), CFG, checkpoint=ProjectionCheckpoint(path))
    assert res.info["resumed"] is None


def test_checkpoints_of_other_jobs_are_refused(case, tmp_path):
    ch, ref = case
    path = tmp_path / "job.npz"
    short = ProjectionConfig(samples=2, iterations=1, window_frames=8, commit_frames=4, ilc_passes=0, passes=1)
    project(ch, ref, TrackingConfig(), short, checkpoint=ProjectionCheckpoint(path))
    again = ProjectionCheckpoint(path, resume=True)
    other = ProjectionConfig(samples=3, iterations=1, window_frames=8, commit_frames=4, ilc_passes=0, passes=1)
    with pytest.raises(CheckpointError, match=r"job\.npz: .*different settings \(differs in: projection\.samples\)"):
        project(ch, ref, TrackingConfig(), other, checkpoint=again)
    slower = reference_trajectory(ch, walkish(ch.rig, fps=24.0))
    with pytest.raises(CheckpointError, match=r"job\.npz: .*different character or reference"):
        project(ch, slower, TrackingConfig(), short, checkpoint=again)
    with pytest.raises(CheckpointError, match=r"job\.npz: .*settings \(differs in: target_filter\)"):
        project(ch, ref, TrackingConfig(), short, checkpoint=again, target_filter=lambda m: m)
    no_self = build_character(ch.rig, ref.motion, CharacterConfig(stiffness_hz=4.0, self_collision=False))
    with pytest.raises(CheckpointError, match=r"differs in: character\.self_collision"):
        project(no_self, reference_trajectory(no_self, ref.motion), TrackingConfig(), short, checkpoint=again)
    # a filtered run refuses another filter (identified by its output on the reference)
    filtered = ProjectionCheckpoint(tmp_path / "filtered.npz")
    project(ch, ref, TrackingConfig(), short, checkpoint=filtered, target_filter=lambda m: m)
    rest = ch.rig.rest_rotations

    def freeze(m):
        return type(m)(m.fps, m.root_translations, np.repeat(rest[None], m.frame_count, 0))

    with pytest.raises(CheckpointError, match=r"filtered\.npz: .*differs in: target_filter"):
        project(ch, ref, TrackingConfig(), short, target_filter=freeze,
                checkpoint=ProjectionCheckpoint(filtered.path, resume=True))  # fmt: skip
    # a filter's own key identifies it, even where two filters give the same output on the reference
    keyed = ProjectionCheckpoint(tmp_path / "keyed.npz")

    def same(m):
        return m

    same.key = "filter A"
    project(ch, ref, TrackingConfig(), short, checkpoint=keyed, target_filter=same)

    def other_filter(m):
        return m

    other_filter.key = "filter B"
    with pytest.raises(CheckpointError, match=r"keyed\.npz: .*differs in: target_filter"):
        project(ch, ref, TrackingConfig(), short, target_filter=other_filter,
                checkpoint=ProjectionCheckpoint(keyed.path, resume=True))  # fmt: skip
    # a readable archive without the checkpoint's structure, and a truncated file
    np.savez(tmp_path / "other.npz", meta=np.array('{"format": "kinedistill projection checkpoint", "version": 1}'))
    with pytest.raises(CheckpointError, match=r"other\.npz: not a readable projection checkpoint \(KeyError"):
        project(ch, ref, TrackingConfig(), short, checkpoint=ProjectionCheckpoint(tmp_path / "other.npz", resume=True))
    path.write_bytes(path.read_bytes()[:100])  # a truncated file
    with pytest.raises(CheckpointError, match=r"job\.npz: not a readable projection checkpoint"):
        project(ch, ref, TrackingConfig(), short, checkpoint=again)
    path.write_text("not an archive\n")  # any other file: no advice to unpickle it
    with pytest.raises(CheckpointError, match=r"job\.npz: not a readable projection checkpoint") as err:
        project(ch, ref, TrackingConfig(), short, checkpoint=again)
    assert "pickle" not in str(err.value)
    with pytest.raises(ValueError, match=r"interval_s"):
        ProjectionCheckpoint(path, interval_s=float("nan"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"resume": "false"}, r"ProjectionCheckpoint\.resume: must be True or False, got 'false'"),
        ({"resume": 1}, r"ProjectionCheckpoint\.resume: must be True or False, got 1"),
        ({"interval_s": True}, r"ProjectionCheckpoint\.interval_s: must be a finite number >= 0 \[s\], got True"),
        ({"interval_s": "5"}, r"ProjectionCheckpoint\.interval_s: must be a finite number >= 0 \[s\], got '5'"),
        ({"interval_s": -1.0}, r"ProjectionCheckpoint\.interval_s: must be a finite number >= 0"),
    ],
)
def test_checkpoint_settings_of_the_wrong_kind_are_refused(tmp_path, kwargs, message):
    # resume="false" (a truthy string, as from an environment variable) resumed a finished run and simulated nothing
    with pytest.raises(ValueError, match=message):
        ProjectionCheckpoint(tmp_path / "p.npz", **kwargs)
    assert ProjectionCheckpoint(tmp_path / "p.npz", interval_s=np.float32(2.0), resume=np.bool_(True)).resume
