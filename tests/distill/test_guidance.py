"""Video SDS with tiny CogVideoX and tiny Wan (random weights, built offline): the gradient reaches the joint
rotations, an exact denoiser gives zero gradient, and the pixel gradient is autograd's VJP through the VAE."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
import torch

from distill import CameraConfig, RasterSettings, RenderConfig, Trajectory, VideoRenderer
from distill.guidance import (
    GuidanceCogVideoX,
    GuidanceConfig,
    GuidanceModelError,
    GuidanceWan,
    OracleDenoiser,
    PixelVAE,
    TimestepSchedule,
    build_guidance,
    cogvideox_scheduler,
    detached_target_loss,
    encode_prompts,
    step_generator,
    tiny_cogvideox,
    tiny_wan,
    vpred_to_eps,
)
from sim.torch_ops import TorchRig

pytestmark = pytest.mark.diffusers

FRAMES, SIZE = 5, 32  # 4k + 1 frames; 32 px -> 4x4 latents with 8x VAEs
ZERO_TOL = 1e-5  # exact denoiser: gradient relative to a typical SDS gradient
VJP_RTOL = 1e-5
FORMULA_TOL = 1e-5


def _render_fn(rig, motion):
    """A closure rendering the trajectory (1 view) and the trajectory itself."""
    cfg = RenderConfig(
        width=SIZE,
        height=SIZE,
        albedo="position",
        camera=CameraConfig(azimuths_deg=(30.0,), distance=1.5),
        raster=RasterSettings(sigma=1.0),
    )
    renderer, traj, trig = VideoRenderer(rig, cfg), Trajectory(rig, motion), TorchRig(rig)

    def render() -> torch.Tensor:
        world = traj.world(trig)
        points, normals = trig.skin(world)
        return renderer.render(points, normals, world[:, traj.body_root, :3], traj.times).video

    return render, traj


def _guidance(kind: str, transformer=None, scale: float = 5.0):
    comps = tiny_cogvideox() if kind == "cogvideox" else tiny_wan()
    emb = encode_prompts(comps.tokenizer, comps.text_encoder, ["a chain waving", ""], comps.text_length, kind)
    cls = GuidanceCogVideoX if kind == "cogvideox" else GuidanceWan
    return cls(
        transformer if transformer is not None else comps.transformer,
        comps.vae,
        comps.scheduler,
        emb[:1],
        emb[1:],
        guidance_scale=scale,
        schedule=TimestepSchedule(min=0.2, max_start=0.8, max_end=0.8),
    )


@pytest.fixture(scope="module", params=["cogvideox", "wan"])
def tiny(request):
    return request.param, _guidance(request.param)


def test_gradient_reaches_joint_rotations(tiny, make_chain, make_motion):
    kind, guidance = tiny
    rig = make_chain()
    render, traj = _render_fn(rig, make_motion(rig, FRAMES))
    out = guidance(render(), 0.3, step_generator(0, 0))
    expected_channels = 4 if kind == "cogvideox" else 16
    assert expected_channels in out.latents.shape
    out.loss.backward()
    g = traj.rotations_6d.grad
    assert torch.isfinite(g).all()
    assert g[:, 1:].abs().max() > 0, "non-root joints receive SDS gradient"
    assert traj.translation.grad.abs().max() > 0


def test_exact_denoiser_gives_zero_gradient(tiny, make_chain, make_motion):
    """A denoiser that predicts the current clean latent exactly (the true noise / velocity), through the real
    tiny VAE and with CFG, leaves nothing to distil."""
    kind, real = tiny
    rig = make_chain()
    render, traj = _render_fn(rig, make_motion(rig, FRAMES))
    with torch.no_grad():
        z = real.encode(render())
    if kind == "cogvideox":
        exact = OracleDenoiser(z, "v_prediction", real.alphas_cumprod)
    else:
        exact = OracleDenoiser(z, "flow")
    guidance = _guidance(kind, transformer=exact, scale=7.5)
    reference = real(render().detach(), 0.3, step_generator(0, 1)).grad.abs().mean()
    for step in range(2):
        traj.zero_grad()
        out = guidance(render(), 0.3, step_generator(0, step))
        out.loss.backward()
        assert out.grad.abs().max() <= ZERO_TOL * reference
        assert traj.rotations_6d.grad.abs().max() <= ZERO_TOL * max(reference.item(), 1.0)


def test_pixel_gradient_is_the_vjp_through_the_vae(tiny):
    _, guidance = tiny
    g = torch.Generator().manual_seed(0)
    video = torch.rand(2, FRAMES, 3, SIZE, SIZE, generator=g).requires_grad_()
    out = guidance(video, 0.5, step_generator(3, 4))
    out.loss.backward()
    (vjp,) = torch.autograd.grad(guidance.encode(video), video, grad_outputs=out.grad / video.shape[0])
    assert out.grad.abs().max() > 0
    np.testing.assert_allclose(video.grad, vjp, atol=VJP_RTOL * vjp.abs().max().item())


def test_cogvideox_5b_style_rotary_embeddings(make_chain, make_motion):
    """CogVideoX-5b uses rotary positional embeddings built as the pipeline builds them."""
    from diffusers import CogVideoXTransformer3DModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        rope = CogVideoXTransformer3DModel(
            num_attention_heads=4, attention_head_dim=16, in_channels=4, out_channels=4, time_embed_dim=2,
            text_embed_dim=32, num_layers=1, sample_width=8, sample_height=8, sample_frames=9, patch_size=2,
            temporal_compression_ratio=4, max_text_seq_length=16, use_rotary_positional_embeddings=True,
        )  # fmt: skip
    guidance = _guidance("cogvideox", transformer=rope)
    rig = make_chain()
    render, traj = _render_fn(rig, make_motion(rig, FRAMES))
    out = guidance(render(), 0.3, step_generator(0, 0))
    out.loss.backward()
    assert torch.isfinite(out.grad).all() and out.grad.abs().max() > 0
    assert traj.rotations_6d.grad.abs().max() > 0
    assert len(guidance._rope_cache) == 1


def test_cogvideox_15_style_frame_patches_take_an_odd_latent_frame_count():
    """CogVideoX 1.5 patches latent frames in pairs (patch_size_t 2): 9 frames (3 latent frames) failed inside the
    patch embedding; the latents are padded at the front like its pipeline's extra frames, the gradient is the
    latents' shape and reaches every frame."""
    from diffusers import CogVideoXTransformer3DModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        paired = CogVideoXTransformer3DModel(
            num_attention_heads=4, attention_head_dim=16, in_channels=4, out_channels=4, time_embed_dim=2,
            text_embed_dim=32, num_layers=1, sample_width=8, sample_height=8, sample_frames=9, patch_size=2,
            patch_size_t=2, temporal_compression_ratio=4, max_text_seq_length=16, use_rotary_positional_embeddings=True,
            use_learned_positional_embeddings=False,
        )  # fmt: skip
    guidance = _guidance("cogvideox", transformer=paired)
    for frames in (9, 5):  # 3 latent frames (padded to 4), 2 (as they are)
        video = torch.rand(1, frames, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(1))
        out = guidance(video, 0.5, step_generator(0, 0))
        assert out.grad.shape == out.latents.shape and out.latents.shape[1] == (frames - 1) // 4 + 1
        assert torch.isfinite(out.grad).all() and (out.grad.abs().amax((0, 2, 3, 4)) > 0).all()


