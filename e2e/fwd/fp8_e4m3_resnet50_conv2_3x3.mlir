// A ResNet-50 layer (conv2_x 3x3, 64 channels, 56x56) with fp8 e4m3 inputs, both paths.
// REQUIRES: gpu, fp8-e4m3
// RUN: %convgen --operation conv2d -t fp8_e4m3 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=16 -in_channels=64 -out_channels=64 -in_h=56 -in_w=56 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 %pv %random_data -x2 -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// RUN: %convgen --operation conv2d -t fp8_e4m3 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=16 -in_channels=64 -out_channels=64 -in_h=56 -in_w=56 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 -pv_with_gpu %random_data -x2=0 -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
