// MI200 (gfx90a) matrix instructions flush fp16 subnormal inputs to zero; other GPUs keep
// them. -flush_subnormals makes any device (and the interpreter) do what MI200 does, so
// this runs everywhere: with the reference flushed too, every bit passes; with only the
// kernel flushed, every bit fails (the suite can tell the two behaviours apart).
// Inputs in [0, 1e-4]: most are fp16 subnormals (< 6.1e-5); the filter is all ones.
// RUN: %convgen --operation conv2d -t f16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=2 -in_channels=8 -out_channels=4 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3 -rand 5 -rand_side input -rand_min 0 -rand_max 1e-4 %pv %xdlops -flush_subnormals -ref_flush_subnormals | FileCheck %s
// RUN: %convgen --operation conv2d -t f16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=2 -in_channels=8 -out_channels=4 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3 -rand 5 -rand_side input -rand_min 0 -rand_max 1e-4 %pv %xdlops -flush_subnormals | FileCheck %s --check-prefix=ONLY-KERNEL-FLUSHED
// CHECK: [1 1 1]
// ONLY-KERNEL-FLUSHED: RMS bit 0
// ONLY-KERNEL-FLUSHED: [0 0 0]
