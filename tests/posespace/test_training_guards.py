"""Training refuses what it cannot do well: divergence, a resume with other settings, settings out of range, held-out
names that match no clip; and it keeps its bookkeeping across a resume (tiny models, a few seconds each)."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import replace

import pytest
import torch

from posespace import (
    AugmentConfig,
    DiffusionConfig,
    ModelConfig,
    PoseSet,
    PoseSpace,
    TrainConfig,
    ValidatorConfig,
    train,
)

TINY = ModelConfig(width=16, depth=1, heads=2)


@pytest.fixture
def stick_set(make_stick, make_walk) -> PoseSet:
    rig = make_stick()
    ps = PoseSet()
    for name, phase, amp in (("walk", 0.0, 1.0), ("stroll", 0.5, 0.6), ("march", 1.0, 1.2)):
        ps.add(rig, make_walk(rig, 40, phase, amp), name, fps=None)
    return ps


def _cfg(out, **changes) -> TrainConfig:
    base = TrainConfig(output=out, steps=4, batch_size=8, warmup=1, model=TINY, progress=False, heldout=("march",),
                       validator_poses=4, checkpoint_every=4)  # fmt: skip
    return replace(base, **changes)


def test_divergence_stops_at_the_step_and_keeps_the_last_good_checkpoint(tmp_path, stick_set):
    out = tmp_path / "run"
    train(_cfg(out), stick_set)
    ckpt = out / "checkpoint.pt"
    good = ckpt.read_bytes()
    (out / "posespace.pt").unlink()
    # a huge learning rate without clipping really blows the weights up within a few steps
    wild = _cfg(out, steps=60, lr=1e6, grad_clip=0.0, ema=0.0, resume=True, checkpoint_every=60)
    with pytest.raises(FloatingPointError, match=r"training diverged at step \d+: non-finite .*step 4\) is kept") as e:
        train(wild, stick_set)
    step = int(e.value.args[0].split("at step ")[1].split(":")[0])
    assert 4 < step < 60
    assert ckpt.read_bytes() == good  # never replaced by a broken one
    assert not (out / "posespace.pt").exists()
    PoseSpace.load(ckpt)  # and still a working pose space


def test_a_checkpoint_with_non_finite_weights_or_scale_is_refused_naming_the_file(tmp_path, stick_set):
    space = train(_cfg(tmp_path / "run", steps=1), stick_set)
    state = space.state()
    del state["checksum"]  # edited below: as a checkpoint from before checksums (else "checksum mismatch")
    name = next(iter(state["model"]))
    broken = dict(state, model={**state["model"], name: torch.full_like(state["model"][name], float("nan"))})
    torch.save(broken, tmp_path / "nan_weights.pt")
    with pytest.raises(ValueError, match=rf"nan_weights\.pt: non-finite model weights \({name}"):
        PoseSpace.load(tmp_path / "nan_weights.pt")
    torch.save(dict(state, scale=float("nan")), tmp_path / "nan_scale.pt")
    with pytest.raises(ValueError, match=r"nan_scale\.pt: scale: must be a finite number > 0, got nan"):
        PoseSpace.load(tmp_path / "nan_scale.pt")


def test_resume_with_other_settings_is_refused_before_anything_is_written(tmp_path, stick_set):
    out = tmp_path / "run"
    train(_cfg(out), stick_set)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    for changes, message in (
        ({"model": ModelConfig(width=32, depth=1, heads=2)}, r'model \{"width": 16, .*\} -> \{"width": 32, '),
        ({"heldout": ("stroll",)}, r'heldout \["march"\] -> \["stroll"\]; training clips 2 -> 2 \(march, stroll\)'),
        ({"validators": ValidatorConfig(limit_scale=2.0)}, r'validators \{.*"limit_scale": 1.5.*-> \{'),
        ({"steps": 2}, r"checkpoint is at step 4, past TrainConfig.steps 2"),
    ):
        with pytest.raises(ValueError, match=rf"checkpoint\.pt: cannot resume: .*{message}") as e:
            train(_cfg(out, resume=True, **changes), stick_set)
        assert "\n" not in str(e.value)
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # config.json included


def test_resume_keeps_the_log_and_never_moves_the_step_back(tmp_path, stick_set):
    out = tmp_path / "run"
    with warnings.catch_warnings():
        # float() of the validator loss used to warn "Converting a tensor with requires_grad=True to a scalar"
        warnings.filterwarnings("error", message=".*requires_grad.*")
        train(_cfg(out, steps=50, checkpoint_every=50), stick_set)
        train(_cfg(out, steps=100, checkpoint_every=50, resume=True), stick_set)
    log = json.loads((out / "train_log.json").read_text())["log"]
    assert [e["step"] for e in log] == [50, 100]  # the steps before the resume are still there
    assert log[1]["seconds"] > log[0]["seconds"] > 0
    # resuming the finished run with the same step count rewrites nothing; with fewer steps it is refused
    ckpt = out / "checkpoint.pt"
    data = ckpt.read_bytes()
    train(_cfg(out, steps=100, resume=True), stick_set)
    assert ckpt.read_bytes() == data
    with pytest.raises(ValueError, match=r"at step 100, past TrainConfig\.steps 50"):
        train(_cfg(out, steps=50, resume=True), stick_set)
    assert torch.load(ckpt, weights_only=False)["train"]["step"] == 100


def test_a_resumed_run_continues_the_unbroken_runs_random_streams(tmp_path, stick_set):
    """2 steps, then a resume to 4, give the weights of 4 unbroken steps: the checkpoint carries torch's generator
    (diffusion times and noise) and the batch sampler's. Before, the resumed steps redrew the noise of steps 0, 1."""
    unbroken = train(_cfg(tmp_path / "a", steps=4, checkpoint_every=2), stick_set)
    train(_cfg(tmp_path / "b", steps=2, checkpoint_every=2), stick_set)
    resumed = train(_cfg(tmp_path / "b", steps=4, checkpoint_every=2, resume=True), stick_set)
    a, b = unbroken.state()["model"], resumed.state()["model"]
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=0, atol=0, msg=name)


