// RUN: %convgen --operation conv2d -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=1 -in_channels=8 -out_channels=12 -in_h=10 -in_w=10 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 %pv %random_data %away_from_zero -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
