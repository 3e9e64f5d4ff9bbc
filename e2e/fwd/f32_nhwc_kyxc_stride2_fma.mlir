// RUN: %convgen --operation conv2d -t f32 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=6 -out_channels=10 -in_h=15 -in_w=15 -fil_h=3 -fil_w=3 -conv_stride_h=2 -conv_stride_w=2 --padding_h=1 --padding_w=1 %pv %random_data -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
