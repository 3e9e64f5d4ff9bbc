// RUN: %convgen --operation conv2d -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=8 -out_channels=8 -in_h=10 -in_w=9 -fil_h=3 -fil_w=3 -padding_h_l=0 -padding_h_r=2 -padding_w_l=2 -padding_w_r=1 %pv %random_data %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
