// RUN: %convgen --operation conv2d_bwd_data -t f16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=2 -in_channels=8 -out_channels=8 -in_h=8 -in_w=8 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 -pv_with_gpu %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
