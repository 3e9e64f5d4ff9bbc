// 3-D forward at odd sizes: depth padding on one side, strides and dilation in depth,
// two groups, both kernel paths, the CPU and the GPU reference (depth.py runs it as one
// 2-D launch per filter depth tap).
// RUN: %convgen --operation conv -t f16 -fil_layout=gkczyx -in_layout=ngcdhw -out_layout=ngkdhw -batchsize=2 -groupsize=2 -in_channels=6 -out_channels=4 -in_d=7 -in_h=5 -in_w=6 -fil_d=3 -fil_h=3 -fil_w=2 --padding_d_l=2 --padding_d_r=0 --padding_h=1 --conv_stride_d=2 --dilation_d=1 %pv %random_data %away_from_zero %xdlops | FileCheck %s
// RUN: %convgen --operation conv -t f16 -fil_layout=gkczyx -in_layout=ngcdhw -out_layout=ngkdhw -batchsize=2 -groupsize=2 -in_channels=6 -out_channels=4 -in_d=7 -in_h=5 -in_w=6 -fil_d=2 -fil_h=3 -fil_w=2 --padding_d=1 --dilation_d=3 -pv_with_gpu %random_data %away_from_zero -x2=0 | FileCheck %s
// CHECK: [1 1 1]
