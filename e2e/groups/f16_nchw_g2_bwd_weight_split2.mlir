// Two groups, backward weight, the reduction split in two parts on the matrix-core path:
// each group's gradient reads its own output-gradient channels, and both parts are summed.
// RUN: %convgen --operation conv2d_bwd_weight -t f16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -groupsize=2 -batchsize=3 -in_channels=4 -out_channels=6 -in_h=7 -in_w=6 -fil_h=3 -fil_w=2 --padding_h=1 -perf_config split=2 %pv %random_data %away_from_zero %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
