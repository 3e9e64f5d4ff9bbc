// REQUIRES: gpu
// RUN: %convgen --operation conv2d -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=64 -in_channels=256 -out_channels=128 -in_h=56 -in_w=56 -fil_h=1 -fil_w=1 -conv_stride_h=2 -conv_stride_w=2 %pv %random_data -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
