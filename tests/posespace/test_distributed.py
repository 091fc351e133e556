"""Training in two processes (``torchrun``, CPU, gloo): each rank draws its own diffusion times and noise, the
ranks keep one set of weights, a resume does not replay the first steps' draws; checkpoints do not change a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import torch

from posespace import ModelConfig, PoseSet, TrainConfig, train

TINY = ModelConfig(width=16, depth=1, heads=2)
LAUNCH_TIMEOUT_S = 600

SCRIPT = textwrap.dedent(
    """
    import importlib.util, json, os, sys, warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(1)
    spec = importlib.util.spec_from_file_location("stick", sys.argv[1])
    stick = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stick)
    import posespace.diffusion as diffusion
    from posespace import ModelConfig, PoseSet, TrainConfig, train

    times = []
    terms = diffusion.GaussianDiffusion.training_terms

    def recording(self, model, x0, cond, t=None):
        out = terms(self, model, x0, cond, t)
        times.append(out[2].tolist())
        return out

    diffusion.GaussianDiffusion.training_terms = recording
    rig = stick.stick_rig()
    ps = PoseSet()
    for name, phase, amp in (("walk", 0.0, 1.0), ("stroll", 0.5, 0.6)):
        ps.add(rig, stick.stick_walk(rig, 40, phase, amp), name, fps=None)
    steps, resume = int(sys.argv[3]), sys.argv[4] == "resume"
    cfg = TrainConfig(output=sys.argv[2], steps=steps, batch_size=8, warmup=1, model=ModelConfig(width=16, depth=1,
                      heads=2), progress=False, heldout=(), validator_poses=4, checkpoint_every=2, resume=resume)
    space = train(cfg, ps)
    rank = os.environ["RANK"]
    with open(os.path.join(sys.argv[2], f"rank{rank}.{steps}.json"), "w") as f:
        json.dump({"times": times, "fingerprint": space.fingerprint()}, f)
    """
)


def _launch(tmp_path: Path, out: Path, steps: int, resume: bool) -> list[dict]:
    script = tmp_path / "train_two.py"
    script.write_text(SCRIPT)
    stick = Path(__file__).with_name("conftest.py")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script),
           str(stick), str(out), str(steps), "resume" if resume else "fresh"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return [json.loads((out / f"rank{r}.{steps}.json").read_text()) for r in (0, 1)]


def test_two_processes_draw_their_own_noise_and_keep_one_model(tmp_path):
    out = tmp_path / "run"
    first = _launch(tmp_path, out, 2, resume=False)
    log = json.loads((out / "train_log.json").read_text())
    assert log["processes"] == 2
    for step in range(2):  # each rank its own diffusion times (they were the same on every rank)
        assert first[0]["times"][step] != first[1]["times"][step], step
    assert first[0]["fingerprint"] == first[1]["fingerprint"]  # gradients all-reduced from alike initial weights
    assert torch.load(out / "checkpoint.pt", weights_only=False)["train"]["step"] == 2
    resumed = _launch(tmp_path, out, 4, resume=True)
    assert len(resumed[1]["times"]) == 2  # steps 2 and 3
    for rank in (0, 1):  # the resumed steps do not replay the first steps' draws (rank 1 did)
        for step in range(2):
            assert resumed[rank]["times"][step] not in first[rank]["times"], (rank, step)
    assert resumed[0]["times"] != resumed[1]["times"]
    assert resumed[0]["fingerprint"] == resumed[1]["fingerprint"]


def test_checkpoints_do_not_change_the_run(tmp_path, make_stick, make_walk):
    """Saving a checkpoint built a fresh module whose random init drew from the run's generator: the same seed and
    data gave other weights with another checkpoint_every."""
    rig = make_stick()
    ps = PoseSet()
    for name, phase, amp in (("walk", 0.0, 1.0), ("stroll", 0.5, 0.6)):
        ps.add(rig, make_walk(rig, 40, phase, amp), name, fps=None)
    base = TrainConfig(output=tmp_path / "a", steps=6, batch_size=8, warmup=1, model=TINY, progress=False,
                       heldout=(), validator_poses=4, checkpoint_every=6)  # fmt: skip
    a = train(base, ps).state()["model"]
    b = train(replace(base, output=tmp_path / "b", checkpoint_every=2), ps).state()["model"]
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=0, atol=0, msg=name)
