// -flush_subnormals gives the kernel a flushed copy of its inputs. That copy must keep the
// inputs' memory as it was: torch gave the y and x dimensions of a 1x1 filter (size 1)
// stride 1, and on sm90 the descriptor kernels refused it ("strides must be 16-byte
// aligned", a traceback; found by convgen study on the H100). All three directions,
// channels last, 1x1, channels a multiple of 16 bytes: the descriptor kernels' case.
// RUN: %convgen --operation conv2d -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=32 -out_channels=16 -in_h=5 -in_w=7 -fil_h=1 -fil_w=1 %pv %random_data %xdlops -flush_subnormals -ref_flush_subnormals | FileCheck %s
// RUN: %convgen --operation conv2d_bwd_data -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=32 -out_channels=16 -in_h=5 -in_w=7 -fil_h=1 -fil_w=1 %pv %random_data %xdlops -flush_subnormals -ref_flush_subnormals | FileCheck %s
// RUN: %convgen --operation conv2d_bwd_weight -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=32 -out_channels=16 -in_h=5 -in_w=7 -fil_h=1 -fil_w=1 %pv %random_data %xdlops -flush_subnormals -ref_flush_subnormals | FileCheck %s
// CHECK: [1 1 1]
