// The tensor-descriptor kernel (kernels/tma.py) for backward-data: output-gradient boxes
// at negative and past-the-end coordinates (the padding), channel blocks that end past C.
// REQUIRES: tma
// RUN: %convgen --operation conv2d_bwd_data -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=3 -in_channels=24 -out_channels=40 -in_h=7 -in_w=9 -fil_h=3 -fil_w=5 --padding_h=1 --padding_w=2 -perf_config block_m=32,block_n=16,block_k=16,tma=1 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
