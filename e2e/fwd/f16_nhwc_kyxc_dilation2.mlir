// RUN: %convgen --operation conv2d -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=16 -out_channels=8 -in_h=12 -in_w=12 -fil_h=3 -fil_w=3 -dilation_h=2 -dilation_w=2 --padding_h=2 --padding_w=2 %pv %random_data %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
