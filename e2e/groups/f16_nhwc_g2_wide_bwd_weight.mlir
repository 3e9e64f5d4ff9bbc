// Groups of more than 8 channels (12 in, 10 out) run the grouped implicit GEMM, not the
// direct kernels: the GEMM kernels' group offsets stay under test in the PR set.
// RUN: %convgen --operation conv2d_bwd_weight -t f16 -fil_layout=gkyxc -in_layout=nhwgc -out_layout=nhwgk -groupsize=2 -batchsize=2 -in_channels=24 -out_channels=20 -in_h=7 -in_w=9 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
