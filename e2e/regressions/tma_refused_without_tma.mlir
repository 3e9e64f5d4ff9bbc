// -perf_config tma=1 on a device without tensor memory access (AMD, NVIDIA before sm90):
// one error naming the device, exit 2.
// REQUIRES: matrix-cores
// UNSUPPORTED: tma
// RUN: not %convgen --operation conv2d -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=16 -out_channels=16 -in_h=9 -in_w=9 -fil_h=3 -fil_w=3 -perf_config tma=1 -x2 %pv 2>&1 | FileCheck %s
// CHECK: convgen: error: -perf_config: tma=1: {{.*}} has no tensor memory accelerator (NVIDIA sm90 or newer)
