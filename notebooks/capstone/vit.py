"""A tiny Vision Transformer, a synthetic image dataset and a training loop, in plain PyTorch.

The capstone notebook (notebooks/17_capstone_vit.ipynb) and its headless twin
(benchmarks/capstone_vit.py) share this one copy. Nothing here imports `kernels` or `nkisim`:
the model is an ordinary PyTorch ViT, so swapping kernels into it is the lesson, not a
precondition. Module names follow the usual ViT layout (`blocks[i].norm1`, `.attn.qkv`,
`.norm2`, `.mlp.fc1`, `.mlp.act`, `.mlp.fc2`) because `kernels.swap_gelu` looks for an
attribute named `act` holding an `nn.GELU`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

CLASS_NAMES = ("horizontal stripes", "vertical stripes", "blob", "checkerboard")


@dataclass(frozen=True)
class ViTConfig:
    image_size: int = 32
    patch: int = 8
    channels: int = 3
    width: int = 192
    depth: int = 4
    heads: int = 3
    mlp_ratio: int = 4
    classes: int = len(CLASS_NAMES)

    @property
    def tokens(self) -> int:
        """Patches plus the class token: (32 / 8)^2 + 1 = 17 for the defaults."""
        return (self.image_size // self.patch) ** 2 + 1


# ---------------------------------------------------------------------------------------------
# Data: four classes of procedurally drawn 32x32 RGB images, generated from a seed
# ---------------------------------------------------------------------------------------------

def make_images(count: int, seed: int, image_size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """`count` labelled images [N, 3, S, S] fp32 (roughly zero-mean) and labels [N] int64.

    Classes (CLASS_NAMES): horizontal stripes, vertical stripes, a Gaussian blob, a checkerboard;
    each with random period / phase / position, random foreground and background colours and
    pixel noise, so the task is easy but not trivial. Same (count, seed) -> same tensors.
    """
    if count < 1:
        raise ValueError(f"make_images: count={count}; need at least 1 image")
    gen = torch.Generator().manual_seed(seed)

    def uniform(low: float, high: float, *shape: int) -> torch.Tensor:
        return low + (high - low) * torch.rand(*shape, generator=gen)

    labels = torch.randint(0, len(CLASS_NAMES), (count,), generator=gen)
    coords = torch.arange(image_size, dtype=torch.float32)
    y, x = coords.view(1, -1, 1), coords.view(1, 1, -1)
    period = uniform(4.0, 10.0, count, 1, 1)
    phase = uniform(0.0, 2 * math.pi, count, 1, 1)

    def wave(t: torch.Tensor) -> torch.Tensor:
        return torch.sin(2 * math.pi * t / period + phase)

    centre_y, centre_x = uniform(8.0, 24.0, count, 1, 1), uniform(8.0, 24.0, count, 1, 1)
    radius = uniform(3.0, 7.0, count, 1, 1)
    patterns = torch.stack([
        (wave(y) > 0).float().expand(-1, image_size, image_size),
        (wave(x) > 0).float().expand(-1, image_size, image_size),
        torch.exp(-((y - centre_y) ** 2 + (x - centre_x) ** 2) / (2 * radius**2)),
        ((wave(y) > 0) ^ (wave(x) > 0)).float(),
    ])  # [classes, N, S, S]
    mask = patterns[labels, torch.arange(count)].unsqueeze(1)  # [N, 1, S, S], values in [0, 1]
    foreground, background = uniform(0.3, 1.0, count, 3, 1, 1), uniform(0.0, 0.5, count, 3, 1, 1)
    images = background + (foreground - background) * mask
    images = images + 0.1 * torch.randn(images.shape, generator=gen)
    return (images - 0.5) / 0.3, labels


def make_batches(steps: int, batch: int, seed: int, image_size: int = 32) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`steps` training batches, fixed once so that two models can see exactly the same data."""
    images, labels = make_images(steps * batch, seed, image_size)
    return list(zip(images.split(batch), labels.split(batch)))


# ---------------------------------------------------------------------------------------------
# Model: a pre-norm ViT built from standard PyTorch modules
# ---------------------------------------------------------------------------------------------

