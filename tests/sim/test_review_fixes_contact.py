"""Review fixes: copied capsule radii/pairs in the torch bridge; refused inf frame rates, sizes and times and
non-integer labels in the contact metrics."""

import numpy as np
import pytest

from sim.contact_metrics import ground_contact_metrics


def _sliding_clip(F=6):
    pts = np.zeros((F, 3, 3))
    pts[:, 2, 2] = 1.0
    pts[:, 0, 0] = np.arange(F) * 0.1
    pts[:, 1, 0] = 0.5
    return pts


def test_capsule_gradient_uses_radii_and_pairs_of_the_forward_pass():
    torch = pytest.importorskip("torch")
    from sim.collision_torch import capsule_penetration_penalty

    def run(edit):
        a = torch.tensor([[[0.0, 0, 0], [0, 0.1, 0]]], dtype=torch.float64, requires_grad=True)
        b = torch.tensor([[[1.0, 0, 0], [1, 0.1, 0]]], dtype=torch.float64, requires_grad=True)
        r = torch.tensor([0.1, 0.1], dtype=torch.float64, requires_grad=True)
        pairs = torch.tensor([[0, 1]], dtype=torch.int32)
        out = capsule_penetration_penalty(a, b, r, pairs)
        if edit:
            with torch.no_grad():
                r.add_(0.05)  # an optimizer step before backward
                pairs.fill_(0)
        out.sum().backward()
        return out.item(), a.grad.clone(), r.grad.clone()

    v0, ga0, gr0 = run(False)
    v1, ga1, gr1 = run(True)
    assert v1 == v0 == pytest.approx(0.01, rel=1e-12)  # (0.2 - 0.1)^2
    assert gr0.tolist() == pytest.approx([0.2, 0.2], rel=1e-12)
    assert torch.equal(ga0, ga1) and torch.equal(gr0, gr1)


@pytest.mark.parametrize("fps", [float("inf"), float("nan"), True, np.inf, 0.0])
def test_frame_rate_must_be_a_finite_real_number(fps):
    with pytest.raises(ValueError, match=r"^times: a frame rate"):
        ground_contact_metrics(_sliding_clip(), fps)


def test_sample_times_must_be_finite():
    t = np.arange(6) / 30.0
    t[-1] = np.inf
    with pytest.raises(ValueError, match=r"^times: contains non-finite"):
        ground_contact_metrics(_sliding_clip(), t)


@pytest.mark.parametrize("size", [float("inf"), float("nan"), True])
def test_size_must_be_a_finite_real_number(size):
    with pytest.raises(ValueError, match=r"^size: must be a finite number > 0"):
        ground_contact_metrics(_sliding_clip(), 30.0, size=size)


@pytest.mark.parametrize("labels", [[0.9, 1.9, 2.9], [True, False, False], [0.0, 1.0, 2.0]])
def test_labels_must_be_integers(labels):
    with pytest.raises(ValueError, match=r"^labels: expected an integer array"):
        ground_contact_metrics(_sliding_clip(), 30.0, labels=np.array(labels))


def test_valid_inputs_are_unchanged():
    m = ground_contact_metrics(_sliding_clip(), np.int64(30), size=np.float64(1.0), labels=[0, 1, 2],
                               label_count=np.int64(3))  # fmt: skip
    ref = ground_contact_metrics(_sliding_clip(), 30.0, size=1.0, labels=np.array([0, 1, 2]))
    assert m.summary() == ref.summary() and m.foot_skate_ratio == 1.0 and m.part_contact_count.shape[1] == 3
    np.testing.assert_allclose(m.times, np.arange(6) / 30.0, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"^label_count: must be an integer"):
        ground_contact_metrics(_sliding_clip(), 30.0, labels=[0, 1, 2], label_count=3.0)
