// RUN: %convgen --operation conv2d -t f16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=4 -in_channels=16 -out_channels=32 -in_h=14 -in_w=14 -fil_h=1 -fil_w=1 -conv_stride_h=2 -conv_stride_w=2 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