def test_vpred_and_flow_formulas_recover_the_noise():
    g = torch.Generator().manual_seed(1)
    x0, eps = (
        torch.randn(2, 3, 4, generator=g, dtype=torch.float64),
        torch.randn(2, 3, 4, generator=g, dtype=torch.float64),
    )
    for ab in (0.999, 0.5, 0.01):
        x_t = ab**0.5 * x0 + (1 - ab) ** 0.5 * eps
        v = ab**0.5 * eps - (1 - ab) ** 0.5 * x0
        np.testing.assert_allclose(vpred_to_eps(v, x_t, ab), eps, atol=FORMULA_TOL)


def test_oracle_gradient_is_the_weighted_latent_residual():
    """Through an identity pixel VAE the oracle's SDS gradient is w(t) sqrt(ab / (1 - ab)) (z - z*) (VP) and
    w(s) (z - z*) / s (flow), noise cancelled."""
    g = torch.Generator().manual_seed(2)
    target = torch.rand(1, FRAMES, 3, 8, 8, generator=g)
    video = torch.rand(1, FRAMES, 3, 8, 8, generator=g)
    sched = cogvideox_scheduler()
    z_star = 2 * target - 1  # pixel latents are the video in [-1, 1]
    vp = GuidanceCogVideoX(
        OracleDenoiser(z_star, "v_prediction", sched.alphas_cumprod), PixelVAE(), sched, torch.zeros(1, 1, 1),
        guidance_scale=1.0,
    )  # fmt: skip
    out = vp(video, 0.0, step_generator(0, 0))
    ab = float(sched.alphas_cumprod[int(out.timestep)])
    expected = (1 - ab) * (ab / (1 - ab)) ** 0.5 * ((2 * video - 1) - z_star)
    np.testing.assert_allclose(out.grad, expected, atol=FORMULA_TOL)
    comps = tiny_wan()
    wan_vae = PixelVAE()
    wan_vae.config.z_dim, wan_vae.config.latents_mean, wan_vae.config.latents_std = 3, [0.0] * 3, [1.0] * 3
    z_star_wan = z_star.permute(0, 2, 1, 3, 4)
    flow = GuidanceWan(
        OracleDenoiser(z_star_wan, "flow"), wan_vae, comps.scheduler, torch.zeros(1, 1, 1), guidance_scale=1.0
    )
    out = flow(video, 0.0, step_generator(0, 1))
    s = out.timestep / 1000.0
    expected = s * ((2 * video - 1).permute(0, 2, 1, 3, 4) - z_star_wan) / s
    np.testing.assert_allclose(out.grad, expected, atol=FORMULA_TOL)


