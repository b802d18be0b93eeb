"""Fast checks of the capstone's pieces (notebooks/capstone): data, the tiny ViT, the fold-kernel encoder."""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "notebooks"))

from capstone import vit  # noqa: E402

TINY = vit.ViTConfig(image_size=16, patch=8, width=64, depth=2, heads=2)  # 5 tokens per image


def test_dataset_is_deterministic_and_labelled() -> None:
    images, labels = vit.make_images(64, seed=3)
    again_images, again_labels = vit.make_images(64, seed=3)
    other_images, _ = vit.make_images(64, seed=4)
    assert images.shape == (64, 3, 32, 32) and images.dtype == torch.float32
    assert torch.equal(images, again_images) and torch.equal(labels, again_labels)
    assert not torch.equal(images, other_images)
    assert set(labels.tolist()) == set(range(len(vit.CLASS_NAMES)))
    assert torch.isfinite(images).all()


def test_batches_split_one_fixed_stream() -> None:
    batches = vit.make_batches(steps=3, batch=4, seed=1)
    images, labels = vit.make_images(12, seed=1)
    assert len(batches) == 3
    assert torch.equal(torch.cat([b[0] for b in batches]), images)
    assert torch.equal(torch.cat([b[1] for b in batches]), labels)


def test_make_images_rejects_empty_request() -> None:
    with pytest.raises(ValueError, match="count=0"):
        vit.make_images(0, seed=0)


def test_vit_forward_shapes_and_seeded_weights() -> None:
    model = vit.build_vit(seed=0)
    images, _ = vit.make_images(2, seed=0)
    assert model.embed(images).shape == (2, 17, 192)
    assert model(images).shape == (2, len(vit.CLASS_NAMES))
    assert model.cfg.tokens == 17 and len(model.blocks) == 4
    same = vit.build_vit(seed=0)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), same.parameters()))


def test_vit_rejects_patch_that_does_not_tile_the_image() -> None:
    with pytest.raises(ValueError, match="not divisible by patch 5"):
        vit.TinyViT(vit.ViTConfig(image_size=32, patch=5))


def test_training_lowers_the_loss() -> None:
    model = vit.build_vit(seed=0, cfg=TINY)
    batch = vit.make_batches(steps=1, batch=16, seed=1, image_size=16)
    losses = vit.train(model, batch * 8, lr=1e-3)  # the same batch 8 times: must be fitted
    assert len(losses) == 8 and losses[-1] < 0.5 * losses[0]


def test_progress_log_prints_a_few_lines_without_timing() -> None:
    from io import StringIO
    from contextlib import redirect_stdout

    out = StringIO()
    with redirect_stdout(out):
        vit.train(vit.build_vit(seed=0, cfg=TINY), vit.make_batches(7, 4, seed=1, image_size=16),
                  progress=vit.progress_log("tiny", every=3))
    lines = out.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines] == ["tiny: step 3/7", "tiny: step 6/7", "tiny: step 7/7"]
    assert all("loss " in line for line in lines) and "\r" not in out.getvalue()
    with pytest.raises(ValueError, match="every=0"):
        vit.progress_log("tiny", every=0)


# --- with the kernels (emulated on CPU); imported inside the tests so the ones above stand alone ---


def test_swap_gelu_finds_one_gelu_per_block() -> None:
    import kernels

    model = vit.build_vit(seed=0, cfg=TINY)
    assert kernels.swap_gelu(model) == TINY.depth
    assert all(isinstance(b.mlp.act, kernels.GELUErf) for b in model.blocks)


def test_padded_rows_is_a_multiple_of_lnc_tiles() -> None:
    from capstone.folded import padded_rows

    assert [padded_rows(r) for r in (1, 256, 257, 1088)] == [256, 256, 512, 1280]
    assert padded_rows(130, lnc=1) == 256


def _with_random_affine(model: nn.Module, seed: int) -> nn.Module:
    """LayerNorms with gamma far from 1 and beta far from 0, so a missing fold would show."""
    gen = torch.Generator().manual_seed(seed)
    model = copy.deepcopy(model)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.copy_(0.5 + torch.rand(module.weight.shape, generator=gen))
                module.bias.copy_(0.5 * torch.randn(module.bias.shape, generator=gen))
    return model.eval()


def test_fold_kernel_encoder_matches_pytorch_encoder() -> None:
    from capstone.folded import FoldKernelViT

    model = _with_random_affine(vit.build_vit(seed=0, cfg=TINY), seed=5)
    images, _ = vit.make_images(6, seed=7, image_size=16)  # 30 token rows, padded to 256
    with torch.no_grad():
        expected = model(images)
        folded = FoldKernelViT(model)(images).float()
        affine_dropped = FoldKernelViT(_identity_affine(model))(images).float()
    scale = expected.abs().max().item()
    error = (folded - expected).abs().max().item()
    assert folded.shape == expected.shape
    assert error < 0.03 * scale, f"fold-kernel logits differ by {error:.4f} (logit scale {scale:.3f})"
    # The check can fail: dropping the affine (z fed to unfolded weights) is far outside it.
    assert (affine_dropped - expected).abs().max().item() > 10 * error


def _identity_affine(model: nn.Module) -> nn.Module:
    model = copy.deepcopy(model)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
    return model


def test_fold_kernel_vit_is_inference_only_copy() -> None:
    from capstone.folded import FoldKernelViT

    model = vit.build_vit(seed=0, cfg=TINY)
    folded = FoldKernelViT(model)
    assert all(not p.requires_grad for p in folded.parameters())
    assert all(p.requires_grad for p in model.parameters())  # the source model is untouched
    assert all(core.qkv is None for core in folded.attn)  # unfolded qkv weights are not kept


def test_first_projections_run_fold_then_folded_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    import kernels
    from capstone import folded as capstone_folded

    model = vit.build_vit(seed=0, cfg=TINY)
    images, _ = vit.make_images(2, seed=3, image_size=16)
    widths = []

    def counting(z: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        assert z.dtype == weight.dtype == torch.bfloat16 and bias.dtype == torch.float32
        widths.append(weight.shape[0])
        return kernels.folded_linear(z, weight, bias)

    monkeypatch.setattr(capstone_folded, "folded_linear", counting)
    with torch.no_grad():
        capstone_folded.FoldKernelViT(model)(images)
    qkv, fc1 = model.blocks[0].attn.qkv.out_features, model.blocks[0].mlp.fc1.out_features
    assert widths == [qkv, fc1] * len(model.blocks)
