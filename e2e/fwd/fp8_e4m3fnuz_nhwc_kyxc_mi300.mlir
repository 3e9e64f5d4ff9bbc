// MI300's own fp8 (e4m3 "fnuz": no -0, no infinity, bias 8): gfx942 matrix cores take it
// natively (v_mfma_*_fp8_fp8, tests/test_isa.py). NVIDIA has no such type.
// REQUIRES: fp8-e4m3fnuz
// RUN: %convgen --operation conv2d -t f8E4M3FNUZ -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=8 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 %pv %random_data %xdlops -RMS_threshold %rms_threshold -absDiff_threshold %abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s
// CHECK: [1 1 1]
