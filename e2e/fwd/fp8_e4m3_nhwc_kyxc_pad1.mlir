// fp8 (OCP e4m3) inputs, fp32 accumulation and output; both paths. UNSUPPORTED where the
// device has no e4m3 (NVIDIA before sm89, AMD before gfx90a): convgen would refuse it.
// REQUIRES: fp8-e4m3
// RUN: %convgen --operation conv2d -t fp8_e4m3 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=9 -out_channels=16 -in_h=7 -in_w=7 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 %pv %random_data -x2 -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// RUN: %convgen --operation conv2d -t fp8_e4m3 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=9 -out_channels=16 -in_h=7 -in_w=7 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 %pv %random_data -x2=0 -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
