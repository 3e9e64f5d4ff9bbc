// Backward-data of the folded stem (kernels/s2d.py, s2d=1): the input gradient computed
// on 2x2 blocks of pixels, then copied back in place (the odd last row and column too).
// RUN: %convgen --operation conv2d_bwd_data -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=3 -out_channels=24 -in_h=13 -in_w=11 -fil_h=7 -fil_w=7 -conv_stride_h=2 -conv_stride_w=2 --padding_h=3 --padding_w=3 -perf_config s2d=1 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
