// i8 accumulates exactly in i32: the default thresholds are exact (0).
// RUN: %convgen --operation conv2d -t i8 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=16 -out_channels=8 -in_h=8 -in_w=8 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 -pv %random_data %xdlops | FileCheck %s
// CHECK: [1 1 1]
