// RUN: %convgen --operation conv2d_bwd_weight -t f16 -fil_layout=gkyxc -in_layout=nhwgc -out_layout=nhwgk -g 3 -batchsize=2 -in_channels=9 -out_channels=6 -in_h=8 -in_w=8 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
