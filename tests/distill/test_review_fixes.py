"""Review fixes of the distillation loop: NumPy scalar settings leave a checkpoint that resumes (torch.load with
weights_only=True refused the NumPy scalars they put into Adam's param groups and the log), and an output of the run
folder that cannot be written is refused before the first step, not after the whole optimization."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from example_scripts import load_example

from distill import CameraConfig, RasterSettings, RenderConfig
from distill.guidance import GuidanceConfig, TimestepSchedule
from distill.optimize import DistillConfig, Distiller, LossWeights, OptimConfig
from usd_io import InputError


def _config(steps: int = 2, render: dict | None = None, **optim) -> DistillConfig:
    render = {"raster": RasterSettings(sigma=1.0), **(render or {})}
    return DistillConfig(
        prompt="a chain waving",
        frames=5,
        fps=12.0,
        render=RenderConfig(
            width=32, height=32, albedo="position", camera=CameraConfig(azimuths_deg=(30.0,), distance=1.0), **render
        ),
        guidance=GuidanceConfig(
            kind="oracle",
            device="cpu",
            schedule=TimestepSchedule(min=0.1, max_start=0.9),
            vae_gradient_checkpointing=False,
        ),
        optim=OptimConfig(**{"steps": steps, "checkpoint_every": 2, "preview_every": 0, **optim}),
    )


@pytest.mark.parametrize(
    ("optim", "render"),
    [
        ({"lr_rotation": np.float32(0.02)}, None),  # Adam's param group lr
        ({"lr_translation": np.float64(0.005)}, None),  # np.float64 is a float, its product with body_length not
        ({"sigma_start": np.float32(4.0)}, None),  # the log's sigma
        ({"lr_final_fraction": np.float32(0.1)}, None),  # the log's lr_scale and the lrs
        ({}, {"raster": RasterSettings(sigma=np.float32(1.0))}),  # the render settings keep NumPy scalars
    ],
)
def test_numpy_scalar_settings_leave_a_resumable_checkpoint(tmp_path, make_chain, make_motion, optim, render):
    """A run with e.g. lr_rotation=np.float32(0.02) wrote a checkpoint its own resume refused ("not a readable
    distill checkpoint": torch.load(weights_only=True) does not unpickle NumPy scalars)."""
    rig = make_chain()
    target = make_motion(rig, 5)
    cfg = _config(render=render, **optim)
    first = Distiller(rig, cfg, tmp_path, oracle_motion=target).run(progress=False, stop_after=1)
    assert first.steps_run == 1
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)  # raised UnpicklingError
    assert all(type(g["lr"]) is float for g in state["optimizer"]["param_groups"])
    assert all(type(row[k]) is float for row in state["log"] for k in ("lr_scale", "sigma", "timestep"))
    resumed = Distiller(rig, cfg, tmp_path, oracle_motion=target).run(progress=False, resume=True)
    assert resumed.steps_run == 1 and len(resumed.log) == 2


def test_numpy_scalar_settings_are_stored_as_python_numbers():
    """The run's own configs hold Python floats, and config.json numbers (an np.float32 was written as a string,
    '0.5', by the json default=str fallback)."""
    o = OptimConfig(lr_rotation=np.float32(0.5), sigma_start=np.float32(4.0), coarse_scale=np.float32(0.5))
    assert type(o.lr_rotation) is float and o.lr_rotation == 0.5
    assert type(o.sigma_start) is float and type(o.coarse_scale) is float
    w = LossWeights(ground=np.float32(100.0))
    assert type(w.ground) is float and w.ground == 100.0
    cfg = dataclasses.replace(_config(), fps=np.float32(12.0), optim=o, weights=w)
    assert type(cfg.fps) is float
    cfg = dataclasses.replace(cfg, render=dataclasses.replace(cfg.render, ambient=np.float32(0.5)))
    from distill.optimize import config_to_dict

    d = config_to_dict(cfg)
    assert d["optim"]["lr_rotation"] == 0.5 and d["weights"]["ground"] == 100.0 and d["render"]["ambient"] == 0.5


def _block(out, name: str, kind: str) -> None:
    path = out / name
    if kind == "folder":
        path.mkdir(parents=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")


@pytest.mark.parametrize(
    ("name", "kind", "preview_every"),
    [
        ("motion.usda", "folder", 0),  # failed after the whole optimization
        ("checkpoint.pt", "folder", 0),  # failed at the first checkpoint (a resume started afresh first)
        ("loss_log.csv", "folder", 0),
        ("oracle_metrics.json", "folder", 0),
        ("previews/final.gif", "folder", 0),
        ("previews/step_00001.gif", "folder", 1),
        ("previews", "file", 0),
    ],
)
@pytest.mark.parametrize("resume", [False, True])
def test_an_unwritable_output_is_refused_before_the_first_step(
    tmp_path, make_chain, make_motion, name, kind, preview_every, resume
):
    rig = make_chain()
    target = make_motion(rig, 5)
    out = tmp_path / "run"
    out.mkdir()
    _block(out, name, kind)
    steps = []
    distiller = Distiller(rig, _config(preview_every=preview_every), out, oracle_motion=target)
    with pytest.raises(InputError, match="^" + str(out / name).replace("\\", "\\\\") + ": output: "):
        distiller.run(progress=False, resume=resume, callback=lambda step, row: steps.append(step))
    assert steps == [], "the optimization ran"
    assert not (out / "checkpoint.pt").is_file() and not (out / "config.json").exists()


def test_an_output_folder_under_a_file_is_refused(tmp_path, make_chain, make_motion):
    rig = make_chain()
    (tmp_path / "afile").write_text("")
    distiller = Distiller(rig, _config(), tmp_path / "afile" / "run", oracle_motion=make_motion(rig, 5))
    with pytest.raises(InputError, match="is a file"):
        distiller.run(progress=False)


@pytest.mark.parametrize("load", [False, True])
def test_cli_refuses_an_unwritable_output_before_the_optimization(tmp_path, capsys, monkeypatch, load):
    """examples/distill.py with OUTPUT/motion.usda a folder: status 2 only after the whole run (checkpoint.pt,
    loss_log.csv and previews/ left behind); now before anything is written, and before the character and the
    video model are loaded (``load=False``: loading the asset fails the test)."""
    import pathlib

    example = load_example(pathlib.Path(__file__).resolve().parents[2] / "examples" / "distill.py", "distill_example")
    if not load:

        def no_load(*args, **kwargs):
            raise AssertionError("the asset was loaded before OUTPUT was checked")

        monkeypatch.setattr(example, "load_asset", no_load)
    out = tmp_path / "run"
    (out / "motion.usda").mkdir(parents=True)
    cli = example.DistillCLI(
        asset="procedural:quadruped", output=out, steps=1, quiet=True, frames=5, width=16, height=16,
        azimuths=(30.0,), preview_every=0, audit=False,
    )  # fmt: skip
    assert example.main(cli) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "CUDA driver" not in line]
    assert err == [f"error: {out / 'motion.usda'}: output: is a folder, not a file"], err
    assert sorted(p.name for p in out.iterdir()) == ["motion.usda"]
