// Backward-weight splits its N*Ho*Wo reduction over programs and must combine the parts
// in a fixed order: two runs on the same inputs give bit-identical weights (an atomic
// combine would pass the numeric check and still differ from run to run).
// RUN: rm -rf %t && mkdir -p %t
// RUN: %convgen --operation conv2d_bwd_weight -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=3 -in_channels=8 -out_channels=16 -in_h=9 -in_w=9 -fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1 -perf_config split=4 %pv %random_data %away_from_zero %xdlops --dump %t/a | FileCheck %s
// RUN: %convgen --operation conv2d_bwd_weight -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=3 -in_channels=8 -out_channels=16 -in_h=9 -in_w=9 -fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1 -perf_config split=4 %pv %random_data %away_from_zero %xdlops --dump %t/b | FileCheck %s
// RUN: diff %t/a/kernel.npy %t/b/kernel.npy
// CHECK: [1 1 1]
