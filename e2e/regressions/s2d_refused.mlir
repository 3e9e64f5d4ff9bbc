// -perf_config s2d where the fold cannot go: one error naming why, exit 2.
// RUN: not %convgen --operation conv2d_bwd_data -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=3 -out_channels=24 -in_h=13 -in_w=11 -fil_h=7 -fil_w=7 -conv_stride_h=2 -conv_stride_w=2 --padding_h=3 --padding_w=3 -perf_config s2d=2 %pv 2>&1 | FileCheck %s --check-prefix=COLS
// RUN: not %convgen --operation conv2d -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=3 -out_channels=8 -in_h=9 -in_w=9 -fil_h=3 -fil_w=3 -perf_config s2d=1 %pv 2>&1 | FileCheck %s --check-prefix=STRIDE
// COLS: convgen: error: -perf_config: s2d=2: bwd_data cannot fold the filter's columns: its output would be a view whose columns overlap (s2d=1 can)
// STRIDE: convgen: error: -perf_config: s2d=1: stride 1: no stride to fold
