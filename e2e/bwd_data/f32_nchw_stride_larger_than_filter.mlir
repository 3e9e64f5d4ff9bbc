// RUN: %convgen --operation conv2d_bwd_data -t f32 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=3 -in_channels=5 -out_channels=7 -in_h=11 -in_w=11 -fil_h=1 -fil_w=2 -conv_stride_h=3 -conv_stride_w=4 %pv %random_data %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
