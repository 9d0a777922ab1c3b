"""The learned segmenter's network: a small semantic-plus-boundary encoder-decoder (torch, CPU).

Input: (B, 5, h, w) float32 at the network resolution: RGB in [0, 1] minus 0.5, depth in metres
divided by :data:`DEPTH_SCALE` (0 where invalid) and the depth validity. Output: (B, K + 2, h', w')
logits at ``output_stride`` of the camera image: K + 1 classes (0 = nothing of the vocabulary: walls,
floor, doors) and one boundary logit, positive where two instances touch. For inference batch norm
is folded into the convolutions, which always run through oneDNN (:class:`OneDnnConv2d`), so a
frame's logits are the same alone and in a batch. Importing this module imports torch.
"""

from __future__ import annotations

import copy

import numba
import numpy as np
import torch
from torch import nn
from torch.nn import functional

DEPTH_SCALE = 4.0
"""(m) Depth is fed to the network divided by this."""
MAX_INPUT_STRIDE = 256
"""The largest block edge (pixels) :func:`network_input` averages: a block's colour sum, at most
255 s², must stay exact in float32 (below 2^24)."""
IN_CHANNELS = 5


def conv_block(cin: int, cout: int, stride: int = 1, dilation: int = 1) -> nn.Sequential:
    """Conv 3×3 (no bias) + batch norm + ReLU: the network's building block, the shape
    :func:`fold_batch_norm` folds."""
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, dilation, dilation=dilation, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class UpBlock(nn.Sequential):
    """A decoder step: the ``coarse`` features upsampled (nearest) to the size of ``skip`` and
    concatenated before it, then a :func:`conv_block` (its parameters named as that block's)."""

    def __init__(self, coarse_channels: int, skip_channels: int, cout: int) -> None:
        super().__init__(*conv_block(coarse_channels + skip_channels, cout))
        self.coarse_channels = coarse_channels

    def forward(self, coarse: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().forward(torch.cat([functional.interpolate(coarse, size=skip.shape[2:]), skip], 1))


class SegNet(nn.Module):
    """Three stride-2 encoder stages of ``widths`` and a decoder with skip connections; its
    decoder steps fold the nearest upsampling into a transposed convolution for inference
    (:class:`UpConv`). ``decoder_stages`` decoder steps bring the 1/8 features back to
    1/2**(3 - decoder_stages) of the network input; the last two blocks of the 1/8 stage are dilated
    by ``context_dilation`` and twice that (1: plain 3×3 convolutions)."""

    def __init__(self, classes: int, widths: tuple[int, int, int], decoder_stages: int, context_dilation: int) -> None:
        super().__init__()
        if not 1 <= decoder_stages <= 3:
            raise ValueError(f"decoder_stages must be 1, 2 or 3, got {decoder_stages}")
        c1, c2, c3 = widths
        self.decoder_stages = decoder_stages
        self.enc1 = nn.Sequential(conv_block(IN_CHANNELS, c1, 2), conv_block(c1, c1))
        self.enc2 = nn.Sequential(conv_block(c1, c2, 2), conv_block(c2, c2))
        d = context_dilation
        self.enc3 = nn.Sequential(
            conv_block(c2, c3, 2), conv_block(c3, c3, dilation=d), conv_block(c3, c3, dilation=2 * d)
        )
        self.dec2 = UpBlock(c3, c2, c2)
        self.dec1 = UpBlock(c2, c1, c1) if decoder_stages >= 2 else None
        self.dec0 = UpBlock(c1, IN_CHANNELS, c1) if decoder_stages >= 3 else None
        out_width = c1 if decoder_stages >= 2 else c2
        self.head = nn.Conv2d(out_width, classes + 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.enc1(x)
        b = self.enc2(a)
        y = self.enc3(b)
        y = self.dec2(y, b)
        if self.dec1 is not None:
            y = self.dec1(y, a)
        if self.dec0 is not None:
            y = self.dec0(y, x)
        return self.head(y)


def output_stride(input_stride: int, decoder_stages: int) -> int:
    """Camera pixels per output cell."""
    return input_stride * 2 ** (3 - decoder_stages)


def network_input(rgb: np.ndarray, depth: np.ndarray, input_stride: int, out: np.ndarray | None = None) -> np.ndarray:
    """(5, H / s, W / s) float32 input of one frame: RGB averaged over s×s blocks, depth and its
    validity sampled at the top-left pixel of each block (``s = input_stride``; H, W divisible).
    The block sums are exact integers (below 2^24, so exact in float32); the mean is their product
    with 1 / (255 s²) in float32, minus 0.5. A C-contiguous array of its own; or written
    channels-last into ``out`` (H / s, W / s, 5) when given (a frame of the batch the network reads
    without a copy), and the result is then a (5, H / s, W / s) view of it. Compiled
    (:func:`_fill_input`): 0.17 against 0.28 ms a frame for the numpy passes and copies it
    replaces, with the same floats."""
    h, w = depth.shape
    s = input_stride
    if h % s or w % s:
        raise ValueError(f"image size {w}x{h} is not divisible by the input stride {s}")
    if s > MAX_INPUT_STRIDE:
        raise ValueError(f"input stride {s} is too large: a block's colour sum would not be exact in float32")
    if rgb.shape != (h, w, 3) or rgb.dtype != np.uint8:
        raise ValueError(f"rgb must be uint8 {(h, w, 3)} for a depth image of {w}x{h}, got {rgb.dtype} {rgb.shape}")
    if out is None:  # a C-contiguous array of its own (training stacks these; a layout changes its rounding)
        return np.ascontiguousarray(
            network_input(rgb, depth, input_stride, np.empty((h // s, w // s, IN_CHANNELS), np.float32))
        )
    if out.shape != (h // s, w // s, IN_CHANNELS) or out.dtype != np.float32:
        raise ValueError(f"out must be float32 {(h // s, w // s, IN_CHANNELS)}, got {out.dtype} {out.shape}")
    _fill_input(rgb, depth, s, np.float32(1.0 / (255.0 * s * s)), np.float32(DEPTH_SCALE), out)
    return out.transpose(2, 0, 1)


@numba.njit(cache=True)
def _fill_input(
    rgb: np.ndarray, depth: np.ndarray, s: int, scale: np.float32, depth_scale: np.float32, out: np.ndarray
) -> None:
    half = np.float32(0.5)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            red, green, blue = 0, 0, 0
            for a in range(i * s, i * s + s):
                for b in range(j * s, j * s + s):
                    red += rgb[a, b, 0]
                    green += rgb[a, b, 1]
                    blue += rgb[a, b, 2]
            out[i, j, 0] = np.float32(red) * scale - half
            out[i, j, 1] = np.float32(green) * scale - half
            out[i, j, 2] = np.float32(blue) * scale - half
            z = depth[i * s, j * s]
            valid = np.isfinite(z) and z > 0.0
            out[i, j, 3] = z / depth_scale if valid else np.float32(0.0)
            out[i, j, 4] = np.float32(1.0) if valid else np.float32(0.0)


def _float32_on_one_dnn(x: torch.Tensor) -> bool:
    """Whether ``x`` takes the oneDNN float32 path (not under ``torch.autocast``, on the CPU)."""
    return (
        x.dtype == torch.float32
        and x.is_cpu
        and torch.backends.mkldnn.is_available()
        and not torch.is_autocast_enabled("cpu")
    )


class OneDnnConv2d(nn.Conv2d):
    """A float32 CPU convolution that always runs through oneDNN (``torch.mkldnn_convolution``).

    ``torch.conv2d`` picks its CPU algorithm by shape: for a single frame, the dilated 3×3
    convolutions of the 1/8 stage (64 channels, 20×15) went to im2col + GEMM, for two frames or
    more to oneDNN. The two round differently (1e-5 in the logits), so a frame's segments depended
    on how many frames were segmented with it, and im2col was slower (3.1 against 2.7 ms a frame
    for the whole network on one thread, ``benchmarks/bench_mapping.py``). Under ``torch.autocast``,
    without oneDNN, or off the CPU, it is a plain ``nn.Conv2d``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not _float32_on_one_dnn(x):
            return super().forward(x)
        return torch.mkldnn_convolution(
            x, self.weight, self.bias, self.padding, self.stride, self.dilation, self.groups
        )


def upsampled_kernel(weight: torch.Tensor) -> torch.Tensor:
    """The (cin, cout, 4, 4) kernel of a stride-2 transposed convolution (padding 1) equal to a 3×3
    convolution (padding 1, ``weight`` (cout, cin, 3, 3)) of the input upsampled 2× (nearest).

    Along each axis, output 2m reads upsampled cells 2m - 1, 2m, 2m + 1, i.e. input cells m - 1, m,
    m: taps w0 and w1 + w2; output 2m + 1 reads input m, m, m + 1: taps w0 + w1 and w2. The
    transposed convolution's output 2i - 1 + k takes input i times tap k, so k = 0..3 is w2,
    w1 + w2, w0 + w1, w0; cells beyond the border are zeros in both.
    """

    def taps(w: torch.Tensor, axis: int) -> torch.Tensor:
        w0, w1, w2 = w.unbind(axis)
        return torch.stack([w2, w1 + w2, w0 + w1, w0], dim=axis)

    return taps(taps(weight, 2), 3).transpose(0, 1).contiguous()


class UpConv(nn.Module):
    """The inference form of an :class:`UpBlock` (batch norm folded into ``conv``), with the same
    output to float rounding: the 3×3 convolution of the concatenation is split by input channel
    into one of ``skip`` and one of the upsampled ``coarse`` features, and the latter runs on the
    coarse grid as a stride-2 transposed convolution (:func:`upsampled_kernel`): 16 multiplies
    per coarse cell instead of 9 for each of its 4 upsampled cells. Used where the skip is exactly
    twice the coarse size, in float32 through oneDNN (:class:`OneDnnConv2d`'s conditions);
    otherwise the concatenation is convolved as in training."""

    def __init__(self, conv: OneDnnConv2d, coarse_channels: int) -> None:
        super().__init__()
        if conv.kernel_size != (3, 3) or conv.padding != (1, 1) or conv.stride != (1, 1) or conv.dilation != (1, 1):
            raise ValueError(f"UpConv folds a 3x3 stride-1 convolution with padding 1, got {conv}")
        self.conv = conv
        self.coarse_channels = coarse_channels
        weight = conv.weight.detach()
        self.register_buffer("skip_weight", weight[:, coarse_channels:].contiguous())
        self.register_buffer("coarse_weight", upsampled_kernel(weight[:, :coarse_channels]))

    def forward(self, coarse: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        doubled = skip.shape[2:] == (2 * coarse.shape[2], 2 * coarse.shape[3])
        if not (doubled and _float32_on_one_dnn(coarse)):
            return self.conv(torch.cat([functional.interpolate(coarse, size=skip.shape[2:]), skip], 1)).relu_()
        out = torch.mkldnn_convolution(skip, self.skip_weight, self.conv.bias, (1, 1), (1, 1), (1, 1), 1)
        out += functional.conv_transpose2d(coarse, self.coarse_weight, stride=2, padding=1)
        return out.relu_()


def fold_batch_norm(model: SegNet) -> nn.Module:
    """An inference copy of ``model`` with every Conv-BN pair fused (same outputs to rounding),
    every convolution a :class:`OneDnnConv2d` and every decoder step an :class:`UpConv`."""
    fused = copy.deepcopy(model).eval()
    for name, child in list(fused.named_children()):
        setattr(fused, name, _fold(child))
    return fused


def _fold(module: nn.Module) -> nn.Module:
    if isinstance(module, UpBlock):
        return UpConv(_one_dnn(torch.nn.utils.fusion.fuse_conv_bn_eval(module[0], module[1])), module.coarse_channels)
    if isinstance(module, nn.Sequential) and len(module) == 3 and isinstance(module[1], nn.BatchNorm2d):
        return nn.Sequential(_one_dnn(torch.nn.utils.fusion.fuse_conv_bn_eval(module[0], module[1])), module[2])
    if isinstance(module, nn.Sequential):
        return nn.Sequential(*(_fold(m) for m in module))
    if isinstance(module, nn.Conv2d):
        return _one_dnn(module)
    return module


def _one_dnn(conv: nn.Conv2d) -> OneDnnConv2d:
    conv.__class__ = OneDnnConv2d  # same parameters and attributes, another forward
    return conv
