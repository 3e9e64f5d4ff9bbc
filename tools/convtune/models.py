"""Convolution layers of public networks, for the suite's model tests, the benchmarks and
the selector's training set.

Each layer: (in_channels, out_channels, input H=W, filter H=W, stride, padding, groups),
and an eighth entry, the dilation, where it is not 1; convtune.commands.layer_args spells one as
convgen flags.
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


# VGG-16 (torchvision vgg16): every distinct 3x3 layer.
VGG16 = [
    (3, 64, 224, 3, 1, 1, 1), (64, 64, 224, 3, 1, 1, 1), (64, 128, 112, 3, 1, 1, 1),
    (128, 128, 112, 3, 1, 1, 1), (128, 256, 56, 3, 1, 1, 1), (256, 256, 56, 3, 1, 1, 1),
    (256, 512, 28, 3, 1, 1, 1), (512, 512, 28, 3, 1, 1, 1), (512, 512, 14, 3, 1, 1, 1),
]

# U-Net (Ronneberger et al. 2015, as most reimplementations build it: padded 3x3 so sizes
# halve cleanly) on a 256x256 RGB image: the encoder, the decoder's 3x3 layers after each
# concatenation, and the 1x1 classifier of 2 classes.
UNET = [
    (3, 64, 256, 3, 1, 1, 1), (64, 64, 256, 3, 1, 1, 1), (64, 128, 128, 3, 1, 1, 1),
    (128, 128, 128, 3, 1, 1, 1), (128, 256, 64, 3, 1, 1, 1), (256, 256, 64, 3, 1, 1, 1),
    (256, 512, 32, 3, 1, 1, 1), (512, 512, 32, 3, 1, 1, 1), (512, 1024, 16, 3, 1, 1, 1),
    (1024, 1024, 16, 3, 1, 1, 1), (1024, 512, 32, 3, 1, 1, 1), (512, 256, 64, 3, 1, 1, 1),
    (256, 128, 128, 3, 1, 1, 1), (128, 64, 256, 3, 1, 1, 1), (64, 2, 256, 1, 1, 0, 1),
]

# EfficientNet-B0 (torchvision efficientnet_b0): the stem, every MBConv's expansion,
# depthwise 3x3/5x5 (stride 1 and 2) and projection, two squeeze-excitation 1x1s on a
# 1x1 image, and the head.
EFFICIENTNET_B0 = [
    (3, 32, 224, 3, 2, 1, 1), (32, 32, 112, 3, 1, 1, 32), (32, 8, 1, 1, 1, 0, 1),
    (8, 32, 1, 1, 1, 0, 1), (32, 16, 112, 1, 1, 0, 1), (16, 96, 112, 1, 1, 0, 1),
    (96, 96, 112, 3, 2, 1, 96), (96, 24, 56, 1, 1, 0, 1), (24, 144, 56, 1, 1, 0, 1),
    (144, 144, 56, 3, 1, 1, 144), (144, 24, 56, 1, 1, 0, 1), (144, 144, 56, 5, 2, 2, 144),
    (144, 40, 28, 1, 1, 0, 1), (40, 240, 28, 1, 1, 0, 1), (240, 240, 28, 5, 1, 2, 240),
    (240, 40, 28, 1, 1, 0, 1), (240, 240, 28, 3, 2, 1, 240), (240, 80, 14, 1, 1, 0, 1),
    (80, 480, 14, 1, 1, 0, 1), (480, 480, 14, 3, 1, 1, 480), (480, 80, 14, 1, 1, 0, 1),
    (480, 480, 14, 5, 1, 2, 480), (480, 112, 14, 1, 1, 0, 1), (112, 672, 14, 1, 1, 0, 1),
    (672, 672, 14, 5, 1, 2, 672), (672, 112, 14, 1, 1, 0, 1), (672, 672, 14, 5, 2, 2, 672),
    (672, 192, 7, 1, 1, 0, 1), (192, 1152, 7, 1, 1, 0, 1), (1152, 1152, 7, 5, 1, 2, 1152),
    (1152, 192, 7, 1, 1, 0, 1), (1152, 1152, 7, 3, 1, 1, 1152), (1152, 320, 7, 1, 1, 0, 1),
    (320, 1280, 7, 1, 1, 0, 1),
]

# ViT-B/16 (torchvision vit_b_16): the patch embedding, a 16x16 stride-16 filter.
VIT_B16 = [(3, 768, 224, 16, 16, 0, 1)]

# DeepLabV3 (torchvision deeplabv3_resnet50, output stride 8, a 512x512 image): the
# dilated 3x3 layers of ResNet-50's last two stages and the ASPP's three rates.
DEEPLABV3 = [
    (256, 256, 64, 3, 1, 2, 1, 2), (512, 512, 64, 3, 1, 4, 1, 4),
    (2048, 256, 64, 3, 1, 12, 1, 12), (2048, 256, 64, 3, 1, 24, 1, 24),
    (2048, 256, 64, 3, 1, 36, 1, 36),
]

# Inception-v3 (torchvision inception_v3, a 299x299 image): the stem's 3x3s and 1x1 on odd
# sizes, and a sample of the Mixed blocks' square filters (1x1, 3x3, 5x5; their 1x7, 7x1,
# 1x3 and 3x1 ones are not square and left out) at 35x35, 17x17 and 8x8.
INCEPTION_V3 = [
    (3, 32, 299, 3, 2, 0, 1), (32, 32, 149, 3, 1, 0, 1), (32, 64, 147, 3, 1, 1, 1),
    (64, 80, 73, 1, 1, 0, 1), (80, 192, 71, 3, 1, 0, 1), (192, 64, 35, 1, 1, 0, 1),
    (192, 48, 35, 1, 1, 0, 1), (48, 64, 35, 5, 1, 2, 1), (64, 96, 35, 3, 1, 1, 1),
    (96, 96, 35, 3, 1, 1, 1), (288, 384, 35, 3, 2, 0, 1), (96, 96, 35, 3, 2, 0, 1),
    (768, 192, 17, 1, 1, 0, 1), (192, 320, 17, 3, 2, 0, 1), (1280, 320, 8, 1, 1, 0, 1),
    (448, 384, 8, 3, 1, 1, 1), (2048, 448, 8, 1, 1, 0, 1),
]

# DenseNet-121 (torchvision densenet121, growth 32): a sample of each dense block's 1x1
# bottlenecks to 128 channels (input widths of 64 + 32 per layer before it) and its 3x3
# 128->32 (the transitions are ResNet-50's shapes).
DENSENET121 = [
    (64, 128, 56, 1, 1, 0, 1), (160, 128, 56, 1, 1, 0, 1), (128, 32, 56, 3, 1, 1, 1),
    (128, 128, 28, 1, 1, 0, 1), (352, 128, 28, 1, 1, 0, 1), (128, 32, 28, 3, 1, 1, 1),
    (256, 128, 14, 1, 1, 0, 1), (608, 128, 14, 1, 1, 0, 1), (992, 128, 14, 1, 1, 0, 1),
    (128, 32, 14, 3, 1, 1, 1), (544, 128, 7, 1, 1, 0, 1), (992, 128, 7, 1, 1, 0, 1),
    (128, 32, 7, 3, 1, 1, 1),
]

# ConvNeXt-T (torchvision convnext_tiny): the 4x4 stride-4 patch stem, the depthwise 7x7 of
# each stage and the 2x2 stride-2 downsampling between stages (its pointwise layers are
# Linear, not conv).
CONVNEXT_T = [
    (3, 96, 224, 4, 4, 0, 1), (96, 96, 56, 7, 1, 3, 96), (96, 192, 56, 2, 2, 0, 1),
    (192, 192, 28, 7, 1, 3, 192), (192, 384, 28, 2, 2, 0, 1), (384, 384, 14, 7, 1, 3, 384),
    (384, 768, 14, 2, 2, 0, 1), (768, 768, 7, 7, 1, 3, 768),
]

# AlexNet (torchvision alexnet): the 11x11 stride-4 stem, a 5x5, and 3x3s on 13x13.
ALEXNET = [
    (3, 64, 224, 11, 4, 2, 1), (64, 192, 27, 5, 1, 2, 1), (192, 384, 13, 3, 1, 1, 1),
    (384, 256, 13, 3, 1, 1, 1), (256, 256, 13, 3, 1, 1, 1),
]

# SqueezeNet 1.1 (torchvision squeezenet1_1): the stem, a sample of the Fire modules'
# squeeze 1x1s and expand 1x1/3x3s on 55x55, 27x27 and 13x13 (few channels, odd sizes),
# and the 1x1 classifier of 1000 classes.
SQUEEZENET1_1 = [
    (3, 64, 224, 3, 2, 0, 1), (64, 16, 55, 1, 1, 0, 1), (16, 64, 55, 1, 1, 0, 1),
    (16, 64, 55, 3, 1, 1, 1), (128, 32, 27, 1, 1, 0, 1), (32, 128, 27, 3, 1, 1, 1),
    (256, 48, 13, 1, 1, 0, 1), (48, 192, 13, 3, 1, 1, 1), (384, 64, 13, 1, 1, 0, 1),
    (64, 256, 13, 3, 1, 1, 1), (512, 1000, 13, 1, 1, 0, 1),
]

# ResNet-18 (torchvision resnet18): the strided 3x3s and 1x1 downsamples between stages
# (its other layers are ResNet-50's shapes).
RESNET18 = [
    (64, 128, 56, 3, 2, 1, 1), (64, 128, 56, 1, 2, 0, 1), (128, 256, 28, 3, 2, 1, 1),
    (128, 256, 28, 1, 2, 0, 1), (256, 512, 14, 3, 2, 1, 1), (256, 512, 14, 1, 2, 0, 1),
]

# ResNeXt-50 32x4d (torchvision resnext50_32x4d): the grouped 3x3s (32 groups of 4 to 32
# channels) and three of the 1x1s of widths ResNet-50 does not have.
RESNEXT50 = [
    (128, 128, 56, 3, 1, 1, 32), (256, 256, 56, 3, 2, 1, 32), (256, 256, 28, 3, 1, 1, 32),
    (512, 512, 28, 3, 2, 1, 32), (512, 512, 14, 3, 1, 1, 32), (1024, 1024, 14, 3, 2, 1, 32),
    (1024, 1024, 7, 3, 1, 1, 32), (64, 128, 56, 1, 1, 0, 1), (256, 256, 56, 1, 1, 0, 1),
    (2048, 1024, 7, 1, 1, 0, 1),
]

# ShuffleNetV2 x1.0 (torchvision shufflenet_v2_x1_0): every distinct layer. Its branches
# carry 24, 58, 116 and 232 channels, none a multiple of 16: strides a pointer kernel
# cannot prove 16-aligned (selector.py's scalar_loads).
SHUFFLENET_V2 = [
    (3, 24, 224, 3, 2, 1, 1), (24, 24, 56, 3, 2, 1, 24), (24, 58, 28, 1, 1, 0, 1),
    (24, 58, 56, 1, 1, 0, 1), (58, 58, 56, 3, 2, 1, 58), (58, 58, 28, 1, 1, 0, 1),
    (58, 58, 28, 3, 1, 1, 58), (116, 116, 28, 3, 2, 1, 116), (116, 116, 14, 1, 1, 0, 1),
    (116, 116, 28, 1, 1, 0, 1), (116, 116, 14, 3, 1, 1, 116), (232, 232, 14, 3, 2, 1, 232),
    (232, 232, 7, 1, 1, 0, 1), (232, 232, 14, 1, 1, 0, 1), (232, 232, 7, 3, 1, 1, 232),
    (464, 1024, 7, 1, 1, 0, 1),
]

# MobileNetV3-Large (torchvision mobilenet_v3_large): the stem, the expansion and
# projection 1x1s of its blocks but the first's 16->16 (widths of 16 to 960 channels, 24,
# 40, 72, 120, 184 and 200 among them, which 16 does not divide), and three of its
# depthwise 3x3/5x5s; not the squeeze-excitation 1x1s on 1x1 images.
MOBILENET_V3 = [
    (3, 16, 224, 3, 2, 1, 1), (16, 64, 112, 1, 1, 0, 1), (64, 24, 56, 1, 1, 0, 1),
    (24, 72, 56, 1, 1, 0, 1), (72, 24, 56, 1, 1, 0, 1), (72, 72, 56, 5, 2, 2, 72),
    (72, 40, 28, 1, 1, 0, 1), (40, 120, 28, 1, 1, 0, 1), (120, 40, 28, 1, 1, 0, 1),
    (120, 120, 28, 5, 1, 2, 120), (40, 240, 28, 1, 1, 0, 1), (240, 80, 14, 1, 1, 0, 1),
    (80, 200, 14, 1, 1, 0, 1), (200, 80, 14, 1, 1, 0, 1), (200, 200, 14, 3, 1, 1, 200),
    (80, 184, 14, 1, 1, 0, 1), (184, 80, 14, 1, 1, 0, 1), (80, 480, 14, 1, 1, 0, 1),
    (480, 112, 14, 1, 1, 0, 1), (112, 672, 14, 1, 1, 0, 1), (672, 112, 14, 1, 1, 0, 1),
    (672, 160, 7, 1, 1, 0, 1), (160, 960, 7, 1, 1, 0, 1), (960, 160, 7, 1, 1, 0, 1),
]

# RegNetY-400MF (torchvision regnet_y_400mf): stage widths 48, 104, 208 and 440, 8
# channels a group in every 3x3 (groups = width / 8), each stage's first block strided in
# its 3x3 and its 1x1 shortcut; not the stem (MobileNetV2's) nor the squeeze-excitation
# 1x1s on 1x1 images. 104 and 440 are multiples of 8, not of 16 (selector.py's
# scalar_loads), and groups of 8 channels make a GEMM of 8 (1x1) or 72 (3x3) deep.
REGNET_Y_400MF = [
    (32, 48, 112, 1, 1, 0, 1), (48, 48, 112, 3, 2, 1, 6), (48, 48, 56, 1, 1, 0, 1),
    (32, 48, 112, 1, 2, 0, 1), (48, 104, 56, 1, 1, 0, 1), (104, 104, 56, 3, 2, 1, 13),
    (104, 104, 28, 1, 1, 0, 1), (48, 104, 56, 1, 2, 0, 1), (104, 104, 28, 3, 1, 1, 13),
    (104, 208, 28, 1, 1, 0, 1), (208, 208, 28, 3, 2, 1, 26), (208, 208, 14, 1, 1, 0, 1),
    (104, 208, 28, 1, 2, 0, 1), (208, 208, 14, 3, 1, 1, 26), (208, 440, 14, 1, 1, 0, 1),
    (440, 440, 14, 3, 2, 1, 55), (440, 440, 7, 1, 1, 0, 1), (208, 440, 14, 1, 2, 0, 1),
    (440, 440, 7, 3, 1, 1, 55),
]

# The networks after FIRST_NETWORKS, for shapes the tables above lack (each
# table holds only its layers that no table above has; depthwise layers and the
# squeeze-excitation 1x1s on a 1x1 image are left out). Taken from torchvision 0.28's
# models by a forward hook on every Conv2d of a 224x224 image.

# ConvNeXt-B (torchvision convnext_base): the 4x4 stride-4 stem of 128 channels and the
# 2x2 stride-2 downsampling between stages, 128->256 to 512->1024 (ConvNeXt-T's are
# 96->192 to 384->768).
CONVNEXT_B = [
    (3, 128, 224, 4, 4, 0, 1), (128, 256, 56, 2, 2, 0, 1), (256, 512, 28, 2, 2, 0, 1),
    (512, 1024, 14, 2, 2, 0, 1),
]

# Wide ResNet-50-2 (torchvision wide_resnet50_2): ResNet-50 with every bottleneck's 3x3
# twice as wide, dense 3x3s of 128 to 1024 channels and the 1x1s around them.
WIDE_RESNET50_2 = [
    (128, 128, 56, 3, 1, 1, 1), (128, 256, 56, 1, 1, 0, 1), (256, 256, 56, 3, 2, 1, 1),
    (256, 512, 28, 1, 1, 0, 1), (256, 256, 28, 3, 1, 1, 1), (512, 512, 28, 1, 1, 0, 1),
    (512, 512, 28, 3, 2, 1, 1), (512, 1024, 14, 1, 1, 0, 1), (1024, 1024, 14, 1, 1, 0, 1),
    (1024, 1024, 14, 3, 2, 1, 1), (1024, 2048, 7, 1, 1, 0, 1), (1024, 1024, 7, 3, 1, 1, 1),
]

# EfficientNetV2-S (torchvision efficientnet_v2_s): the fused-MBConv stages' dense 3x3s
# (24 to 192 channels, strides 1 and 2) and the 1x1s of the MBConv stages.
EFFICIENTNET_V2_S = [
    (24, 24, 112, 3, 1, 1, 1), (24, 96, 112, 3, 2, 1, 1), (96, 48, 56, 1, 1, 0, 1),
    (48, 192, 56, 3, 1, 1, 1), (192, 48, 56, 1, 1, 0, 1), (48, 192, 56, 3, 2, 1, 1),
    (192, 64, 28, 1, 1, 0, 1), (64, 256, 28, 3, 1, 1, 1), (256, 64, 28, 1, 1, 0, 1),
    (64, 256, 28, 1, 1, 0, 1), (128, 512, 14, 1, 1, 0, 1), (512, 128, 14, 1, 1, 0, 1),
    (128, 768, 14, 1, 1, 0, 1), (768, 160, 14, 1, 1, 0, 1), (160, 960, 14, 1, 1, 0, 1),
    (960, 160, 14, 1, 1, 0, 1), (960, 256, 7, 1, 1, 0, 1), (256, 1536, 7, 1, 1, 0, 1),
    (1536, 256, 7, 1, 1, 0, 1), (256, 1280, 7, 1, 1, 0, 1),
]

# GoogLeNet (torchvision googlenet): the Inception modules' 1x1s and 3x3s on 28x28, 14x14
# and 7x7, of irregular widths (208, 224, 288, 528, 832 channels; 16 and 24 in the
# 3x3 branches' reductions).
GOOGLENET = [
    (64, 192, 56, 3, 1, 1, 1), (192, 96, 28, 1, 1, 0, 1), (96, 128, 28, 3, 1, 1, 1),
    (192, 16, 28, 1, 1, 0, 1), (16, 32, 28, 3, 1, 1, 1), (192, 32, 28, 1, 1, 0, 1),
    (256, 128, 28, 1, 1, 0, 1), (128, 192, 28, 3, 1, 1, 1), (256, 32, 28, 1, 1, 0, 1),
    (32, 96, 28, 3, 1, 1, 1), (480, 192, 14, 1, 1, 0, 1), (480, 96, 14, 1, 1, 0, 1),
    (96, 208, 14, 3, 1, 1, 1), (480, 16, 14, 1, 1, 0, 1), (16, 48, 14, 3, 1, 1, 1),
    (480, 64, 14, 1, 1, 0, 1), (512, 160, 14, 1, 1, 0, 1), (512, 112, 14, 1, 1, 0, 1),
    (112, 224, 14, 3, 1, 1, 1), (512, 24, 14, 1, 1, 0, 1), (24, 64, 14, 3, 1, 1, 1),
    (512, 64, 14, 1, 1, 0, 1), (128, 256, 14, 3, 1, 1, 1), (512, 144, 14, 1, 1, 0, 1),
    (144, 288, 14, 3, 1, 1, 1), (512, 32, 14, 1, 1, 0, 1), (32, 64, 14, 3, 1, 1, 1),
    (528, 256, 14, 1, 1, 0, 1), (528, 160, 14, 1, 1, 0, 1), (160, 320, 14, 3, 1, 1, 1),
    (528, 32, 14, 1, 1, 0, 1), (32, 128, 14, 3, 1, 1, 1), (528, 128, 14, 1, 1, 0, 1),
    (832, 256, 7, 1, 1, 0, 1), (832, 160, 7, 1, 1, 0, 1), (160, 320, 7, 3, 1, 1, 1),
    (832, 32, 7, 1, 1, 0, 1), (32, 128, 7, 3, 1, 1, 1), (832, 128, 7, 1, 1, 0, 1),
    (832, 384, 7, 1, 1, 0, 1), (832, 192, 7, 1, 1, 0, 1), (192, 384, 7, 3, 1, 1, 1),
    (832, 48, 7, 1, 1, 0, 1), (48, 128, 7, 3, 1, 1, 1),
]

NETWORKS = {"resnet50": RESNET50, "mobilenet_v2": MOBILENET_V2, "vgg16": VGG16, "unet": UNET,
            "efficientnet_b0": EFFICIENTNET_B0, "vit_b16": VIT_B16, "deeplabv3": DEEPLABV3,
            "inception_v3": INCEPTION_V3, "densenet121": DENSENET121, "convnext_t": CONVNEXT_T,
            "alexnet": ALEXNET, "squeezenet1_1": SQUEEZENET1_1, "resnet18": RESNET18,
            "resnext50": RESNEXT50, "shufflenet_v2": SHUFFLENET_V2, "mobilenet_v3": MOBILENET_V3,
            "regnet_y_400mf": REGNET_Y_400MF, "convnext_b": CONVNEXT_B,
            "wide_resnet50_2": WIDE_RESNET50_2, "efficientnet_v2_s": EFFICIENTNET_V2_S,
            "googlenet": GOOGLENET}

# The networks the suite benchmark's configuration list (suite_set) and the extra-batch
# lists (extra_batches_set) were made from: the four added since widen the selector's
# training set alone, so those lists, and what was measured from them, stay as they were.
FIRST_NETWORKS = tuple(NETWORKS)[:tuple(NETWORKS).index("regnet_y_400mf") + 1]


def dilation(layer) -> int:
    return layer[7] if len(layer) > 7 else 1


def layer_name(layer) -> str:
    c, k, hw, f, s, pad, g = layer[:7]
    name = f"c{c}_k{k}_{hw}x{hw}_{f}x{f}"
    if s > 1:
        name += f"_stride{s}"
    if g > 1:
        name += f"_g{g}"
    if dilation(layer) > 1:
        name += f"_dil{dilation(layer)}"
    return name

# The conv benchmark's default set (benchmarks/bench_conv.py --layers issue): the seven
# layers the fairness issue measured against cuDNN, 1x1, 3x3 and 7x7, strided or not.
CONV_BENCH_LAYERS = [
    (64, 64, 56, 1, 1, 0, 1), (64, 64, 56, 3, 1, 1, 1), (256, 128, 56, 1, 2, 0, 1),
    (128, 128, 28, 3, 1, 1, 1), (256, 256, 14, 3, 1, 1, 1), (3, 64, 224, 7, 2, 3, 1),
    (1024, 2048, 14, 1, 2, 0, 1),
]


# The selector's training set (convgen tune --layers selector; docs/config-selection.md):
# every layer of the networks above, ResNet-50's at batch 1, 32 and 256 in both 16-bit
# types, the others' in f16 at one batch each, taken in turn from SELECTOR_BATCHES so the
# set spans 1 to 256. (ResNet-101's layers are ResNet-50's shapes.)
RESNET50_BATCHES = (1, 32, 256)
SELECTOR_BATCHES = (1, 8, 32, 128, 256)
# A layer's batch is halved until its largest tensor has at most this many elements: the
# time of a tuning run goes to problems that differ, not to a few huge ones.
SELECTOR_MAX_ELEMENTS = 2**28


def _fit_batch(layer, batch: int) -> int:
    c, k, hw, f, s, pad = layer[:6]
    out = (hw + 2 * pad - dilation(layer) * (f - 1) - 1) // s + 1
    while batch > 1 and batch * max(c * hw * hw, k * out * out) > SELECTOR_MAX_ELEMENTS:
        batch //= 2
    return batch


def _round_robin(queues: list[list]) -> list:
    """One item of each queue in turn, so that a run stopped early has some of each."""
    out = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def selector_set() -> list[tuple]:
    """(network, layer, batch, type) of every problem shape, in the order a tuning run
    should take them: round-robin over the networks, so a run stopped early has some of
    each."""
    queues = []
    for net, layers in NETWORKS.items():
        q = []
        for i, layer in enumerate(layers):
            if net == "resnet50":
                q += [(net, layer, b, t) for b in RESNET50_BATCHES for t in ("f16", "bf16")]
            else:
                q.append((net, layer, _fit_batch(layer, SELECTOR_BATCHES[i % len(SELECTOR_BATCHES)]),
                          "f16"))
        queues.append(q)
    return _round_robin(queues)


# The suite benchmark's configuration list (benchmarks/bench_suite.py --configs N): small
# real problems, every layer of FIRST_NETWORKS at batch 1 whose useful work is at most SUITE_MAX_FLOPS,
# in every direction, 16- and 32-bit type and channel order, taken round-robin over the
# networks so the first N span them all.
SUITE_MAX_FLOPS = 2**32
SUITE_TYPES = ("f16", "bf16", "f32")
SUITE_LAYOUTS = (("nhwc", "kyxc", "nhwk"), ("nchw", "kcyx", "nkhw"))


def _flops(layer, batch: int) -> int:
    c, k, hw, f, s, pad, g = layer[:7]
    out = (hw + 2 * pad - dilation(layer) * (f - 1) - 1) // s + 1
    return 2 * batch * k * (c // g) * out * out * f * f


def suite_set(count: int) -> list[tuple]:
    """(network, layer, direction, type, (input, filter, output) layouts) of the first
    `count` configurations."""
    queues = []
    for net in FIRST_NETWORKS:
        queues.append([(net, layer, d, t, lay) for t in SUITE_TYPES for lay in SUITE_LAYOUTS
                       for layer in NETWORKS[net] if _flops(layer, 1) <= SUITE_MAX_FLOPS
                       for d in ("fwd", "bwd_data", "bwd_weight")])
    return _round_robin(queues)[:count]


def extra_batches_set(keep, batches) -> list[tuple]:
    """(network, layer, batch, type) of every layer that `keep(layer)` takes, at each of
    `batches` (halved as _fit_batch does) where selector_set does not have it at that
    batch; f16, round-robin over FIRST_NETWORKS."""
    have = {(tuple(layer[:7]), batch) for _, layer, batch, _ in selector_set()}
    queues = []
    for net in FIRST_NETWORKS:
        q = []
        for layer in (layer for layer in NETWORKS[net] if keep(layer)):
            for batch in batches:
                key = (tuple(layer[:7]), _fit_batch(layer, batch))
                if key not in have:
                    have.add(key)
                    q.append((net, layer, key[1], "f16"))
        queues.append(q)
    return _round_robin(queues)


# Batches the selector's training set adds for the layers whose rows a pointer kernel
# cannot prove 16-aligned (tuning/unaligned-1x1-batches.lines): there the choice between a
# pointer and a descriptor kernel is the model's worst (docs/config-selection.md).
UNALIGNED_EXTRA_BATCHES = (32, 256)


def unaligned_1x1_set() -> list[tuple]:
    """Every ungrouped 1x1 layer with a channel count 16 does not divide, at each of
    UNALIGNED_EXTRA_BATCHES (extra_batches_set)."""
    def unaligned_1x1(layer) -> bool:
        c, k, _, f, _, _, g = layer[:7]
        return f == 1 and g == 1 and bool(c % 16 or k % 16)
    return extra_batches_set(unaligned_1x1, UNALIGNED_EXTRA_BATCHES)


# Batches added for bwd_weight of the wide 3x3 layers (tuning/wide-3x3-bwd-weight.lines):
# there the stream-K configs are the selector's lowest picks, and their worth is not
# monotone in the batch (512->512 on 7x7: 0.90 of the best at batch 1, 0.63 at 32, 0.99
# at 256), so the batches between the set's are the data it lacks.
WIDE_3X3_CHANNELS = 256
WIDE_3X3_BATCHES = (8, 64)


def wide_3x3_set() -> list[tuple]:
    """Every ungrouped 3x3 layer of at least WIDE_3X3_CHANNELS input and output channels,
    at each of WIDE_3X3_BATCHES (extra_batches_set)."""
    def wide_3x3(layer) -> bool:
        c, k, _, f, _, _, g = layer[:7]
        return f == 3 and g == 1 and min(c, k) >= WIDE_3X3_CHANNELS
    return extra_batches_set(wide_3x3, WIDE_3X3_BATCHES)


# Batches added for bwd_weight of the grouped layers (tuning/grouped-bwd-weight.lines):
# ResNeXt-50's grouped 3x3 bwd_weight was among the H100's lowest picks while the data held
# 41 grouped bwd_weight problems. The batches the selector set spreads
# over its layers (8, 32, 128) come after five it never uses, so a list cut short holds
# mostly new batches; they still add problems, as the set takes each layer at one batch.
GROUPED_BATCHES = (64, 16, 192, 4, 96, 8, 32, 128, 2, 48, 24)


def grouped_bwd_weight_set() -> list[tuple]:
    """(network, layer, batch, type) of every layer whose groups hold more than one
    channel (grouped, not depthwise), at each of GROUPED_BATCHES in turn (halved as
    _fit_batch does; a (layer, batch) met before, a repeated layer or a batch halved onto
    another, is dropped), less what listed_problems holds in bwd_weight; f16, the networks
    in table order within a batch. tuning/grouped-bwd-weight.lines left out what was
    measured when it was written as well."""
    listed = listed_problems()
    seen = set()
    out = []
    for batch in GROUPED_BATCHES:
        for net, layers in NETWORKS.items():
            for layer in layers:
                c, g = layer[0], layer[6]
                key = (tuple(layer), _fit_batch(layer, batch))
                if g > 1 and c // g > 1 and key not in seen and (*key, "bwd_weight") not in listed:
                    seen.add(key)
                    out.append((net, layer, key[1], "f16"))
    return out


def listed_problems() -> set[tuple]:
    """(layer, batch, direction) of every problem the lists above give the tuning runs
    (grouped_bwd_weight_set excepted: it is made from what this leaves out):
    the selector set and the unaligned 1x1 batches in all three directions, the wide 3x3
    batches in bwd_weight alone (tuning/wide-3x3-bwd-weight.lines)."""
    out = set()
    for problems, directions in ((selector_set() + unaligned_1x1_set(), ("fwd", "bwd_data", "bwd_weight")),
                                 (wide_3x3_set(), ("bwd_weight",))):
        out |= {(tuple(layer), batch, d) for _, layer, batch, _ in problems for d in directions}
    return out


def neighbour_batches_set(weak, have: set[tuple]) -> list[tuple]:
    """(network, layer, direction, batch) at half and twice each batch of `weak`, an
    iterable of (layer, direction, batch) taken worst first (scripts/weak-picks: the
    layers where the selector's held-out picks are lowest). A batch is halved as _fit_batch
    does and kept to 1..256; one that `have` ((layer, batch, direction), as
    listed_problems gives) or an earlier entry already holds is dropped. The set adds what
    the selector lacks most: the same layer's cost at a nearby batch. Where twice the
    batch is past 256, three quarters of it stands in (256 -> 192): a weak pick at the
    cap otherwise got one neighbour, below it, and the H100's weakest (bwd_weight 2x2
    384->768 s2 at 256, stream-K best there and not at 128) needs one between. A weak
    pick whose half and twice are both held already gets three quarters and one and a
    half of its batch instead: the weakest picks stayed weak with both neighbours
    measured, and a batch between them is the nearest cost not yet known."""
    net_of = {}
    for net, layers in NETWORKS.items():
        for layer in layers:
            net_of.setdefault(tuple(layer), net)
    seen = set(have)
    out = []
    fit = lambda layer, b: _fit_batch(layer, min(max(b, 1), 256))   # noqa: E731
    for layer, direction, batch in weak:
        layer = tuple(layer)
        near = [fit(layer, b) for b in (batch // 2, batch * 2 if batch * 2 <= 256 else batch * 3 // 4)]
        if all((layer, b, direction) in have for b in near):
            near = [fit(layer, b) for b in (batch * 3 // 4, batch * 3 // 2)]
        for b in near:
            if (layer, b, direction) not in seen:
                seen.add((layer, b, direction))
                out.append((net_of[layer], layer, direction, b))
    return out


# --- benchmark sets outside the catalogue -------------------------------------------------
#
# Layers of networks the tables above do not hold and no tuning run has measured: the conv
# benchmark's `--layers untuned` (benchmarks/bench_conv.py) times the selection a user of
# such a network gets, the tuned database's entries and the selector's training having
# never seen them. They are not in NETWORKS, and tests/test_bench_conv.py checks that none
# of their shapes is in NETWORKS or in a tuning list (tuning/*.lines). Each entry: (network,
# layer, batch), the batch one that network is run at.
#
# MobileNetV1 (Howard et al. 2017) at a training batch of 256: depthwise 3x3s (stride 1 and
# 2) from 112x112 to 7x7 and the pointwise 1x1s between them. MnasNet-1.0 (torchvision
# mnasnet1_0) at batch 1, as a phone runs it: depthwise 3x3 and a strided 5x5. Xception
# (Chollet 2017, 299x299 input) at batch 32: the unpadded entry-flow 3x3 on 149x149,
# depthwise 3x3s on 147x147 and 74x74, the strided 1x1 shortcut, and the 728-channel
# middle flow.
# Stable Diffusion 1.5's UNet on a 64x64 latent at batch 4: conv_in's 4 channels, the 3x3s
# of each resolution and a decoder 3x3 after a concatenation (2560 -> 1280). YOLOv5s (v6,
# 640x640) at batch 16: the 6x6 stride-2 stem, strided 3x3s and a 1x1.
UNTUNED = (
    [("mobilenet_v1", layer, 256) for layer in (
        (32, 64, 112, 1, 1, 0, 1), (64, 64, 112, 3, 2, 1, 64), (128, 128, 56, 3, 1, 1, 128),
        (128, 256, 28, 1, 1, 0, 1), (512, 512, 14, 3, 1, 1, 512),
        (1024, 1024, 7, 3, 1, 1, 1024))]
    + [("mnasnet1_0", layer, 1) for layer in (
        (16, 48, 112, 1, 1, 0, 1), (48, 48, 112, 3, 2, 1, 48), (72, 72, 56, 3, 1, 1, 72),
        (576, 576, 14, 5, 2, 2, 576))]
    + [("xception", layer, 32) for layer in (
        (32, 64, 149, 3, 1, 0, 1), (64, 64, 147, 3, 1, 1, 64), (64, 128, 147, 1, 2, 0, 1),
        (256, 256, 74, 3, 1, 1, 256), (728, 728, 19, 3, 1, 1, 728), (728, 728, 19, 1, 1, 0, 1))]
    + [("sd15_unet", layer, 4) for layer in (
        (4, 320, 64, 3, 1, 1, 1), (320, 320, 64, 3, 1, 1, 1), (640, 640, 32, 3, 1, 1, 1),
        (1280, 1280, 16, 3, 1, 1, 1), (2560, 1280, 8, 3, 1, 1, 1))]
    + [("yolov5s", layer, 16) for layer in (
        (3, 32, 640, 6, 2, 2, 1), (32, 64, 320, 3, 2, 1, 1), (64, 32, 160, 1, 1, 0, 1),
        (256, 512, 40, 3, 2, 1, 1))]
)


# The depthwise benchmark (bench_conv.py --layers depthwise): MobileNetV2's 3x3s at batch 64
# (stride 1 and 2, 112x112 to 14x14) and ConvNeXt-T's 7x7s at batch 32.
DEPTHWISE_BENCH = (
    [("mobilenet_v2", layer, 64) for layer in (
        (32, 32, 112, 3, 1, 1, 32), (144, 144, 56, 3, 1, 1, 144), (144, 144, 56, 3, 2, 1, 144),
        (384, 384, 14, 3, 1, 1, 384))]
    + [("convnext_t", layer, 32) for layer in (
        (96, 96, 56, 7, 1, 3, 96), (384, 384, 14, 7, 1, 3, 384))]
)
