// RUN: %convgen --operation conv2d -t f32 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=1 -in_channels=7 -out_channels=13 -in_h=11 -in_w=13 -fil_h=5 -fil_w=3 --padding_h=2 --padding_w=1 %pv %random_data %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
