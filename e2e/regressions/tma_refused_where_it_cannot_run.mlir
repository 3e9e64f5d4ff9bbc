// -perf_config tma=1 where the descriptor kernels cannot go: one error naming why, exit 2.
// REQUIRES: tma
// RUN: not %convgen --operation conv2d -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=16 -out_channels=16 -in_h=10 -in_w=10 -fil_h=3 -fil_w=3 -conv_stride_h=3 -conv_stride_w=3 -perf_config tma=1 -x2 %pv 2>&1 | FileCheck %s --check-prefix=STRIDE
// RUN: not %convgen --operation conv2d -t f32 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=16 -out_channels=16 -in_h=9 -in_w=9 -fil_h=3 -fil_w=3 -perf_config tma=1 -x2 %pv 2>&1 | FileCheck %s --check-prefix=TYPE
// RUN: not %convgen --operation conv2d -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=16 -out_channels=16 -in_h=9 -in_w=9 -fil_h=3 -fil_w=3 -perf_config tma=1 %pv 2>&1 | FileCheck %s --check-prefix=FMA
// STRIDE: convgen: error: -perf_config: tma=1: {{.*}}stride 3x3 on a 10x10 input: fwd's phase view needs rows and columns that are multiples of the stride
// TYPE: convgen: error: -perf_config: tma=1: {{.*}}f32: only 16-bit floating-point types
// FMA: convgen: error: -perf_config: tma=1: the FMA path has no descriptor kernels
