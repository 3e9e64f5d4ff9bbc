"""Convolution layers of public networks, for the suite's model tests and the benchmarks.

Each layer: (in_channels, out_channels, input H=W, filter H=W, stride, padding, groups);
cli.layer_args spells one as convgen flags.
"""

# ResNet-50 v1.5 (torchvision): every distinct conv layer shape.
RESNET50 = [
    (3, 64, 224, 7, 2, 3, 1),
    (64, 64, 56, 1, 1, 0, 1), (64, 64, 56, 3, 1, 1, 1), (64, 256, 56, 1, 1, 0, 1),
    (256, 64, 56, 1, 1, 0, 1), (256, 128, 56, 1, 1, 0, 1), (128, 128, 56, 3, 2, 1, 1),
    (128, 512, 28, 1, 1, 0, 1), (256, 512, 56, 1, 2, 0, 1), (512, 128, 28, 1, 1, 0, 1),
    (128, 128, 28, 3, 1, 1, 1), (512, 256, 28, 1, 1, 0, 1), (256, 256, 28, 3, 2, 1, 1),
    (256, 1024, 14, 1, 1, 0, 1), (512, 1024, 28, 1, 2, 0, 1), (1024, 256, 14, 1, 1, 0, 1),
    (256, 256, 14, 3, 1, 1, 1), (1024, 512, 14, 1, 1, 0, 1), (512, 512, 14, 3, 2, 1, 1),
    (512, 2048, 7, 1, 1, 0, 1), (1024, 2048, 14, 1, 2, 0, 1), (2048, 512, 7, 1, 1, 0, 1),
    (512, 512, 7, 3, 1, 1, 1),
]

# MobileNetV2 (torchvision): depthwise 3x3 (groups = channels) and the 1x1 expansions
# around them; shapes ResNet-50 does not have.
MOBILENET_V2 = [
    (3, 32, 224, 3, 2, 1, 1), (32, 32, 112, 3, 1, 1, 32), (32, 16, 112, 1, 1, 0, 1),
    (16, 96, 112, 1, 1, 0, 1), (96, 96, 112, 3, 2, 1, 96), (144, 144, 56, 3, 1, 1, 144),
    (144, 144, 56, 3, 2, 1, 144), (192, 192, 28, 3, 1, 1, 192), (384, 384, 14, 3, 1, 1, 384),
    (576, 576, 14, 3, 2, 1, 576), (960, 960, 7, 3, 1, 1, 960), (320, 1280, 7, 1, 1, 0, 1),
]


def layer_name(layer) -> str:
    c, k, hw, f, s, pad, g = layer
    name = f"c{c}_k{k}_{hw}x{hw}_{f}x{f}"
    if s > 1:
        name += f"_stride{s}"
    if g > 1:
        name += f"_g{g}"
    return name

# The conv benchmark's default set (benchmarks/bench_conv.py --layers issue): the seven
# layers the fairness issue measured against cuDNN, 1x1, 3x3 and 7x7, strided or not.
CONV_BENCH_LAYERS = [
    (64, 64, 56, 1, 1, 0, 1), (64, 64, 56, 3, 1, 1, 1), (256, 128, 56, 1, 2, 0, 1),
    (128, 128, 28, 3, 1, 1, 1), (256, 256, 14, 3, 1, 1, 1), (3, 64, 224, 7, 2, 3, 1),
    (1024, 2048, 14, 1, 2, 0, 1),
]
