// The 7x7 stride-2 stem on 3 channels folded into a stride-1 problem (kernels/s2d.py):
// s2d=1 a 4x4 filter on 16 channels, s2d=2 a 4x1 filter on 64 (the columns folded in).
// 13x11 does not fill the 2x2 blocks; the filter's zero row and column sit in front.
// RUN: %convgen --operation conv2d -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=3 -out_channels=24 -in_h=13 -in_w=11 -fil_h=7 -fil_w=7 -conv_stride_h=2 -conv_stride_w=2 --padding_h=3 --padding_w=3 -perf_config s2d=1 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// RUN: %convgen --operation conv2d -t bf16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=3 -out_channels=24 -in_h=13 -in_w=11 -fil_h=7 -fil_w=7 -conv_stride_h=2 -conv_stride_w=2 --padding_h=3 --padding_w=3 -perf_config s2d=2 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
