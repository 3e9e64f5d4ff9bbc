// A 3-D depthwise-like bwd_weight where the direct rule cuts the reduction into 528 parts:
// the kernel that sums the parts unrolled its loop over them (tl.static_range), and
// Triton's compile of it ran for minutes on an H100 (stopped at 120 s, inside make_ttgir).
// The loop is a plain range now, still summing the parts in order; the run takes about 11 s
// there, compile included. Found by `convgen fuzz --large --seed 13` on an H100 (case 99).
// REQUIRES: gpu
// RUN: %convgen --operation conv2d_bwd_weight -t f32 -in_layout 021nc -fil_layout 2ck10 -out_layout kn120 -batchsize 6 -groupsize 3 -in_channels 6 -out_channels 9 -in_d 19 -fil_d 3 -dilation_d 3 -padding_d 2 -in_h 31 -fil_h 4 -dilation_h 3 -padding_h 1 -in_w 25 -fil_w 2 -padding_w 4 -rand 163 -rand_type int -pv_with_gpu | FileCheck %s
// CHECK: [1 1 1]
