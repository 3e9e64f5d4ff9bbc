// On MI200 (gfx90a, feature subnormal-flush) the matrix instructions flush fp16 subnormal
// inputs: the kernel, with no emulation asked for, matches a reference whose inputs
// are flushed (-ref_flush_subnormals), as the fp16 study found.
// REQUIRES: subnormal-flush
// RUN: %convgen --operation conv2d -t f16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=2 -in_channels=8 -out_channels=4 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3 -rand 5 -rand_side input -rand_min 0 -rand_max 1e-4 %pv -x2 -ref_flush_subnormals | FileCheck %s
// CHECK: [1 1 1]