def test_a_resumed_run_records_the_unbroken_runs_final_loss(tmp_path, stick_set):
    """The final loss is the mean of the last 50 steps' losses; a resume within 50 steps of the end averaged only
    the steps after it (the buffer was not in the checkpoint), though the weights were the unbroken run's."""
    unbroken = train(_cfg(tmp_path / "a", steps=4, checkpoint_every=2), stick_set)
    train(_cfg(tmp_path / "b", steps=2, checkpoint_every=2), stick_set)
    ckpt = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=False)
    resumed = train(_cfg(tmp_path / "b", steps=4, checkpoint_every=2, resume=True), stick_set)
    torch.testing.assert_close(resumed.state()["model"], unbroken.state()["model"], rtol=0, atol=0)  # same steps
    assert resumed.training == unbroken.training and resumed.training["steps"] == 4
    a, b = (PoseSpace.load(tmp_path / run / "posespace.pt") for run in ("a", "b"))
    assert b.training_summary() == a.training_summary()
    # a checkpoint from before the losses were kept still resumes (its final loss then counts the steps after it)
    del ckpt["train"]["recent_losses"]
    torch.save(ckpt, tmp_path / "b" / "checkpoint.pt")
    old = train(_cfg(tmp_path / "b", steps=4, checkpoint_every=2, resume=True), stick_set)
    torch.testing.assert_close(old.state()["model"], unbroken.state()["model"], rtol=0, atol=0)
    assert old.training["steps"] == 4 and math.isfinite(old.training["final_loss"]) and old.training["final_loss"] > 0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model": ModelConfig(feature_count=10)}, r"ModelConfig.feature_count: the joint features have 26 entries"),
        ({"model": ModelConfig(width=10, heads=3)}, r"ModelConfig.width: must be a multiple of .*heads \(3\)"),
        ({"model": ModelConfig(width=15, heads=1)}, r"ModelConfig.width: must be even"),
        ({"model": ModelConfig(width=0)}, r"ModelConfig.width: must be an integer >= 1, got 0"),
        ({"model": ModelConfig(depth=0)}, r"ModelConfig.depth: must be an integer >= 1, got 0"),
        ({"model": ModelConfig(heads=0)}, r"ModelConfig.heads: must be an integer >= 1, got 0"),
        ({"model": ModelConfig(max_distance=-1)}, r"ModelConfig.max_distance: must be an integer >= 0, got -1"),
        ({"model": ModelConfig(mlp_ratio=0.0)}, r"ModelConfig.mlp_ratio: must be a finite number > 0"),
        ({"validators": ValidatorConfig(swing_planes=0)}, r"ValidatorConfig.swing_planes: must be an integer >= 3"),
        ({"validators": ValidatorConfig(limit_scale=-1.0)}, r"ValidatorConfig.limit_scale: must be a finite"),
        ({"validators": ValidatorConfig(collapse_ratio=math.nan)}, r"ValidatorConfig.collapse_ratio: .*\[0, 1\]"),
        ({"validators": ValidatorConfig(loss_weights=(1.0, -1.0, 4.0))}, r"ValidatorConfig.loss_weights\[1\]"),
        ({"diffusion": DiffusionConfig(cosine_offset=-1.0)}, r"DiffusionConfig.cosine_offset: must be a finite"),
        ({"diffusion": DiffusionConfig(min_alpha_bar=2.0)}, r"DiffusionConfig.min_alpha_bar: .*\(0, 1\), got 2.0"),
        ({"augment": AugmentConfig(mirror=-1.0)}, r"AugmentConfig.mirror: must be a number in \[0, 1\], got -1.0"),
        ({"augment": AugmentConfig(rotation_noise_deg=-5.0)}, r"AugmentConfig.rotation_noise_deg: must be a finite"),
    ],
)
def test_nested_settings_are_checked_before_any_work(tmp_path, stick_set, changes, message):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=message):
        train(_cfg(out, **changes), stick_set)
    assert not out.exists()