def test_detached_target_loss_has_gradient_g_over_batch():
    z = torch.randn(3, 4, 5, requires_grad=True)
    grad = torch.randn(3, 4, 5)
    loss = detached_target_loss(z, grad)
    loss.backward()
    np.testing.assert_allclose(z.grad, grad / 3, atol=1e-7)
    np.testing.assert_allclose(loss.item(), 0.5 * grad.double().square().sum().item() / 3, rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_detached_target_loss_keeps_half_precision_gradients(dtype):
    """Latents ~1.5 with |g| ~ 0.02 in the released models' half precision: z - (z - g) cancelled to a 12%
    gradient error in bf16 and the value overflowed in fp16; the gradient is now g / B to the dtype's rounding."""
    gen = torch.Generator().manual_seed(3)
    z = (1.5 + 0.1 * torch.randn(2, 16, 8, 8, generator=gen)).to(dtype).requires_grad_()
    g = (0.02 * torch.randn(2, 16, 8, 8, generator=gen)).to(dtype)
    big = torch.full((2, 16, 8, 8), 300.0).to(dtype)  # 0.5 * sum(g^2) beyond float16's range
    loss = detached_target_loss(z, g)
    loss.backward()
    rounding = 2.0**-7 if dtype == torch.bfloat16 else 2.0**-10
    scale = float(g.float().abs().max()) / 2  # (fp16 values near 1e-5 are subnormal: absolute rounding there)
    np.testing.assert_allclose(z.grad.float(), g.float() / 2, rtol=rounding, atol=rounding * scale)
    assert torch.isfinite(detached_target_loss(z.detach(), big))


def test_timestep_schedule_anneals_the_upper_bound():
    s = TimestepSchedule(min=0.1, max_start=0.9, max_end=0.3, anneal="linear")
    assert s.upper(0.0) == pytest.approx(0.9) and s.upper(1.0) == pytest.approx(0.3)
    assert TimestepSchedule(min=0.1, max_start=0.9, max_end=0.3, anneal="none").upper(1.0) == pytest.approx(0.9)
    draws = [s.sample(1.0, step_generator(5, k)) for k in range(50)]
    assert min(draws) >= 0.1 and max(draws) <= 0.3
    assert s.sample(0.5, step_generator(5, 7)) == s.sample(0.5, step_generator(5, 7)), "a pure function of (seed, step)"


def test_wan_prompt_embeddings_are_zero_padded():
    comps = tiny_wan()
    emb = encode_prompts(comps.tokenizer, comps.text_encoder, ["hi"], comps.text_length, "wan")
    assert emb.shape == (1, comps.text_length, 32)
    assert emb[0, 3:].abs().max() == 0 and emb[0, :3].abs().max() > 0  # "hi" + end token


def test_missing_weights_give_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(GuidanceModelError, match="no such directory"):
        build_guidance(GuidanceConfig(kind="cogvideox-2b", model=str(tmp_path / "nope")), "a fox")
    (tmp_path / "partial" / "vae").mkdir(parents=True)
    with pytest.raises(GuidanceModelError, match="missing subfolder"):
        build_guidance(GuidanceConfig(kind="wan2.1-1.3b", model=str(tmp_path / "partial")), "a fox")
    with pytest.raises(GuidanceModelError, match="hf download THUDM/CogVideoX-2b"):
        build_guidance(GuidanceConfig(kind="cogvideox-2b", device="cpu"), "a fox")


def test_build_tiny_and_oracle_guidance():
    tiny = build_guidance(GuidanceConfig(kind="tiny-wan", device="cpu"), "a fox")
    assert isinstance(tiny, GuidanceWan) and tiny.prompt_embeds.shape[0] == 1
    target = torch.rand(2, FRAMES, 3, 8, 8)
    oracle = build_guidance(GuidanceConfig(kind="oracle", device="cpu"), "", oracle_target=target)
    assert isinstance(oracle.transformer, OracleDenoiser) and oracle.guidance_scale == 1.0
    out = oracle(target, 0.5, step_generator(0, 0))
    assert out.grad.abs().max() < 1e-5, "the target itself is already distilled"


def _save_cogvideox_folder(root, text_length: int = 226) -> None:
    """A diffusers-layout CogVideoX folder with tiny random weights and a sentencepiece T5 tokenizer trained here."""
    spm = pytest.importorskip("sentencepiece", reason="CogVideoX's T5Tokenizer needs sentencepiece")
    from diffusers import CogVideoXTransformer3DModel

    comps = tiny_cogvideox()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        transformer = CogVideoXTransformer3DModel(
            num_attention_heads=4, attention_head_dim=8, in_channels=4, out_channels=4, time_embed_dim=2,
            text_embed_dim=32, num_layers=1, sample_width=8, sample_height=8, sample_frames=9, patch_size=2,
            temporal_compression_ratio=4, max_text_seq_length=text_length,
        )  # fmt: skip
    words = ["a", "fox", "walks", "runs", "jumps", "over", "the", "grass", "quickly", "slowly", "cat", "dog"]
    lines = [" ".join(words[(i * k) % len(words)] for k in range(1, 8)) for i in range(200)]
    prefix = root / "sp"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=str(prefix), vocab_size=40, pad_id=0, eos_id=1, unk_id=2,
        bos_id=-1, minloglevel=2,
    )  # fmt: skip
    # the released folder's layout: spiece.model and a tokenizer_config.json, no tokenizer.json (transformers
    # converts the sentencepiece model on load, which needs protobuf)
    tok_dir = root / "tokenizer"
    tok_dir.mkdir(parents=True)
    shutil.copy(f"{prefix}.model", tok_dir / "spiece.model")
    config = {"tokenizer_class": "T5Tokenizer", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
              "extra_ids": 0, "model_max_length": 226}  # fmt: skip
    (tok_dir / "tokenizer_config.json").write_text(json.dumps(config))
    (tok_dir / "special_tokens_map.json").write_text(
        json.dumps({"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"})
    )
    assert not (tok_dir / "tokenizer.json").exists()
    transformer.save_pretrained(root / "transformer")
    comps.vae.save_pretrained(root / "vae")
    comps.scheduler.save_pretrained(root / "scheduler")
    comps.text_encoder.save_pretrained(root / "text_encoder")


def _save_wan_folder(root) -> None:
    """A diffusers-layout Wan 2.1 folder with tiny random weights, a word-level fast tokenizer and Wan's UniPC."""
    from diffusers import UniPCMultistepScheduler
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    comps = tiny_wan()
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, "a": 3, "fox": 4, "walking": 5}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(root / "tokenizer")
    comps.transformer.save_pretrained(root / "transformer")
    comps.vae.save_pretrained(root / "vae")
    comps.text_encoder.save_pretrained(root / "text_encoder")
    UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=3.0).save_pretrained(
        root / "scheduler"
    )


@pytest.fixture(scope="module")
def model_folders(tmp_path_factory):
    """Tiny released-layout folders, built once: {'cogvideox-2b': path, 'wan2.1-1.3b': path}."""
    root = tmp_path_factory.mktemp("models")
    (root / "cog").mkdir()
    (root / "wan").mkdir()
    _save_cogvideox_folder(root / "cog")
    _save_wan_folder(root / "wan")
    return {"cogvideox-2b": root / "cog", "wan2.1-1.3b": root / "wan"}


def _damaged_copy(model_folders, kind: str, tmp_path, damage) -> str:
    folder = tmp_path / kind
    shutil.copytree(model_folders[kind], folder)
    damage(folder)
    return str(folder)


def _empty_tokenizer(folder) -> None:
    shutil.rmtree(folder / "tokenizer")
    (folder / "tokenizer").mkdir()


def _truncate_weights(folder) -> None:
    weights = folder / "transformer" / "diffusion_pytorch_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:500])


def _garble_config(folder) -> None:
    path = folder / "vae" / "config.json"
    path.write_text(path.read_text()[:40])


