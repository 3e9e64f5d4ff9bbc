// Products of two e5m2 values near 2^-16 are 2^-32, below fp16's range: Triton's
// interpreter computed its fp8 dots through fp16 and lost them (maxAbsDiff 1.1e-5 where an
// exact fp32 sum gives 0). Found by the false-alarm census of scripts/verifier-power (seed 369).
// REQUIRES: fp8-e5m2
// RUN: %convgen --operation conv2d_bwd_data -t fp8_e5m2 -groupsize 1 -batchsize 3 -in_channels 2 -out_channels 7 -in_h 7 -in_w 2 -fil_h 2 -fil_w 1 -dilation_h 2 -dilation_w 1 -padding_h 1 -padding_w 0 -in_layout nhwc -fil_layout kyxc -out_layout nkhw -rand 369 %pv -x2 | FileCheck %s
// CHECK: [1 1 1]
