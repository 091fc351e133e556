"""A slow, obviously-correct BVH forward kinematics, written straight from the format description.

It shares nothing with ``usd_io._bvh``: its own tiny parser (whitespace tokens, recursion), rotation matrices
built from cos/sin per channel, 4x4 homogeneous matrices per joint and frame. It returns joint world positions in
the file's own space and units (no unit or up-axis conversion), End Sites included, in file order.

BVH semantics implemented here: a joint's local matrix is ``T @ R_c1 @ R_c2 @ ...`` where ``T`` translates by the
OFFSET, with each component replaced by its position channel when the joint has one, and ``R_ci`` is the rotation
about the axis of the i-th rotation channel (degrees) in listed order; world = parent world @ local.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _rotation(axis: str, degrees: np.ndarray) -> np.ndarray:
    """Rotation matrices (F, 4, 4) about ``axis`` by ``degrees`` (F,), right-handed."""
    a = np.radians(degrees)
    c, s = np.cos(a), np.sin(a)
    m = np.zeros((len(a), 4, 4))
    m[:, 3, 3] = 1.0
    if axis == "X":
        m[:, 0, 0] = 1.0
        m[:, 1, 1], m[:, 1, 2] = c, -s
        m[:, 2, 1], m[:, 2, 2] = s, c
    elif axis == "Y":
        m[:, 1, 1] = 1.0
        m[:, 0, 0], m[:, 0, 2] = c, s
        m[:, 2, 0], m[:, 2, 2] = -s, c
    elif axis == "Z":
        m[:, 2, 2] = 1.0
        m[:, 0, 0], m[:, 0, 1] = c, -s
        m[:, 1, 0], m[:, 1, 1] = s, c
    else:
        raise ValueError(axis)
    return m


def parse_bvh(text: str) -> tuple[list[dict], np.ndarray, float]:
    """Joints (dicts with name, parent, offset, channels, is_end), frame values (F, C) and frame time [s]."""
    tokens = text.replace("{", " { ").replace("}", " } ").split()
    pos = 0
    joints: list[dict] = []

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def joint(parent: int, is_end: bool) -> None:
        if is_end:
            assert take() == "Site"
            name = joints[parent]["name"] + " End Site"
        else:
            name = take()
        assert take() == "{"
        me = len(joints)
        joints.append({"name": name, "parent": parent, "offset": None, "channels": [], "is_end": is_end})
        while True:
            t = take()
            if t == "}":
                return
            if t == "OFFSET":
                joints[me]["offset"] = np.array([float(take()) for _ in range(3)])
            elif t == "CHANNELS":
                joints[me]["channels"] = [take() for _ in range(int(take()))]
            elif t == "JOINT":
                joint(me, False)
            elif t == "End":
                joint(me, True)
            else:
                raise ValueError(f"unexpected token {t!r}")

    assert take() == "HIERARCHY"
    assert take() == "ROOT"
    joint(-1, False)
    assert take() == "MOTION"
    assert take() == "Frames:"
    frames = int(take())
    assert take() == "Frame" and take() == "Time:"
    frame_time = float(take())
    values = np.array([float(t) for t in tokens[pos:]]).reshape(frames, -1)
    return joints, values, frame_time


def bvh_world_positions(path: str | Path) -> tuple[list[str], np.ndarray]:
    """Joint names (End Sites as ``"<parent> End Site"``) and world positions (F, J, 3) in file units and axes."""
    joints, values, _ = parse_bvh(Path(path).read_text(encoding="utf-8-sig"))
    frames = len(values)
    world = []
    column = 0
    for j in joints:
        translation = np.tile(j["offset"], (frames, 1))
        rotation = np.tile(np.eye(4), (frames, 1, 1))
        for name in j["channels"]:
            axis, kind = name[0], name[1:]
            v = values[:, column]
            column += 1
            if kind == "position":
                translation[:, "XYZ".index(axis)] = v
            elif kind == "rotation":
                rotation = rotation @ _rotation(axis, v)
            else:
                raise ValueError(name)
        local = np.tile(np.eye(4), (frames, 1, 1))
        local[:, :3, 3] = translation
        local = local @ rotation
        world.append(local if j["parent"] < 0 else world[j["parent"]] @ local)
    assert column == values.shape[1]
    positions = np.stack([w[:, :3, 3] for w in world], axis=1)
    return [j["name"] for j in joints], positions
