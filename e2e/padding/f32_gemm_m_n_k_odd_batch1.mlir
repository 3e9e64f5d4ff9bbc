// RUN: %convgen --operation conv2d -t f32 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=1 -in_channels=3 -out_channels=5 -in_h=7 -in_w=7 -fil_h=3 -fil_w=3 %pv %random_data %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
