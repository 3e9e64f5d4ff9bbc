// The tensor-descriptor kernel (kernels/tma.py): pixel boxes that reach past every edge
// (a 7x9 output of 3 images in boxes of 32 pixels, config.pixel_box), channels that end
// inside a block (24 of 16+16), padding read as zeros from negative box coordinates.
// REQUIRES: tma
// RUN: %convgen --operation conv2d -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=3 -in_channels=24 -out_channels=40 -in_h=7 -in_w=9 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=2 -dilation_w=2 -perf_config block_m=32,block_n=16,block_k=16,tma=1 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// RUN: %convgen --operation conv2d -t bf16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=16 -out_channels=24 -in_h=7 -in_w=10 -fil_h=1 -fil_w=1 -conv_stride_h=2 -conv_stride_w=3 -perf_config block_m=16,block_n=16,block_k=16,tma=1 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
