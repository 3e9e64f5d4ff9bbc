// RUN: %convgen --operation conv2d_bwd_weight -t f32 -fil_layout=cyxk -in_layout=chwn -out_layout=khwn -batchsize=3 -in_channels=4 -out_channels=6 -in_h=7 -in_w=7 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 %pv %random_data %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
