// REQUIRES: gpu
// RUN: %convgen --operation conv2d -t f32 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=64 -in_channels=256 -out_channels=64 -in_h=56 -in_w=56 -fil_h=1 -fil_w=1 %pv %random_data %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
