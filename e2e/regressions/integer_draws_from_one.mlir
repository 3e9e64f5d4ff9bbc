// Integer draws whose range starts at 1 (-rand_min 1), or holds one value, crashed on a
// GPU before any kernel ran: a GPU launch passes an integer argument equal to 1 as a
// constant, and the Philox draw kernel (kernels/draw.py) called .to() on it
// ("'int' object has no attribute 'to'"). The interpreter does not specialize arguments,
// so the CPU never saw it. Found by `convgen fuzz --seed 11` on an H100 (case 6, shrunk
// to the first line's 1x1 problem); the second line draws a one-value range, the third
// integers into a floating-point type.
// RUN: %convgen --operation conv2d -t i8 -in_layout nchw -fil_layout kcyx -out_layout nkhw -batchsize 1 -groupsize 1 -in_channels 1 -out_channels 1 -in_h 1 -fil_h 1 -in_w 1 -fil_w 1 -rand 1 -rand_min 1 -rand_max 3 -rand_both_signs -pv | FileCheck %s
// RUN: %convgen --operation conv2d -t i8 -batchsize 2 -in_channels 3 -out_channels 5 -in_h 4 -fil_h 3 -in_w 5 -fil_w 2 -rand 3 -rand_min 2 -rand_max 2 -pv | FileCheck %s
// RUN: %convgen --operation conv2d_bwd_weight -t f16 -fil_layout kyxc -in_layout nhwc -out_layout nhwk -batchsize 2 -in_channels 8 -out_channels 8 -in_h 5 -fil_h 3 -in_w 5 -fil_w 3 -padding_h 1 -padding_w 1 -rand 2 -rand_type int -rand_min 1 -rand_max 3 %pv | FileCheck %s
// CHECK: [1 1 1]
