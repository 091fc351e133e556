"""Tiny pose spaces trained in seconds for tests that need a checkpoint file."""

from __future__ import annotations

from pathlib import Path


def tiny_pose_space(character: str, folder: Path, steps: int = 3) -> Path:
    """Trains a tiny pose space on every clip of built-in ``character`` and returns its ``posespace.pt``."""
    from posespace import ModelConfig, PoseSet, TrainConfig, train
    from sim import characters

    rig, clips = characters.build(character)
    poses = PoseSet()
    for name, clip in clips.items():
        poses.add(rig, clip, name, fps=None)
    cfg = TrainConfig(output=folder, steps=steps, batch_size=8, model=ModelConfig(width=16, depth=1), progress=False,
                      heldout=(), validator_poses=4)  # fmt: skip
    train(cfg, poses)
    return Path(folder) / "posespace.pt"
