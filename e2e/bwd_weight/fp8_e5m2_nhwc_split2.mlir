// fp8 input and output gradient, fp32 filter gradient, the reduction split in two parts;
// checked against the GPU FMA reference too.
// REQUIRES: fp8-e5m2
// RUN: %convgen --operation conv2d_bwd_weight -t fp8_e5m2 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=8 -out_channels=8 -in_h=8 -in_w=8 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 %pv %random_data %xdlops -perf_config split=2 -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// RUN: %convgen --operation conv2d_bwd_weight -t fp8_e5m2 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=8 -out_channels=8 -in_h=8 -in_w=8 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 -pv_with_gpu %random_data %xdlops -perf_config split=2 -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