class Attention(nn.Module):
    """Multi-head self-attention; one fused `qkv` projection (a consumer of norm1) and `proj`."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"Attention: width {width} is not divisible by heads {heads}")
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attend(self.qkv(x))

    def attend(self, qkv: torch.Tensor) -> torch.Tensor:
        """Everything after the qkv projection: [batch, tokens, 3*width] -> [batch, tokens, width].

        Separate so an inference path can compute qkv elsewhere (from a folded projection).
        """
        batch, tokens, width3 = qkv.shape
        width = width3 // 3
        q, k, v = qkv.view(batch, tokens, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v)  # q, k, v: [batch, heads, tokens, head_dim]
        return self.proj(attended.transpose(1, 2).reshape(batch, tokens, width))


class Mlp(nn.Module):
    """fc1 (a consumer of norm2) -> act -> fc2. `act` is the attribute swap_gelu replaces."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm encoder block: x + attn(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.width)
        self.attn = Attention(cfg.width, cfg.heads)
        self.norm2 = nn.LayerNorm(cfg.width)
        self.mlp = Mlp(cfg.width, cfg.mlp_ratio * cfg.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TokenEmbedding(nn.Module):
    """[N, C, S, S] images -> [N, tokens, width]: patch embedding, class token, position embedding."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(cfg.channels, cfg.width, kernel_size=cfg.patch, stride=cfg.patch)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, cfg.width))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, cfg.tokens, cfg.width))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        patches = self.patch_embed(images).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(images.shape[0], -1, -1)
        return torch.cat([cls, patches], dim=1) + self.pos_embed


class TinyViT(nn.Module):
    """Token embedding (the residual stream's start) -> pre-norm blocks -> norm -> linear head."""

    def __init__(self, cfg: ViTConfig = ViTConfig()) -> None:
        super().__init__()
        if cfg.image_size % cfg.patch:
            raise ValueError(f"TinyViT: image size {cfg.image_size} is not divisible by patch {cfg.patch}")
        self.cfg = cfg
        self.embed = TokenEmbedding(cfg)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.depth))
        self.norm = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, cfg.classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.embed(images)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))  # classify from the class token


def build_vit(seed: int = 0, cfg: ViTConfig = ViTConfig()) -> TinyViT:
    """The capstone ViT with weights drawn from a fixed seed (same seed -> same weights)."""
    torch.manual_seed(seed)
    return TinyViT(cfg)


# ---------------------------------------------------------------------------------------------
# Training and evaluation
# ---------------------------------------------------------------------------------------------

def train(
    model: nn.Module,
    batches: Sequence[tuple[torch.Tensor, torch.Tensor]],
    lr: float = 1e-3,
    progress: Callable[[Iterable], Iterable] = iter,
) -> list[float]:
    """Train with AdamW on `batches` (one step each); return the loss of every step.

    `progress` wraps the batch iterator (e.g. `progress_log`); it may expose `set_postfix`.
    """
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses: list[float] = []
    steps = progress(batches)
    for images, labels in steps:
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if hasattr(steps, "set_postfix"):
            steps.set_postfix(loss=f"{losses[-1]:.4f}")
    return losses


@torch.no_grad()
def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of rows whose arg-max equals the label."""
    return (logits.argmax(dim=-1) == labels).float().mean().item()


class _ProgressLog:
    """Iterates over `items`, printing one line every `every` steps (and at the last one)."""

    def __init__(self, items: Sequence, desc: str, every: int) -> None:
        self.items, self.desc, self.every = items, desc, every
        self.step = 0

    def __iter__(self) -> Iterator:
        for self.step, item in enumerate(self.items, start=1):
            yield item

    def set_postfix(self, loss: str) -> None:
        if self.step % self.every == 0 or self.step == len(self.items):
            print(f"{self.desc}: step {self.step:>{len(str(len(self.items)))}}/{len(self.items)}, loss {loss}")


def progress_log(desc: str, every: int = 5) -> Callable[[Sequence], Iterable]:
    """A progress report for `train(progress=...)`: one short line every `every` steps.

    A redrawn bar would be stored in a notebook as one output per redraw (a wall of boxes on the
    book page); a few plain lines read the same in a terminal, a notebook and the book, and carry
    no timings, so nbval strict can compare them.
    """
    if every < 1:
        raise ValueError(f"progress_log: every={every} must be at least 1 step")
    return lambda items: _ProgressLog(items, desc, every)
