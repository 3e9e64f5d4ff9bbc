// 3-D backward weight with depth dilation and padding on both sides: each filter depth tap
// is its own 2-D backward-weight problem over the batch and the output depths.
// RUN: %convgen --operation conv_bwd_weight -t bf16 -fil_layout=kczyx -in_layout=ncdhw -out_layout=nkdhw -batchsize=3 -in_channels=4 -out_channels=5 -in_d=6 -in_h=5 -in_w=5 -fil_d=2 -fil_h=3 -fil_w=3 --padding_d=1 --padding_h=1 --padding_w=1 --dilation_d=2 %pv %random_data %away_from_zero %xdlops | FileCheck %s
// CHECK: [1 1 1]
