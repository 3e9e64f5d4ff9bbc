// Depthwise 5x5 at stride 2 on odd sizes (the direct kernels, kernels/direct.py): bwd_data
// writes the input pixels between the strided ones from the taps whose phase meets an output
// pixel; bwd_weight with a channel multiplier of 2.
// RUN: %convgen --operation conv2d_bwd_data -t f16 -fil_layout=gkyxc -in_layout=nhwgc -out_layout=nhwgk -groupsize=12 -batchsize=2 -in_channels=12 -out_channels=12 -in_h=11 -in_w=13 -fil_h=5 -fil_w=5 --padding_h=2 --padding_w=2 -conv_stride_h=2 -conv_stride_w=2 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// RUN: %convgen --operation conv2d_bwd_weight -t f16 -fil_layout=gkyxc -in_layout=nhwgc -out_layout=nhwgk -groupsize=12 -batchsize=2 -in_channels=12 -out_channels=24 -in_h=11 -in_w=13 -fil_h=5 -fil_w=5 --padding_h=2 --padding_w=2 -conv_stride_h=2 -conv_stride_w=2 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
