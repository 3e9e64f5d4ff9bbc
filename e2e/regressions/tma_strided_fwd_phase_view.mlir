// Strided fwd on the descriptor kernels reads every phase of the input through one
// five-dimensional descriptor (n, i, a, j, b*C + c). Its earlier form, four phase
// descriptors in four loops, passed the interpreter and failed on the H100 at 128-row
// tiles (docs/traps.md), so these run at real tile sizes: stride 2 with padding on odd
// channel counts of 16, stride 3, and a persistent launch.
// REQUIRES: tma, gpu
// RUN: %convgen --operation conv2d -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=37 -in_channels=48 -out_channels=80 -in_h=30 -in_w=22 -fil_h=3 -fil_w=3 -conv_stride_h=2 -conv_stride_w=2 -padding_h=1 -padding_w=1 -perf_config tma=1,block_m=128,block_n=64,block_k=16 -x2 %pv | FileCheck %s
// RUN: %convgen --operation conv2d -t bf16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=5 -in_channels=64 -out_channels=128 -in_h=27 -in_w=27 -fil_h=5 -fil_w=3 -conv_stride_h=3 -conv_stride_w=3 -padding_h=2 -padding_w=1 -perf_config tma=1,block_m=128,block_n=128,block_k=64,num_warps=8 -x2 %pv | FileCheck %s
// RUN: %convgen --operation conv2d -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=64 -in_channels=128 -out_channels=256 -in_h=28 -in_w=28 -fil_h=3 -fil_w=3 -conv_stride_h=2 -conv_stride_w=2 -padding_h=1 -padding_w=1 -perf_config tma=1,persistent=1,block_m=128,block_n=256,block_k=64,num_warps=8,num_stages=3 -x2 %pv | FileCheck %s
// CHECK: [1 1 1]