@pytest.mark.parametrize(
    ("kind", "damage", "message"),
    [
        # an empty tokenizer folder became a T5 tokenizer without vocabulary: every prompt all <unk>, exit 0
        ("cogvideox-2b", _empty_tokenizer, r"tokenizer/ holds no vocabulary \(neither spiece.model nor tokenizer.json"),
        ("wan2.1-1.3b", _empty_tokenizer, r"tokenizer/ holds no vocabulary"),  # was "install sentencepiece"
        # files present but broken were reported as "not available locally: download them"
        (
            "cogvideox-2b",
            _truncate_weights,
            r"transformer .*diffusion_pytorch_model.safetensors.* there but unreadable",
        ),
        ("wan2.1-1.3b", _garble_config, r"vae/config.json.* not a valid JSON.* there but unreadable"),
    ],
)
def test_broken_model_folders_are_named(model_folders, tmp_path, monkeypatch, kind, damage, message):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = _damaged_copy(model_folders, kind, tmp_path, damage)
    with pytest.raises(GuidanceModelError, match=message):
        build_guidance(GuidanceConfig(kind=kind, model=folder, device="cpu"), "a fox walking")


@pytest.mark.parametrize(
    ("kind", "folder", "expected"),
    [
        ("wan2.1-1.3b", "cogvideox-2b", "CogVideoXTransformer3DModel"),
        ("cogvideox-2b", "wan2.1-1.3b", "WanTransformer3DModel"),
    ],
)
def test_a_folder_of_the_other_model_family_is_refused_by_name(model_folders, monkeypatch, kind, folder, expected):
    """--guidance cogvideox-2b --guidance-model <a Wan folder> (and the reverse) was a TypeError traceback."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(GuidanceModelError, match=rf"not a {kind} folder \(transformer/config.json names {expected}"):
        build_guidance(GuidanceConfig(kind=kind, model=str(model_folders[folder]), device="cpu"), "a fox walking")


def _drop_tensors(sub: str, prefix: str):
    """Damage: the checkpoint of ``sub`` without the tensors whose names start with ``prefix`` (another diffusers /
    transformers version's key layout, or a half-written conversion)."""

    def damage(folder) -> None:
        from safetensors.torch import load_file, save_file

        (path,) = (folder / sub).glob("*.safetensors")
        tensors = load_file(path)
        dropped = [k for k in tensors if k.startswith(prefix)]
        assert dropped, f"{sub} has no tensor {prefix}*"
        save_file({k: v for k, v in tensors.items() if k not in dropped}, path, metadata={"format": "pt"})

    return damage


def _resize_text_encoder(folder) -> None:
    """Damage: a text encoder config whose feed-forward width is not the checkpoint's (another model size)."""
    path = folder / "text_encoder" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "d_ff": 48}))


