// fp8 output gradient and filter, fp32 input gradient; stride 2 (residue classes).
// REQUIRES: fp8-e4m3
// RUN: %convgen --operation conv2d_bwd_data -t fp8_e4m3 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=6 -out_channels=8 -in_h=9 -in_w=9 -fil_h=3 -fil_w=3 -conv_stride_h=2 -conv_stride_w=2 --padding_h=1 --padding_w=1 %pv %random_data %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
