// The tensor-descriptor kernel (kernels/tma.py) for backward-weight: the reduction over
// pixel boxes split into 5 (3) parts, added in order; boxes past the image edges read
// zeros; the second line reads a strided 1x1 filter's input as a strided view.
// REQUIRES: tma
// RUN: %convgen --operation conv2d_bwd_weight -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=3 -in_channels=24 -out_channels=40 -in_h=7 -in_w=9 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 -perf_config block_m=16,block_n=16,block_k=16,split=5,tma=1 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// RUN: %convgen --operation conv2d_bwd_weight -t bf16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=16 -out_channels=24 -in_h=9 -in_w=7 -fil_h=1 -fil_w=1 -conv_stride_h=2 -conv_stride_w=2 -perf_config block_m=16,block_n=16,block_k=16,split=3,tma=1 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
