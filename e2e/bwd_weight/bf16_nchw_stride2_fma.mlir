// RUN: %convgen --operation conv_bwd_weight -t bf16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=2 -in_channels=4 -out_channels=6 -in_h=11 -in_w=9 -fil_h=3 -fil_w=3 -conv_stride_h=2 -conv_stride_w=2 --padding_h=1 --padding_w=1 %pv %random_data -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