def test_unmatched_heldout_names_are_refused_and_training_clips_are_recorded(tmp_path, stick_set):
    from posespace import heldout_clips_in_training

    out = tmp_path / "run"
    with pytest.raises(KeyError, match=r"held-out 'Rnu', 'strol': no such clip; clips: walk, stroll, march"):
        train(_cfg(out, heldout=("march", "Rnu", "strol")), stick_set)
    assert not out.exists()
    space = train(_cfg(out), stick_set)
    loaded = PoseSpace.load(out / "posespace.pt")
    assert loaded.training_clips == space.training_clips == ("walk", "stroll")
    assert heldout_clips_in_training(loaded, ["march", "stroll"]) == ["stroll"]
    # older checkpoints without the record load as before (no clips known)
    state = loaded.state()
    del state["training_clips"]
    assert PoseSpace.from_state(state).training_clips == ()
    assert PoseSpace.from_state(state).fingerprint() == loaded.fingerprint()  # the record is not the identity


def test_a_gaits_clip_retargeted_onto_a_file_is_known_by_any_spelling_of_the_file(tmp_path, monkeypatch):
    """Gaits retargeted onto a skeleton file (``gaits:biped@data/x.bvh``) are recorded with the file resolved, as
    the data split holds them out: the evaluation's check compared such names as typed, so the same clip spelled
    from another folder was not flagged as seen in training."""
    from types import SimpleNamespace

    from posespace import heldout_clips_in_training

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.bvh").write_text("(the check only needs the file to exist)")
    monkeypatch.chdir(tmp_path)
    trained = SimpleNamespace(training_clips=(f"gaits:biped@{(tmp_path / 'data' / 'x.bvh').resolve()}#gait_0",))
    monkeypatch.chdir(tmp_path / "data")
    names = ["gaits:biped@x.bvh#gait_0", "gaits:biped@x.bvh#gait_1", "gaits:biped@../data/x.bvh#gait_0"]
    assert heldout_clips_in_training(trained, names) == [names[0], names[2]]


def _weights(space: PoseSpace) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in space.model.state_dict().items()}


