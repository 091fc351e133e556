"""Physics projection (AKD-style): optimize the PD target sequence so the simulated bodies follow the reference.

Gradients through Newton's solvers are wrong as soon as contacts act (see the field notes), so the projection is
sampling-based and contact-aware: receding-horizon MPPI over smooth target offsets, every candidate rolled out
in its own Newton world of one batched model (Steel solver, hard contacts, friction). Each window starts from
the exact simulated state the previous window committed, so the output is one continuous simulation.

Optionally, a few whole-clip iterative-learning passes (PD run, feed the joint-angle error back into the
targets) give MPPI a better starting plan.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ..motion import Motion
from . import _checkpoint as ckpt
from ._checkpoint import ProjectionCheckpoint, Sweep
from .character import PhysicsCharacter
from .config import ProjectionConfig, TrackingConfig
from .newton_model import substeps_for
from .tracking import (
    BlowUp,
    ReferenceTrajectory,
    TargetFilter,
    TrackingResult,
    apply_target_filter,
    check_frames,
    detect_blowup,
    detect_fall,
    initial_state,
    reference_trajectory,
    root_assist_report,
    track,
)

__all__ = ["project"]

ProgressCallback = Callable[[int, int, float], None]
"""Called after each committed window with (frames committed over all sweeps, frames of all sweeps, best window
cost); each sweep commits ``frame_count - 1`` frames."""


def _knot_weights(window: int, interval: int) -> np.ndarray:
    """Linear interpolation matrix from knots to the window's frames, shape (window, K).

    Knots sit at frames ``interval, 2 interval, ...`` after the window start (the last at the window end); the
    offset is 0 at the window start (its state is already committed) and constant after the last knot.
    """
    k = max(1, int(np.ceil(window / interval)))
    knot_t = np.minimum(np.arange(1, k + 1) * interval, window).astype(np.float64)
    t = np.arange(1, window + 1, dtype=np.float64)
    m = np.zeros((window, k))
    for i, ti in enumerate(t):
        if ti <= knot_t[0]:
            m[i, 0] = ti / knot_t[0]
            continue
        j = int(np.searchsorted(knot_t, ti) - 1)
        if j >= k - 1:
            m[i, k - 1] = 1.0
            continue
        u = (ti - knot_t[j]) / max(knot_t[j + 1] - knot_t[j], 1e-12)
        m[i, j], m[i, j + 1] = 1.0 - u, u
    return m


def _mppi_weights(cost: np.ndarray, temperature: float) -> np.ndarray:
    """Normalized MPPI weights ``exp(-(cost - min) / (temperature x scale))`` of the samples' costs (W,), 0 where
    a cost is not finite (at least one must be).

    The scale is max - min of the costs inside Tukey's far fence (third quartile + 3 interquartile ranges): a
    sample that fell costs orders of magnitude more than the rest, and with it in the spread every other sample
    weighed about the same. Without such outliers it is the plain max - min.
    """
    finite = np.isfinite(cost)
    c = cost[finite]
    q1, q3 = np.percentile(c, [25.0, 75.0])
    scale = max(float(c[c <= q3 + 3.0 * (q3 - q1)].max() - c.min()), 1e-12)
    w = np.zeros(len(cost))
    w[finite] = np.exp(-(c - c.min()) / (temperature * scale))
    return w / w.sum()


def _first_blowup(character, ref: ReferenceTrajectory, tracking, frames: np.ndarray, f0: int) -> tuple[int, str] | None:
    """(frame, reason) of the first blown-up frame among simulated ``frames`` (n, B, 13) after frame ``f0``."""
    for k, state in enumerate(frames):
        fk = f0 + 1 + k
        travel = float(np.linalg.norm(ref.body_pos[fk, 0] - ref.body_pos[0, 0]))
        reason = detect_blowup(character, state[:, :3], state[:, 7:], ref.body_pos[fk], tracking, travel)
        if reason is not None:
            return fk, reason
    return None


def _ilc_plan(
    character: PhysicsCharacter,
    ref: ReferenceTrajectory,
    tracking: TrackingConfig,
    cfg: ProjectionConfig,
    plan: np.ndarray,
    base: np.ndarray,
) -> np.ndarray:
    """Iterative learning control: target += gain x joint-angle error, over the frames before any fall; targets
    stay within ``max_offset_deg`` of ``base`` (F, B - 1, 3) (the reference's coordinates, or the target filter's
    output on them)."""
    for _ in range(cfg.ilc_passes):
        res = track(character, ref, tracking, target_coords=plan)
        n = len(res.body_rot)
        stop = min(n, res.fell_frame if res.fell_frame is not None else n)
        if stop < 2:
            break
        err = ref.coords[:stop] - character.joint_coordinates(res.body_rot[:stop])
        plan = plan.copy()
        plan[:stop] += cfg.ilc_gain * err
        limit = np.deg2rad(cfg.max_offset_deg)
        plan = base + np.clip(plan - base, -limit, limit)
    return plan


def _best_sweep(errors: list[float], blew_up: list[bool], fell: list[bool]) -> int:
    """Index of the pass to return: the lowest body error among the passes that neither blew up nor fell; among
    the fallen ones when every pass that did not blow up fell; among all when every pass blew up. (Lowest error
    alone returned a Fox Run pass fallen at frame 65 of 84.)"""
    ok = [i for i, b in enumerate(blew_up) if not b] or list(range(len(errors)))
    ok = [i for i in ok if not fell[i]] or ok
    return min(ok, key=lambda i: errors[i])


def _start_sweep(ref: ReferenceTrajectory, sim, plan: np.ndarray) -> Sweep:
    """A sweep at the reference's first frame: the committed state is the reference's initial state."""
    F, B = ref.frame_count, sim.B
    sim.set_state(**initial_state(ref))
    q0, qd0 = sim.joint_state()
    pos, rot, vel = np.zeros((F, B, 3)), np.zeros((F, B, 4)), np.zeros((F, B, 6))
    p, r, v = sim.body_state()
    pos[0], rot[0], vel[0] = p[0], r[0], v[0]
    return Sweep(0, np.array(plan, dtype=np.float64).reshape(F, -1), q0[0], qd0[0], pos, rot, vel)


def _mppi_pass(character, ref, sim, tracking, cfg, sweep: Sweep, target_filter, rng, progress, pass_index,
               on_window=None, base=None) -> None:  # fmt: skip
    """Runs one receding-horizon MPPI sweep over the clip from ``sweep``'s committed frame, updating it in place.

    Offsets are bounded by ``max_offset_deg`` around, and penalized from, ``base`` (F, B - 1, 3): the target
    filter's output on the reference when there is a filter (default: the reference's coordinates).

    ``on_window(sweep)`` is called after each committed window (before ``progress``), e.g. to checkpoint.
    """
    F, C = ref.frame_count, character.dof_count
    W = sim.world_count
    dt = 1.0 / ref.fps
    plan_flat = sweep.plan
    base_flat = (ref.coords if base is None else base).reshape(F, C)  # the offsets' origin
    max_off = np.deg2rad(cfg.max_offset_deg)
    pos, rot, vel = sweep.pos, sweep.rot, sweep.vel

    def rollout(win: slice, cand: np.ndarray, f0: int, H: int, commit: int) -> dict:
        """Every world from the committed state under the plan, with its candidate (H, W, C) inside ``win``."""
        table = np.repeat(plan_flat[:, None, :], W, axis=1)
        table[win] = cand
        rates = np.gradient(table, dt, axis=0) if tracking.velocity_targets else np.zeros_like(table)
        q0, qd0 = np.repeat(sweep.q[None], W, 0), np.repeat(sweep.qd[None], W, 0)
        sweep.rollout_frames += H * W
        return sim.rollout(table, rates, q0, qd0, f0, H, commit)

    while sweep.f0 < F - 1 and sweep.blowup is None:
        f0 = sweep.f0
        H = min(cfg.window_frames, F - 1 - f0)
        commit = H if f0 + cfg.window_frames >= F - 1 else min(cfg.commit_frames, H)
        m = _knot_weights(H, cfg.knot_interval_frames)  # (H, K)
        K = m.shape[1]
        mean = np.zeros((K, C))
        best = (np.inf, None, None, None, None, 0.0, 0.0)  # cost, targets, frames, state q, state qd, assist
        fallback = best  # the cheapest sample that blew up
        sigma = np.deg2rad(cfg.sigma_deg) * cfg.pass_sigma_decay**pass_index
        for _it in range(cfg.iterations):
            eps = rng.standard_normal((W, K, C)) * sigma
            eps[0] = 0.0
            deltas = mean[None] + eps
            win = slice(f0 + 1, f0 + H + 1)
            # each sample's offsets inside the window, on the plan
            cand = plan_flat[win][:, None] + np.einsum("hk,wkc->hwc", m, deltas)
            cand = base_flat[win][:, None] + np.clip(cand - base_flat[win][:, None], -max_off, max_off)
            out = rollout(win, cand, f0, H, commit)
            cost = out["cost"] + cfg.offset_weight * np.sum((cand - base_flat[win][:, None]) ** 2, axis=(0, 2))
            cost[~np.isfinite(cost)] = np.inf
            for k in np.argsort(cost, kind="stable"):
                # the cheapest sample whose committed frames do not blow up (by speed or distance, which the
                # cost does not see); the cheapest blown-up one is kept in case no sample of the window holds
                if not np.isfinite(cost[k]) or cost[k] >= best[0]:
                    break
                sample = (float(cost[k]), cand[:, k].copy(), out["states"][:, k].copy(), out["q"][k].copy(),
                          out["qd"][k].copy(), float(out["assist_sum"][k]), float(out["assist_max"][k]))  # fmt: skip
                if _first_blowup(character, ref, tracking, out["states"][:, k], f0) is None:
                    best = sample
                    break
                if sample[0] < fallback[0]:
                    fallback = sample
            if not np.isfinite(cost).any():
                break
            w = _mppi_weights(cost, cfg.temperature)
            mean = np.einsum("w,wkc->kc", w, deltas)
            if target_filter is not None:
                # constrain the mean plan of the window with the filter (frames outside keep the plan)
                trial = plan_flat.copy()
                trial[win] = base_flat[win] + np.clip(trial[win] + m @ mean - base_flat[win], -max_off, max_off)
                filt = apply_target_filter(character, ref, trial.reshape(F, -1, 3), target_filter).reshape(F, C)
                mean = np.linalg.lstsq(m, filt[win] - plan_flat[win], rcond=None)[0]
            sigma *= cfg.sigma_decay
        cost_best, cand_best, frames_best, q_best, qd_best, a_sum, a_max = best if best[1] is not None else fallback
        if cand_best is None:
            sweep.blowup = (f0 + 1, "every rollout of the window blew up")
            break
        if target_filter is not None:
            # the committed targets are the filter's output: the best sample filtered, then simulated again
            win = slice(f0 + 1, f0 + H + 1)
            trial = plan_flat.copy()
            trial[win] = cand_best
            cand_best = apply_target_filter(character, ref, trial.reshape(F, -1, 3), target_filter).reshape(F, C)[win]
            out = rollout(win, cand_best[:, None], f0, H, commit)
            cost_best = float(out["cost"][0] + cfg.offset_weight * np.sum((cand_best - base_flat[win]) ** 2))
            frames_best, q_best, qd_best = out["states"][:, 0], out["q"][0].copy(), out["qd"][0].copy()
            if not np.isfinite(cost_best):
                bad = ~np.isfinite(frames_best).reshape(len(frames_best), -1).all(axis=1)
                fk = f0 + 1 + (int(np.argmax(bad)) if bad.any() else 0)
                sweep.blowup = (fk, "the filtered targets of the window blew up")
                break
            a_sum, a_max = float(out["assist_sum"][0]), float(out["assist_max"][0])
        plan_flat[f0 + 1 : f0 + H + 1] = cand_best
        seg = slice(f0 + 1, f0 + commit + 1)
        pos[seg], rot[seg], vel[seg] = frames_best[..., :3], frames_best[..., 3:7], frames_best[..., 7:]
        sweep.blowup = _first_blowup(character, ref, tracking, frames_best, f0)
        if sweep.blowup is not None:
            break  # the window's assist force is not counted: its frames after the blow-up are dropped
        sweep.assist_sum += a_sum
        sweep.assist_max = max(sweep.assist_max, a_max)
        sweep.q, sweep.qd = q_best, qd_best
        sweep.window_costs.append(cost_best)
        sweep.f0 = f0 + commit
        if sweep.f0 < F - 1 and on_window is not None:
            on_window(sweep)
        if progress is not None:
            progress(sweep.f0 + pass_index * (F - 1), (F - 1) * max(1, cfg.passes), cost_best)
    n = F if sweep.blowup is None else sweep.blowup[0]
    err = np.linalg.norm(pos[:n] - ref.body_pos[:n], axis=-1).mean() / character.height if n else np.inf
    sweep.error = float(err)
    sweep.done = True


def project(
    character: PhysicsCharacter,
    reference: Motion | ReferenceTrajectory,
    tracking: TrackingConfig | None = None,
    cfg: ProjectionConfig | None = None,
    *,
    target_filter: TargetFilter | None = None,
    progress: ProgressCallback | None = None,
    checkpoint: ProjectionCheckpoint | None = None,
) -> TrackingResult:
    """Optimizes the PD targets with contact-aware MPPI and returns the simulated motion they produce.

    Args:
        character: the character.
        reference: the reference motion (uniformly sampled at its fps: ``motion.is_uniform()``) or its trajectory.
        tracking: controller configuration (solver, contact, root assist: off by default).
        cfg: projection configuration.
        target_filter: optional pose-sequence filter; it constrains the plan (the initial targets, the targets
            after iterative learning, and each window's mean; offsets are bounded around and penalized from its
            output on the reference) -- samples perturb around the filtered mean.
        progress: optional callback after each committed window.
        checkpoint: optional checkpoint file, save interval and resume flag. A run resumed from it steps the
            same floats in the same order as an unbroken run and returns the same result.

    Returns:
        A :class:`TrackingResult` (``info`` holds the optimization statistics; ``info["resumed"]`` names the sweep
        and frame a resumed run continued from).

    Raises:
        ValueError: a config value out of range, a non-uniformly sampled motion or one of a single frame (naming
            it), before any work.
        CheckpointError: ``checkpoint.resume`` and the file is unreadable or was written with other settings or
            for another character or reference.
    """
    from ._rollouts import RolloutWorlds

    tracking = (tracking or TrackingConfig()).check()
    cfg = (cfg or ProjectionConfig()).check()
    t_start = time.perf_counter()
    ref = reference if isinstance(reference, ReferenceTrajectory) else reference_trajectory(character, reference)
    check_frames(ref)
    F, C = ref.frame_count, character.dof_count
    rng = np.random.default_rng(cfg.seed)
    settings = fingerprint = filtered = None  # filtered: the filter's output on the reference, once computed
    state = None
    if checkpoint is not None:
        ckpt.remove_stale_temporaries(checkpoint.path)
        filter_key = None
        if target_filter is not None:  # its own key, or a digest of its output on the reference
            filter_key = getattr(target_filter, "key", None)
            if not isinstance(filter_key, str):
                filtered = apply_target_filter(character, ref, ref.coords, target_filter)
                filter_key = ckpt.filter_digest(filtered)
        settings = ckpt.settings_dict(tracking, cfg, character.config, filter_key)
        fingerprint = ckpt.data_fingerprint(character, ref)
        if checkpoint.resume and checkpoint.path.is_file():
            state = ckpt.load(checkpoint.path, settings, fingerprint)
            rng.bit_generator.state = state.rng_state
            t_start -= state.elapsed_s
    resumed = None
    base = ref.coords  # around which the targets are optimized: with a filter, its output on the reference
    if target_filter is not None:
        base = filtered if filtered is not None else apply_target_filter(character, ref, ref.coords, target_filter)
    if state is None:
        plan = base.copy()
        if cfg.ilc_passes > 0:
            plan = _ilc_plan(character, ref, tracking, cfg, plan, base)
            if target_filter is not None:  # the learned targets constrained again (ILC pulls to the reference)
                plan = apply_target_filter(character, ref, plan, target_filter)
        state = ckpt.ProjectionState(plan.reshape(F, C).copy(), [], {}, 0.0, time.perf_counter() - t_start)
    elif state.sweeps:
        last = state.sweeps[-1]
        resumed = {"pass": len(state.sweeps) - 1, "frame": int(last.f0), "finished": bool(last.done)}
    last_save = time.perf_counter()

    def save() -> None:
        nonlocal last_save
        if checkpoint is None:
            return
        state.rng_state = rng.bit_generator.state
        state.elapsed_s = time.perf_counter() - t_start
        ckpt.save(checkpoint.path, state, settings, fingerprint)
        last_save = time.perf_counter()

    def on_window(_sweep: Sweep) -> None:
        if checkpoint is not None and time.perf_counter() - last_save >= checkpoint.interval_s:
            save()

    passes = max(1, cfg.passes)

    def finished() -> bool:
        s = state.sweeps
        return bool(s) and s[-1].done and (s[-1].blowup is not None or len(s) >= passes)

    if not state.sweeps:
        save()  # the ILC plan
    sim = None
    if not finished():
        W = max(2, int(cfg.samples))
        weights = {
            "position": cfg.position_weight,
            "root": cfg.root_weight,
            "rotation": cfg.rotation_weight,
            "velocity": cfg.velocity_weight,
            "skate": cfg.skate_weight,
            "self_penetration": cfg.self_penetration_weight,
        }
        sim = RolloutWorlds(
            character, ref.fps, F, W, cfg.rollout_batches, cfg.threads, solver=tracking.solver,
            contact=tracking.contact, root_assist=tracking.root_assist,
            root_reference=(ref.body_pos[:, 0], ref.body_rot[:, 0]),
            cost_reference=(ref.body_pos, ref.body_rot, ref.com_vel), cost_weights=weights,
        )  # fmt: skip
    try:
        while not finished():
            if not state.sweeps or state.sweeps[-1].done:
                plan = state.sweeps[-1].plan if state.sweeps else state.start_plan
                state.sweeps.append(_start_sweep(ref, sim, plan))
            k = len(state.sweeps) - 1
            _mppi_pass(character, ref, sim, tracking, cfg, state.sweeps[k], target_filter, rng, progress, k, on_window,
                       base)  # fmt: skip
            save()
    finally:
        if sim is not None:
            sim.close()
    sweeps = state.sweeps
    ground = tracking.contact.ground_height_m

    def frames(o: Sweep) -> int:
        return F if o.blowup is None else o.blowup[0]

    falls = [detect_fall(o.pos[: frames(o)], o.rot[: frames(o)], ref, tracking, ground) for o in sweeps]
    best_index = _best_sweep([o.error for o in sweeps], [o.blowup is not None for o in sweeps],
                             [f is not None for f in falls])  # fmt: skip
    best = sweeps[best_index]
    blowup = BlowUp(*best.blowup) if best.blowup is not None else None
    rollout_frames = sum(o.rollout_frames for o in sweeps)
    n = frames(best)
    pos, rot, vel = best.pos[:n], best.rot[:n], best.vel[:n]
    wall = time.perf_counter() - t_start
    fell = falls[best_index]
    substeps = substeps_for(ref.fps, tracking.solver.step_limit_s())
    stepped = n if blowup is not None else n - 1  # frames simulated, as track counts them (a blown-up one too)
    assist = None
    if tracking.root_assist is not None and tracking.root_assist.enabled:
        # the assist sums cover the committed windows' frames: all of them, or those before the window that blew up
        assist = root_assist_report(character, best.assist_sum, best.assist_max, best.f0 * substeps)
    motion = character.motion_from_bodies(pos, rot, ref.fps, name=ref.motion.name) if n else ref.motion.slice(0, 1)
    return TrackingResult(
        motion=motion,
        body_pos=pos,
        body_rot=rot,
        body_vel=vel,
        target_coords=best.plan.reshape(F, -1, 3),
        blowup=blowup,
        fell_frame=fell,
        wall_time_s=wall,
        sim_time_s=stepped / ref.fps,
        root_assist=assist,
        info={
            "substeps": substeps,
            "dt_s": 1.0 / (ref.fps * substeps),
            "solver": tracking.solver.solver,
            "samples": max(2, int(cfg.samples)),
            "rollout_batches": len(sim.sims) if sim is not None else None,
            "threads": sim.threads if sim is not None else None,
            "rollout_world_frames": rollout_frames,
            "windows": len(best.window_costs),
            "mean_window_cost": float(np.mean(best.window_costs)) if best.window_costs else float("nan"),
            "ilc_time_s": state.ilc_time_s,
            "passes": len(sweeps),
            "pass_errors": [float(o.error) for o in sweeps],
            "pass_fell_frames": falls,
            "best_pass": best_index,
            "resumed": resumed,
        },
    )
