// fp8 (OCP e5m2: 2 mantissa bits) inputs, fp32 output; the rocMLIR spelling -t bf8.
// REQUIRES: fp8-e5m2
// RUN: %convgen --operation conv2d -t bf8 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=3 -in_channels=5 -out_channels=7 -in_h=9 -in_w=8 -fil_h=3 -fil_w=2 -conv_stride_h=2 -conv_stride_w=2 --padding_h=1 --padding_w=0 %pv %random_data %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