def test_training_leaves_the_callers_random_state_alone_and_repeats_with_its_seed(tmp_path, stick_set):
    """train() reseeded torch's process-wide generator: a caller's stream continued from the training seed's."""
    torch.manual_seed(123)
    expected = torch.rand(3)  # the caller's stream, drawn without training in between
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = _weights(train(_cfg(tmp_path / "a", seed=7), stick_set))
    assert torch.equal(torch.get_rng_state(), state)
    torch.testing.assert_close(torch.rand(3), expected, rtol=0.0, atol=0.0)
    # the run depends on its own seed only, not on the caller's state
    torch.manual_seed(999)
    again = _weights(train(_cfg(tmp_path / "b", seed=7), stick_set))
    other = _weights(train(_cfg(tmp_path / "c", seed=8), stick_set))
    assert first.keys() == again.keys() == other.keys()
    for name in first:
        torch.testing.assert_close(again[name], first[name], rtol=0.0, atol=0.0)
    assert any(not torch.equal(other[name], first[name]) for name in first)


def test_a_folder_holding_an_earlier_run_is_refused_unless_resumed_or_overwritten(tmp_path, stick_set):
    """A second train() into the same folder silently replaced the first run (the acceptance run takes minutes)."""
    out = tmp_path / "run"
    train(_cfg(out), stick_set)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(ValueError) as e:
        train(_cfg(out, seed=1), stick_set)
    message = str(e.value)
    assert message == (
        f"{out}: holds an earlier run (checkpoint.pt, posespace.pt); continue it with resume=True (--resume), "
        "start afresh with overwrite=True (--overwrite), or choose another output folder"
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # config.json included
    # a finished model without its checkpoint cannot be resumed: said so, not overwritten
    (out / "checkpoint.pt").unlink()
    with pytest.raises(ValueError, match=r"holds a finished pose space \(posespace\.pt\) but no checkpoint\.pt to "):
        train(_cfg(out, resume=True), stick_set)
    assert (out / "posespace.pt").read_bytes() == before["posespace.pt"]
    # overwrite starts afresh: an earlier run's files go first, so a new run that fails leaves none of them behind
    (out / "checkpoint.pt").write_bytes(before["checkpoint.pt"])
    wild = _cfg(out, steps=60, lr=1e6, grad_clip=0.0, ema=0.0, checkpoint_every=60, overwrite=True)
    with pytest.raises(FloatingPointError, match="no checkpoint was written"):
        train(wild, stick_set)
    assert sorted(p.name for p in out.iterdir()) == ["config.json"]
    assert json.loads((out / "config.json").read_text())["lr"] == 1e6
    # a folder whose run stopped before its first checkpoint holds nothing to lose: a plain run goes ahead
    space = train(_cfg(out, seed=1), stick_set)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "config.json", "posespace.pt", "train_log.json"]
    assert PoseSpace.load(out / "posespace.pt").fingerprint() == space.fingerprint()


def test_a_damaged_checkpoint_fails_its_checksum_and_an_old_one_loads_unchecked(tmp_path, stick_set):
    """Bytes overwritten inside the zip were accepted (weights ~1e15 ran normally): the checksum names the file."""
    space = train(_cfg(tmp_path / "run", steps=1), stick_set)
    path = tmp_path / "run" / "posespace.pt"
    data = bytearray(path.read_bytes())
    # a weight whose bytes occur once in the file (torch stores tensor storages uncompressed; adaLN-Zero layers are
    # all zeros): overwrite one float the way a bad disk would
    name, weight = next((n, w) for n, w in space.model.state_dict().items()
                        if w.numel() >= 16 and data.count(w.contiguous().numpy().tobytes()[:64]) == 1)  # fmt: skip
    at = data.find(weight.contiguous().numpy().tobytes()[:64])
    data[at + 8 : at + 12] = b"\x7f\x7f\x7f\x57"
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(bytes(data))
    assert not torch.equal(torch.load(damaged, weights_only=False)["model"][name], weight)  # really damaged
    with pytest.raises(ValueError, match=r"damaged\.pt: checksum mismatch: the file is damaged"):
        PoseSpace.load(damaged)
    state = torch.load(path, weights_only=False)
    state["calibrations"][next(iter(state["calibrations"]))]["pass_rates"]["valid"] = 0.5  # calibrations count
    torch.save(state, tmp_path / "edited.pt")
    with pytest.raises(ValueError, match=r"edited\.pt: checksum mismatch"):
        PoseSpace.load(tmp_path / "edited.pt")
    # fields too damaged to hash fail the checksum by name too (they raised a bare AttributeError)
    for field, junk in (("calibrations", [1, 2]), ("model", {"w": 1.0}), ("scale", "x")):
        bad = {**torch.load(path, weights_only=False), field: junk}
        torch.save(bad, tmp_path / f"bad_{field}.pt")
        with pytest.raises(ValueError, match=rf"bad_{field}\.pt: checksum mismatch"):
            PoseSpace.load(tmp_path / f"bad_{field}.pt")
    # a damaged training checkpoint is not resumed from
    ckpt = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)
    ckpt["scale"] = float(ckpt["scale"]) * 2.0
    torch.save(ckpt, tmp_path / "run" / "checkpoint.pt")
    with pytest.raises(ValueError, match=r"checkpoint\.pt: cannot resume: checksum mismatch"):
        train(_cfg(tmp_path / "run", steps=2, resume=True), stick_set)
    del state["checksum"]  # written before checksums were stored: loads as before
    torch.save(state, tmp_path / "old.pt")
    old = PoseSpace.load(tmp_path / "old.pt")
    assert old.fingerprint() == PoseSpace.from_state(state).fingerprint() and old.calibrations
    assert PoseSpace.load(path).fingerprint() == space.fingerprint()