@pytest.mark.parametrize(
    ("kind", "damage", "message"),
    [
        # diffusers left the two tensors on the meta device: `.to(device)` raised NotImplementedError, no path
        (
            "wan2.1-1.3b",
            _drop_tensors("vae", "quant_conv."),
            r"wan2.1-1.3b vae from .*: .*/vae lacks 2 of the \d+ tensors of AutoencoderKLWan \(quant_conv.weight, "
            r"quant_conv.bias\).* download vae/ again \(`hf download Wan-AI/Wan2.1-T2V-1.3B-Diffusers --include "
            r"'vae/\*'",
        ),
        # transformers initialised the missing tensor randomly, with only a warning: the run went on
        (
            "cogvideox-2b",
            _drop_tensors("text_encoder", "encoder.final_layer_norm."),
            r"cogvideox-2b text_encoder from .*/text_encoder lacks 1 of the \d+ tensors of T5EncoderModel "
            r"\(encoder.final_layer_norm.weight\)",
        ),
        # transformers' RuntimeError for tensors of other shapes was a traceback
        (
            "cogvideox-2b",
            _resize_text_encoder,
            r"cogvideox-2b text_encoder from .*ignore_mismatched_sizes.* The checkpoint's tensors do not fit "
            r"T5EncoderModel .*download text_encoder/ again",
        ),
    ],
)
def test_a_checkpoint_that_does_not_fit_its_model_is_refused_by_name(
    model_folders, tmp_path, monkeypatch, capfd, kind, damage, message
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = _damaged_copy(model_folders, kind, tmp_path, damage)
    with pytest.raises(GuidanceModelError, match=message):
        build_guidance(GuidanceConfig(kind=kind, model=folder, device="cpu"), "a fox walking")
    assert "TRAIN this model" not in capfd.readouterr().err  # the libraries' advice would contradict the error


@pytest.mark.parametrize(
    ("kind", "sub", "message"),
    [
        # a CogVideoX VAE in a Wan folder loaded with nearly every tensor on the meta device (NotImplementedError)
        (
            "wan2.1-1.3b",
            "vae",
            r"/vae/config.json: _class_name is 'AutoencoderKLCogVideoX', expected 'AutoencoderKLWan'",
        ),
        (
            "cogvideox-2b",
            "vae",
            r"/vae/config.json: _class_name is 'AutoencoderKLWan', expected 'AutoencoderKLCogVideoX'",
        ),
        # CogVideoX's DDIM config in a Wan folder loaded silently with flow shift 1.0 (Wan's is 3.0)
        (
            "wan2.1-1.3b",
            "scheduler",
            r"/scheduler/scheduler_config.json: _class_name is 'CogVideoXDDIMScheduler', expected "
            r"UniPCMultistepScheduler or FlowMatchEulerDiscreteScheduler",
        ),
        # was "scheduler prediction_type 'flow_prediction' is not supported", naming no folder
        (
            "cogvideox-2b",
            "scheduler",
            r"/scheduler/scheduler_config.json: _class_name is 'UniPCMultistepScheduler', expected "
            r"CogVideoXDDIMScheduler or CogVideoXDPMScheduler",
        ),
        # a UMT5 encoder loaded as T5 with only a transformers warning (and the reverse)
        ("cogvideox-2b", "text_encoder", r"/text_encoder/config.json: model_type is 'umt5', expected 't5'"),
        ("wan2.1-1.3b", "text_encoder", r"/text_encoder/config.json: model_type is 't5', expected 'umt5'"),
    ],
)
def test_a_component_of_the_other_model_family_is_refused_by_file_and_field(
    model_folders, tmp_path, monkeypatch, kind, sub, message
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    donor = model_folders["cogvideox-2b" if kind.startswith("wan") else "wan2.1-1.3b"]

    def swap(folder) -> None:
        shutil.rmtree(folder / sub)
        shutil.copytree(donor / sub, folder / sub)

    folder = _damaged_copy(model_folders, kind, tmp_path, swap)
    with pytest.raises(GuidanceModelError, match=rf"^{re.escape(folder)}{message}.* download {sub}/ again"):
        build_guidance(GuidanceConfig(kind=kind, model=folder, device="cpu"), "a fox walking")


def _edit_scheduler(replace: dict | None = None, **changes):
    """Damage: ``scheduler/scheduler_config.json`` replaced by ``replace`` or with ``changes`` applied."""

    def damage(folder) -> None:
        path = folder / "scheduler" / "scheduler_config.json"
        config = replace if replace is not None else {**json.loads(path.read_text()), **changes}
        path.write_text(json.dumps(config))

    return damage


def _drop_scheduler_keys(*keys):
    """Damage: ``keys`` removed from ``scheduler/scheduler_config.json``."""

    def damage(folder) -> None:
        path = folder / "scheduler" / "scheduler_config.json"
        config = json.loads(path.read_text())
        path.write_text(json.dumps({k: v for k, v in config.items() if k not in keys}))

    return damage


def _truncate_scheduler(folder) -> None:
    path = folder / "scheduler" / "scheduler_config.json"
    path.write_text(path.read_text()[:30])


@pytest.mark.parametrize(
    ("kind", "damage", "message"),
    [
        # was `error: Unterminated string starting at ...`, no path
        ("wan2.1-1.3b", _truncate_scheduler, r"not a valid JSON file .*there but unreadable"),
        ("wan2.1-1.3b", _edit_scheduler(prediction_type="epsilon"), r"prediction_type is 'epsilon', expected 'flow_"),
        ("wan2.1-1.3b", _edit_scheduler(flow_shift=0.0), r"flow_shift is 0.0, expected a finite number > 0"),
        # a FlowMatch config without its shift loaded with the class default 1.0
        (
            "wan2.1-1.3b",
            _edit_scheduler({"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000}),
            r"no flow shift \(neither flow_shift nor shift\), expected one",
        ),
        # was a ValueError naming no folder
        (
            "cogvideox-2b",
            _edit_scheduler(prediction_type="sample"),
            r"prediction_type is 'sample', expected 'v_prediction' or 'epsilon'",
        ),
        # missing keys loaded with diffusers' defaults (epsilon, no zero-SNR rescale, shift 3): a wrong gradient
        (
            "cogvideox-2b",
            _drop_scheduler_keys("prediction_type", "rescale_betas_zero_snr", "snr_shift_scale"),
            r"prediction_type, rescale_betas_zero_snr, snr_shift_scale not set",
        ),
        ("cogvideox-2b", _drop_scheduler_keys("snr_shift_scale"), r"snr_shift_scale not set"),
        # a JSON list: 'couldn't connect ... download them' although the file is there
        ("cogvideox-2b", _edit_scheduler([]), r"expected a JSON object \(a diffusers config\), got a JSON list"),
    ],
)
def test_a_scheduler_config_the_model_cannot_use_is_refused_by_file_and_field(
    model_folders, tmp_path, monkeypatch, kind, damage, message
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = _damaged_copy(model_folders, kind, tmp_path, damage)
    with pytest.raises(GuidanceModelError, match=rf"^{re.escape(folder)}/scheduler/scheduler_config.json: {message}"):
        build_guidance(GuidanceConfig(kind=kind, model=folder, device="cpu"), "a fox walking")


def test_a_cached_hub_scheduler_of_the_other_family_is_refused(tmp_path, monkeypatch):
    """A hub id (no local folder) is checked too: its scheduler config in the Hugging Face cache, before any load."""
    import huggingface_hub.constants as hf_constants

    repo = tmp_path / "models--Org--Wan-like"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    sched = repo / "snapshots" / "abc123" / "scheduler"
    sched.mkdir(parents=True)
    cogvideox_scheduler().save_config(sched)
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        GuidanceModelError,
        match=r"Org/Wan-like/scheduler/scheduler_config.json \(Hugging Face cache\): _class_name is "
        r"'CogVideoXDDIMScheduler', expected UniPCMultistepScheduler",
    ):
        build_guidance(GuidanceConfig(kind="wan2.1-1.3b", model="Org/Wan-like", device="cpu"), "a fox walking")


def test_guidance_classes_refuse_a_scheduler_of_the_other_family():
    """Built directly (no folder): GuidanceWan with a DDIM scheduler silently used flow shift 1.0."""
    from types import SimpleNamespace

    from diffusers import UniPCMultistepScheduler

    from distill.guidance import flow_shift

    wan, cog = tiny_wan(), tiny_cogvideox()
    emb = torch.zeros(1, 4, 32)
    with pytest.raises(ValueError, match=r"CogVideoXDDIMScheduler has prediction_type 'v_prediction', expected 'flow_"):
        GuidanceWan(wan.transformer, wan.vae, cogvideox_scheduler(), emb)
    with pytest.raises(ValueError, match=r"has no flow shift \(neither flow_shift nor shift in its config\)"):
        flow_shift(SimpleNamespace(config={"num_train_timesteps": 1000}))
    with pytest.raises(ValueError, match=r"has shift -1.0, expected a finite number > 0"):
        flow_shift(SimpleNamespace(config={"shift": -1.0}))
    assert flow_shift(wan.scheduler) == 3.0
    unipc = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=5.0)
    assert flow_shift(unipc) == 5.0
    with pytest.raises(ValueError, match=r"UniPCMultistepScheduler has prediction_type 'flow_prediction', expected "):
        GuidanceCogVideoX(cog.transformer, cog.vae, unipc, emb)


def test_a_prompt_the_tokenizer_cannot_read_is_refused(model_folders, monkeypatch):
    """The tiny Wan tokenizer knows 'a', 'fox' and 'walking' only: a prompt of unknown words would be all <unk>."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = GuidanceConfig(kind="wan2.1-1.3b", model=str(model_folders["wan2.1-1.3b"]), device="cpu")
    with pytest.raises(GuidanceModelError, match=r"reads 3 of the 3 tokens of 'ein Fuchs rennt' as <unk>"):
        build_guidance(cfg, "ein Fuchs rennt")


@pytest.mark.parametrize("kind", ["cogvideox-2b", "wan2.1-1.3b"])
def test_released_kinds_load_from_a_local_diffusers_folder(model_folders, monkeypatch, kind):
    """--guidance-model DIR: every component comes from the folder (tiny weights in the released layout)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tmp_path = model_folders[kind]
    cfg = GuidanceConfig(kind=kind, model=str(tmp_path), device="cpu", dtype="float32", guidance_scale=4.0)
    guidance = build_guidance(cfg, "a fox walking")
    assert isinstance(guidance, GuidanceCogVideoX if kind.startswith("cogvideox") else GuidanceWan)
    length = 226 if kind.startswith("cogvideox") else 512
    assert guidance.prompt_embeds.shape == (1, length, 32)
    if kind.startswith("wan"):
        assert guidance.shift == 3.0
    else:  # the sentencepiece-only tokenizer folder loads as the real model (not as all-<unk>)
        import sentencepiece as spm
        from transformers import T5Tokenizer

        ids = T5Tokenizer.from_pretrained(tmp_path / "tokenizer")("a fox walks over the grass").input_ids
        sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "tokenizer" / "spiece.model"))
        assert ids == [*sp.encode("a fox walks over the grass"), 1] and 2 not in ids  # + </s>, no <unk>
    video = torch.rand(1, FRAMES, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(0)).requires_grad_()
    out = guidance(video, 0.5, step_generator(0, 0))
    out.loss.backward()
    assert torch.isfinite(video.grad).all() and video.grad.abs().max() > 0


def test_cogvideox_folder_sets_the_prompt_length(tmp_path, monkeypatch):
    """The prompt is padded to the folder's transformer's max_text_seq_length (a model taking other than the
    preset's 226 tokens failed in its patch embedding)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _save_cogvideox_folder(tmp_path, text_length=24)
    guidance = build_guidance(GuidanceConfig(kind="cogvideox-2b", model=str(tmp_path), device="cpu",
                                             dtype="float32"), "a fox walking")  # fmt: skip
    assert guidance.prompt_embeds.shape == (1, 24, 32)
    out = guidance(torch.rand(1, FRAMES, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(0)), 0.5,
                   step_generator(0, 0))  # fmt: skip
    assert torch.isfinite(out.grad).all()


def test_checkpointed_wan_encode_matches_the_vae_and_recomputes_each_chunk():
    """Per-chunk checkpointing of the Wan VAE: the same latents and gradients as ``vae.encode``, and in the
    backward pass every chunk runs its encoder again (its activations were not kept)."""
    from distill.guidance.wan import checkpointed_wan_encode

    vae = tiny_wan().vae.requires_grad_(False).eval()
    gen = torch.Generator().manual_seed(5)
    x = (2 * torch.rand(1, 3, 9, 16, 16, generator=gen) - 1).requires_grad_()
    weights = torch.randn(1, vae.config.z_dim, 3, 2, 2, generator=gen)
    plain = vae.encode(x).latent_dist.mode()
    (g_plain,) = torch.autograd.grad((plain * weights).sum(), x)
    calls = []
    hook = vae.encoder.register_forward_pre_hook(lambda *a: calls.append(torch.is_grad_enabled()))
    try:
        ours = checkpointed_wan_encode(vae, x)
        forward_calls = len(calls)
        (g_ours,) = torch.autograd.grad((ours * weights).sum(), x)
    finally:
        hook.remove()
    np.testing.assert_allclose(ours.detach(), plain.detach(), atol=1e-6)
    np.testing.assert_allclose(g_ours, g_plain, atol=1e-6 * float(g_plain.abs().max()))
    assert forward_calls == 3 and len(calls) == 6  # 1 + (9 - 1) / 4 chunks, each run again in the backward pass
    assert g_ours[:, :, 1:].abs().amax(dim=(0, 1, 3, 4)).min() > 0  # every frame gets a gradient (the cache carries it)


def test_checkpointed_wan_encode_checkpoints_a_fresh_vaes_first_encode():
    """A VAE that has never encoded has no causal cache yet (``_enc_feat_map`` appears at its first
    ``clear_cache``): its first encode is checkpointed too, not run whole with every chunk's activations kept."""
    from distill.guidance.wan import checkpointed_wan_encode

    vae = tiny_wan().vae.requires_grad_(False).eval()
    vae.__dict__.pop("_enc_feat_map", None)  # as loaded (tiny_wan may have run the VAE already)
    assert not hasattr(vae, "_enc_feat_map")
    x = (2 * torch.rand(1, 3, 9, 16, 16, generator=torch.Generator().manual_seed(6)) - 1).requires_grad_()
    calls = []
    hook = vae.encoder.register_forward_pre_hook(lambda *a: calls.append(torch.is_grad_enabled()))
    try:
        z = checkpointed_wan_encode(vae, x)
        z.sum().backward()
    finally:
        hook.remove()
    assert len(calls) == 6  # 3 chunks, each run again in the backward pass (whole encode: 3 calls, none again)
    assert torch.isfinite(x.grad).all()


def test_scheduler_class_of_a_cached_hub_id_is_read_from_its_config(tmp_path, monkeypatch):
    """A hub id (no local folder) takes its scheduler class from the config in the local Hugging Face cache (a
    FlowMatch scheduler with ``shift`` was loaded as UniPC, whose flow_shift silently defaulted to 1)."""
    import huggingface_hub.constants as hf_constants

    from distill.guidance.loading import _scheduler_class

    repo = tmp_path / "models--Org--Wan-like"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    sched = repo / "snapshots" / "abc123" / "scheduler"
    sched.mkdir(parents=True)
    (sched / "scheduler_config.json").write_text(json.dumps({"_class_name": "FlowMatchEulerDiscreteScheduler",
                                                             "shift": 5.0}))  # fmt: skip
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = GuidanceConfig(kind="wan2.1-1.3b")
    assert _scheduler_class("Org/Wan-like", cfg) == "FlowMatchEulerDiscreteScheduler"
    assert _scheduler_class("Org/not-cached", cfg) == "UniPCMultistepScheduler"  # the weights' loader reports it


def test_non_finite_model_output_stops_the_step_by_name():
    """A video model that returns NaN/inf (a float16 overflow, broken weights) is reported, not zeroed into a
    quietly wrong optimization."""
    guidance = _guidance("wan")
    video = torch.rand(1, FRAMES, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(0))
    original = guidance.predict

    def overflowing(x_t, timestep):
        out = original(x_t, timestep).clone()
        out.view(-1)[:3] = float("inf")
        return out

    guidance.predict = overflowing
    with pytest.raises(FloatingPointError, match=r"3 non-finite entries .* try --guidance-dtype bfloat16"):
        guidance(video, 0.5, step_generator(0, 0))


@pytest.fixture
def loads(monkeypatch):
    """The subfolders ``build_guidance`` loads (from_pretrained calls), in order."""
    import distill.guidance.loading as loading

    calls, original = [], loading._load

    def spy(cls, source, subfolder, *args, **kwargs):
        calls.append(subfolder)
        return original(cls, source, subfolder, *args, **kwargs)

    monkeypatch.setattr(loading, "_load", spy)
    return calls


def _replace_transformer(**overrides):
    """Damage: transformer/ replaced by a tiny transformer of the folder's family with ``overrides`` (an
    image-to-video model's extra input channels, Wan's image embedding), real weights and config."""

    def damage(folder) -> None:
        from diffusers import CogVideoXTransformer3DModel, WanTransformer3DModel

        cog = json.loads((folder / "transformer" / "config.json").read_text())["_class_name"].startswith("CogVideoX")
        if cog:
            cls, kw = CogVideoXTransformer3DModel, dict(
                num_attention_heads=4, attention_head_dim=8, in_channels=4, out_channels=4, time_embed_dim=2,
                text_embed_dim=32, num_layers=1, sample_width=8, sample_height=8, sample_frames=9, patch_size=2,
                temporal_compression_ratio=4, max_text_seq_length=226,
            )  # fmt: skip
        else:
            cls, kw = WanTransformer3DModel, dict(
                patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=16,
                text_dim=32, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
                qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
            )  # fmt: skip
        shutil.rmtree(folder / "transformer")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            cls(**{**kw, **overrides}).save_pretrained(folder / "transformer")
        if "in_channels" in overrides:  # as the released image-to-video folders name their pipeline
            name = "CogVideoXImageToVideoPipeline" if cog else "WanImageToVideoPipeline"
            (folder / "model_index.json").write_text(json.dumps({"_class_name": name}))

    return damage


def _two_experts(index: dict | None = None, copy: bool = True):
    """Damage: a Wan 2.2 style second expert (transformer_2/ and / or its model_index.json entries)."""

    def damage(folder) -> None:
        if copy:
            shutil.copytree(folder / "transformer", folder / "transformer_2")
        if index is not None:
            (folder / "model_index.json").write_text(json.dumps({"_class_name": "WanPipeline", **index}))

    return damage


WAN22_INDEX = {"transformer": ["diffusers", "WanTransformer3DModel"], "boundary_ratio": 0.875,
               "transformer_2": ["diffusers", "WanTransformer3DModel"]}  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "damage", "message"),
    [
        # CogVideoX-5b-I2V style (image latents as extra input channels): loaded fully, then a conv's channel
        # mismatch at the first step
        (
            "cogvideox-2b",
            _replace_transformer(in_channels=8),
            r"/transformer/config.json: in_channels is 8, expected 4 \(vae/config.json latent_channels\): an "
            r"image-to-video model\? cogvideox-2b guidance takes a text-to-video model",
        ),
        (
            "cogvideox-2b",
            _replace_transformer(out_channels=8),
            r"/transformer/config.json: out_channels is 8, expected 4 \(vae/config.json latent_channels\)",
        ),
        # Wan2.1-I2V style (36 input channels, an image embedding)
        (
            "wan2.1-1.3b",
            _replace_transformer(in_channels=36, image_dim=4),
            r"/transformer/config.json: in_channels is 36, expected 16 \(vae/config.json z_dim\): an image-to-video",
        ),
        # an image embedding alone: built and ran without its image
        (
            "wan2.1-1.3b",
            _replace_transformer(image_dim=4),
            r"/transformer/config.json: image_dim is 4, expected null: an image-to-video model .* not supported",
        ),
        # Wan 2.2's two experts built silently, one expert used at every timestep
        (
            "wan2.1-1.3b",
            _two_experts(WAN22_INDEX),
            r"/model_index.json: transformer_2 is \['diffusers', 'WanTransformer3DModel'\]: a Wan 2.2 model with "
            r"two experts .* is not supported",
        ),
        (
            "wan2.1-1.3b",
            _two_experts({"boundary_ratio": 0.875}, copy=False),
            r"/model_index.json: boundary_ratio is 0.875: a Wan 2.2 model with two experts",
        ),
        ("wan2.1-1.3b", _two_experts(), r"/transformer_2: a second transformer \(a Wan 2.2 model with two experts\)"),
    ],
)
def test_an_image_to_video_or_two_expert_folder_is_refused_before_loading(
    model_folders, tmp_path, monkeypatch, loads, kind, damage, message
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = _damaged_copy(model_folders, kind, tmp_path, damage)
    with pytest.raises(GuidanceModelError, match=rf"^{re.escape(folder)}{message}"):
        build_guidance(GuidanceConfig(kind=kind, model=folder, device="cpu", dtype="float32"), "a fox walking")
    assert loads == [], "refused from the configs, before any weights load"


def test_a_wan_model_index_without_a_second_expert_is_accepted(model_folders, tmp_path, monkeypatch):
    """diffusers writes an absent optional component as [null, null] (Wan 2.2 TI2V-5B): not a second expert."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    index = {"transformer": ["diffusers", "WanTransformer3DModel"], "transformer_2": [None, None],
             "boundary_ratio": None}  # fmt: skip
    folder = _damaged_copy(model_folders, "wan2.1-1.3b", tmp_path, _two_experts(index, copy=False))
    guidance = build_guidance(GuidanceConfig(kind="wan2.1-1.3b", model=folder, device="cpu"), "a fox walking")
    assert isinstance(guidance, GuidanceWan)


@pytest.mark.parametrize("kind", ["cogvideox-2b", "wan2.1-1.3b"])
@pytest.mark.parametrize(
    "file",
    ["scheduler/scheduler_config.json", "transformer/config.json", "vae/config.json", "text_encoder/config.json"],
)
def test_a_missing_config_file_is_named_before_anything_loads(model_folders, tmp_path, monkeypatch, loads, kind, file):
    """A local folder is checked before anything loads: a missing scheduler config was reported after the text
    encoder, transformer and VAE had loaded (minutes and tens of GB for the released models)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = _damaged_copy(model_folders, kind, tmp_path, lambda f: (f / file).unlink())
    sub = file.split("/")[0]
    with pytest.raises(
        GuidanceModelError,
        match=rf"missing {re.escape(file)} \(an incomplete download\?\); nothing was loaded: download {sub}/ again "
        rf"\(`hf download .* --include '{sub}/\*'",
    ):
        build_guidance(GuidanceConfig(kind=kind, model=folder, device="cpu"), "a fox walking")
    assert loads == []


@pytest.mark.parametrize("frames", [6, 7, 8])
def test_a_frame_count_the_video_vae_cannot_encode_is_refused(tiny, frames):
    """Wan's VAE encoded 1 + (F - 1) // 4 chunks: the trailing frames got no gradient, silently. CogVideoX's drops
    none but averages the first frame with its neighbours (no latent of the first frame alone)."""
    kind, guidance = tiny
    video = torch.rand(1, frames, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(0)).requires_grad_()
    family = "CogVideoX" if kind == "cogvideox" else "Wan"
    with pytest.raises(
        ValueError, match=rf"^video: {frames} frames, expected 4k \+ 1 \(e.g. 5 or 9\): the {family} VAE"
    ):
        guidance(video, 0.5, step_generator(0, 0))
    # the oracle's pixel VAE has no temporal compression: any frame count
    oracle = build_guidance(GuidanceConfig(kind="oracle", device="cpu"), "", oracle_target=video.detach())
    out = oracle(video, 0.5, step_generator(0, 0))
    out.loss.backward()
    assert out.latents.shape[1] == frames and torch.isfinite(video.grad).all()


@pytest.mark.parametrize("kind", ["cogvideox-2b", "wan2.1-1.3b"])
def test_a_missing_text_encoder_shard_is_reported_as_missing(model_folders, tmp_path, monkeypatch, kind):
    """transformers raises FileNotFoundError for a shard its index names: it was called "there but unreadable
    (truncated or corrupt?)"."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def drop_shard(folder) -> None:
        encoder = (tiny_cogvideox if kind.startswith("cogvideox") else tiny_wan)().text_encoder
        shutil.rmtree(folder / "text_encoder")
        encoder.save_pretrained(folder / "text_encoder", max_shard_size="20KB")
        shards = sorted((folder / "text_encoder").glob("model-*.safetensors"))
        assert len(shards) > 1
        shards[-1].unlink()

    folder = _damaged_copy(model_folders, kind, tmp_path, drop_shard)
    with pytest.raises(GuidanceModelError) as info:
        build_guidance(GuidanceConfig(kind=kind, model=folder, device="cpu"), "a fox walking")
    assert re.search(r"text_encoder from .*: No such file or directory: .*/text_encoder/model-\d+-of-\d+.safetensors. "
                     r"The weights are not available locally", str(info.value)), info.value  # fmt: skip
    assert "unreadable" not in str(info.value)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        # a bare KeyError 'fp16' at build
        ({"dtype": "fp16"}, r"GuidanceConfig.dtype: expected one of 'auto', 'float32', 'float16', 'bfloat16', got"),
        ({"kind": "cogvideox"}, r"GuidanceConfig.kind: expected one of 'cogvideox-2b', .*'oracle', got 'cogvideox'"),
        ({"weighting": "snr"}, r"GuidanceConfig.weighting: expected one of 'uniform', 'noise_level', got 'snr'"),
        # built in float32 silently
        ({"kind": "tiny", "dtype": "float16"}, r"GuidanceConfig.dtype: tiny builds float32 weights .*got 'float16'"),
        ({"kind": "oracle", "dtype": "bfloat16"}, r"GuidanceConfig.dtype: oracle builds float32 weights"),
    ],
)
def test_guidance_config_refuses_settings_it_cannot_build(settings, message):
    with pytest.raises(ValueError, match=message):
        GuidanceConfig(**settings)
    for kind in ("tiny", "tiny-wan", "oracle"):
        for dtype in ("auto", "float32"):  # what the tiny models and the oracle are
            assert GuidanceConfig(kind=kind, dtype=dtype).dtype == dtype


@pytest.mark.parametrize(
    ("kind", "file", "edit", "message"),
    [
        # was AttributeError: 'list' object has no attribute 'get'
        ("cogvideox-2b", "transformer/config.json", lambda c: [], r"transformer/config.json: expected a JSON object"),
        # were raw TypeErrors from inside from_pretrained
        ("cogvideox-2b", "transformer/config.json", lambda c: {**c, "num_attention_heads": "4"},
         r"transformer/config.json has a malformed value \(TypeError"),
        ("cogvideox-2b", "vae/config.json", lambda c: {**c, "block_out_channels": 8},
         r"vae/config.json has a malformed value \(TypeError"),
        # was RuntimeError: shape '[1, 16, 1, 1, 1]' is invalid for input of size 3
        ("wan2.1-1.3b", "vae/config.json", lambda c: {**c, "latents_mean": [0.0, 0.0, 0.0]},
         r"vae/config.json: latents_mean must be \d+ finite numbers \(z_dim\)"),
    ],
)  # fmt: skip
def test_a_config_with_malformed_values_is_named(model_folders, tmp_path, monkeypatch, kind, file, edit, message):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def damage(folder) -> None:
        path = folder / file
        path.write_text(json.dumps(edit(json.loads(path.read_text()))))

    folder = _damaged_copy(model_folders, kind, tmp_path, damage)
    with pytest.raises((GuidanceModelError, ValueError), match=message):
        build_guidance(GuidanceConfig(kind=kind, model=folder, device="cpu"), "a fox walking")
