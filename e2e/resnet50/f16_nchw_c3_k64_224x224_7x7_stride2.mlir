// REQUIRES: gpu
// RUN: %convgen --operation conv2d -t f16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=32 -in_channels=3 -out_channels=64 -in_h=224 -in_w=224 -fil_h=7 -fil_w=7 -conv_stride_h=2 -conv_stride_w=2 --padding_h=3 --padding_w=3 %pv %random_data %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
