// A 3x3 stride-2 filter on the backward tensor-descriptor kernels (kernels/tma.py): the
// input (or its gradient) as four phase views; 9x7 gives the phases unequal sizes.
// bwd_data writes each phase's pixels from its own programs, the strided 1x1 filter's
// untouched phases as zeros; bwd_weight's taps each read one phase.
// REQUIRES: tma
// RUN: %convgen --operation conv2d_bwd_data -t bf16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=16 -out_channels=24 -in_h=9 -in_w=7 -fil_h=3 -fil_w=3 -conv_stride_h=2 -conv_stride_w=2 --padding_h=1 --padding_w=1 -perf_config block_m=32,block_n=16,block_k=16,tma=1 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// RUN: %convgen --operation conv2d_bwd_weight -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=16 -out_channels=24 -in_h=9 -in_w=7 -fil_h=3 -fil_w=3 -conv_stride_h=2 -conv_stride_w=2 --padding_h=1 --padding_w=1 -perf_config block_m=16,block_n=16,block_k=16,split=3,tma=1 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// RUN: %convgen --operation conv2d_bwd_data -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=3 -in_channels=16 -out_channels=16 -in_h=7 -in_w=6 -fil_h=1 -fil_w=1 -conv_stride_h=2 -conv_stride_w=2 -perf_config block_m=32,block_n=16,block_k=16,tma=1 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
