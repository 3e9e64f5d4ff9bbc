// Two groups, forward, FMA path: each group reads its own input channels (a kernel that
// reads every group's input at group 0 gets the second group wrong).
// RUN: %convgen --operation conv2d -t f32 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -groupsize=2 -batchsize=2 -in_channels=6 -out_channels=4 -in_h=5 -in_w=6 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 %pv %random_data -x2=0 -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
