// fp32 through NVIDIA tensor cores in tf32 (10-bit mantissa products): the auto
// thresholds take the coarser products into account (u_comp = 2^-9: each operand is
// cut to 10 mantissa bits, up to 2^-10 of it, so a product up to 2^-9), so the test
// passes where tf32 runs and would fail if the kernel silently dropped more precision.
// REQUIRES: cuda && matrix-cores
// RUN: %convgen --operation conv2d -t f32 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=4 -in_channels=64 -out_channels=64 -in_h=28 -in_w=28 -fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1 %pv %random_data -x2 -input_precision tf32 -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