def test_the_model_records_its_training_steps_and_final_loss(tmp_path, stick_set):
    out = tmp_path / "run"
    train(_cfg(out, steps=3, checkpoint_every=2), stick_set)
    loaded = PoseSpace.load(out / "posespace.pt")
    assert loaded.training["steps"] == 3
    assert math.isfinite(loaded.training["final_loss"]) and loaded.training["final_loss"] > 0
    assert loaded.training_summary().startswith("trained 3 steps, final loss ")
    assert "trained for only 3 steps (< 500)" in loaded.training_warning()
    assert torch.load(out / "checkpoint.pt", weights_only=False)["training"]["steps"] == 3
    first_loss = loaded.training["final_loss"]
    again = train(_cfg(out, steps=3, resume=True), stick_set)  # nothing left to train: the record is kept
    assert again.training == {"steps": 3, "final_loss": first_loss}
    resumed = train(_cfg(out, steps=5, resume=True), stick_set)  # the count goes on across a resume
    assert resumed.training["steps"] == 5 and PoseSpace.load(out / "posespace.pt").training["steps"] == 5
    enough = PoseSpace(resumed.model, resumed.scale, training={"steps": 500, "final_loss": 0.1})
    assert enough.training_warning() is None
    unknown = PoseSpace(resumed.model, resumed.scale)  # checkpoints from before provenance was recorded
    assert unknown.training_warning() is None and unknown.training_summary() == "training steps not recorded"


def test_a_checkpoint_calibrated_with_excluded_pairs_is_not_resumed(tmp_path, stick_set):
    """Checkpoints written before pair allowances exclude routinely overlapping part pairs; a resumed run
    recalibrates, which would switch its validator loss to allowances mid-run: refused, nothing rewritten."""
    out = tmp_path / "run"
    train(_cfg(out, steps=2), stick_set)
    path = out / "checkpoint.pt"
    state = torch.load(path, weights_only=False)
    key = next(iter(state["calibrations"]))
    cal = {k: v for k, v in state["calibrations"][key].items() if k != "part_allowances"}
    state["calibrations"][key] = {**cal, "excluded_parts": [[9, 13]]}  # as written before allowances
    del state["checksum"]  # (edited: as a checkpoint from before checksums)
    torch.save(state, path)
    before = path.read_bytes()
    with pytest.raises(ValueError, match=r"checkpoint\.pt: cannot resume: the checkpoint's calibrations exclude "
                                         r"routinely overlapping part pairs .*--overwrite"):  # fmt: skip
        train(_cfg(out, steps=4, resume=True), stick_set)
    assert path.read_bytes() == before
    # the same checkpoint with its allowances (or with nothing excluded) resumes
    state["calibrations"][key] = {**cal, "excluded_parts": [], "part_allowances": []}
    torch.save(state, path)
    assert train(_cfg(out, steps=4, resume=True), stick_set).training["steps"] == 4
